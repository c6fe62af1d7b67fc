package kafka

// ListGroups (key 16): every live group this broker coordinates, filtered
// by state (v4+) and by type (v5+; every group here is "classic"). Clients
// ask every broker and merge. Until this broker has taken over its groups
// once after starting, the answer waits briefly, then is
// COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers while it loads.

import (
	"context"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const classicGroupType = "classic"

func handleListGroups(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.ListGroupsRequest)
	resp := newResponse(req).(*kmsg.ListGroupsResponse)
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	if !matches(r.TypesFilter, classicGroupType) {
		return done(resp), nil
	}
	if err := b.coord.AwaitPlaced(ctx); err != nil {
		resp.ErrorCode = node.ErrorCode(err)
		return done(resp), nil
	}
	for _, g := range b.coord.ListGroups() {
		if !matches(r.StatesFilter, g.State) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, classicGroupType
		resp.Groups = append(resp.Groups, lg)
	}
	return done(resp), nil
}
