package kafka

// LeaveGroup (key 13): members leave at once instead of waiting for their
// session to expire. v0-2 name one member; v3+ a batch, each answered on
// its own (a static member may be named by its instance id alone).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleLeaveGroup(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.LeaveGroupRequest)
	resp := newResponse(req).(*kmsg.LeaveGroupResponse)
	if req.version < 3 {
		resp.ErrorCode = node.ErrorCode(b.coord.Leave(r.Group, r.MemberID, ""))
		return done(resp), nil
	}
	switch _, err := b.coord.DescribeGroup(r.Group); {
	case errors.Is(err, node.ErrGroupNotFound):
		resp.ErrorCode = node.ErrorCode(group.ErrUnknownMember)
	case err != nil:
		// Not the coordinator (or not yet): the client looks it up again.
		resp.ErrorCode = node.ErrorCode(err)
		return done(resp), nil
	}
	for _, m := range r.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		rm.ErrorCode = node.ErrorCode(b.coord.Leave(r.Group, m.MemberID, derefString(m.InstanceID)))
		resp.Members = append(resp.Members, rm)
	}
	return done(resp), nil
}
