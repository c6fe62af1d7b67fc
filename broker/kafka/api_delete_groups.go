package kafka

// DeleteGroups (key 42): deletes empty groups and their committed offsets;
// NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND if unknown.

import (
	"context"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteGroups(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DeleteGroupsRequest)
	resp := newResponse(req).(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		if err := b.coord.DeleteGroup(ctx, id); err != nil {
			dg.ErrorCode = node.ErrorCode(err)
			if req.version >= 3 {
				msg := err.Error()
				dg.ErrorMessage = &msg
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return done(resp), nil
}
