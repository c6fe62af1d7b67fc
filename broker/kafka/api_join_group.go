package kafka

// JoinGroup (key 11): a member joins or rejoins a group. The reply is parked
// until the join round completes (see group.Group.Join); only this
// connection waits. v4+ gives a new dynamic member an id first
// (MEMBER_ID_REQUIRED); v5+ carries group.instance.id (static membership).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleJoinGroup(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.JoinGroupRequest)
	jr := group.JoinRequest{
		MemberID:             r.MemberID,
		InstanceID:           derefString(r.InstanceID),
		ClientID:             req.clientID,
		ClientHost:           req.remoteHost,
		SessionTimeout:       time.Duration(r.SessionTimeoutMillis) * time.Millisecond,
		ProtocolType:         r.ProtocolType,
		RequireKnownMemberID: req.version >= 4,
	}
	if req.version >= 1 {
		jr.RebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	for _, p := range r.Protocols {
		jr.Protocols = append(jr.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	wait := b.coord.StartJoin(r.Group, jr)
	return waitReply(func() kmsg.Response {
		res := wait(ctx)
		resp := newResponse(req).(*kmsg.JoinGroupResponse)
		resp.MemberID = res.MemberID
		if res.Err != nil {
			resp.ErrorCode = node.ErrorCode(res.Err)
			resp.Generation = -1
			return resp
		}
		resp.Generation = int32(res.Generation)
		resp.ProtocolType = &res.ProtocolType
		resp.Protocol = &res.Protocol
		resp.LeaderID = res.Leader
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = m.ID
			rm.InstanceID = optString(m.InstanceID)
			rm.ProtocolMetadata = m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return resp
	}), nil
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// optString is nil for "", as Kafka sends absent instance ids.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
