package kafka

// SyncGroup (key 14): the leader hands out the assignment; every member
// receives its own. A follower's reply is parked until the leader's sync.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleSyncGroup(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.SyncGroupRequest)
	sr := group.SyncRequest{
		MemberID:     r.MemberID,
		InstanceID:   derefString(r.InstanceID),
		Generation:   group.Generation(r.Generation),
		ProtocolType: derefString(r.ProtocolType),
		Protocol:     derefString(r.Protocol),
		Assignments:  make(map[string][]byte, len(r.GroupAssignment)),
	}
	for _, a := range r.GroupAssignment {
		sr.Assignments[a.MemberID] = a.MemberAssignment
	}
	wait := b.coord.StartSync(r.Group, sr)
	return waitReply(func() kmsg.Response {
		res := wait(ctx)
		resp := newResponse(req).(*kmsg.SyncGroupResponse)
		if res.Err != nil {
			resp.ErrorCode = node.ErrorCode(res.Err)
			return resp
		}
		resp.ProtocolType = &res.ProtocolType
		resp.Protocol = &res.Protocol
		resp.MemberAssignment = res.Assignment
		return resp
	}), nil
}
