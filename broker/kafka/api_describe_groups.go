package kafka

// DescribeGroups (key 15): state, protocol and members of each group. An
// unknown group is reported Dead; v6+ also sets GROUP_ID_NOT_FOUND.

import (
	"context"
	"errors"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeGroups(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeGroupsRequest)
	resp := newResponse(req).(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		d, err := b.coord.DescribeGroup(id)
		switch {
		case errors.Is(err, node.ErrGroupNotFound):
			dg.State = "Dead"
			if req.version >= 6 {
				dg.ErrorCode = node.ErrorCode(err)
				msg := err.Error()
				dg.ErrorMessage = &msg
			}
		case err != nil:
			dg.ErrorCode = node.ErrorCode(err)
		default:
			dg.State, dg.ProtocolType, dg.Protocol = d.State, d.ProtocolType, d.Protocol
			for _, m := range d.Members {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID = m.ID, optString(m.InstanceID)
				dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
				dm.ProtocolMetadata, dm.MemberAssignment = m.Metadata, m.Assignment
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return done(resp), nil
}
