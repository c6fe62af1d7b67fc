package kafka

// Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS
// tells it to rejoin.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleHeartbeat(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.HeartbeatRequest)
	resp := newResponse(req).(*kmsg.HeartbeatResponse)
	err := b.coord.Heartbeat(r.Group, r.MemberID, derefString(r.InstanceID), group.Generation(r.Generation))
	resp.ErrorCode = node.ErrorCode(err)
	return done(resp), nil
}
