package coordinator

// This file owns the coordinator's administrative views and actions:
// describing, listing and deleting groups. They are shared by the Kafka
// handlers (DescribeGroups, ListGroups, DeleteGroups) and the HTTP API.

import (
	"context"
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/broker/group"
)

// GroupDescription is what DescribeGroups reports of a group.
type GroupDescription struct {
	Group        string
	State        string
	ProtocolType string
	Protocol     string // "" unless Stable
	Members      []group.MemberInfo
}

// GroupListing is what ListGroups reports of a group.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
}

// DescribeGroup describes one group; node.ErrGroupNotFound if there is none.
func (c *Coordinator) DescribeGroup(groupID string) (GroupDescription, error) {
	var d GroupDescription
	err := c.locked(context.Background(), groupID, false, func(gr *groupRunner) error {
		d = GroupDescription{
			Group:        groupID,
			State:        gr.g.State().String(),
			ProtocolType: gr.g.ProtocolType(),
			Members:      gr.g.Members(),
		}
		if gr.g.State() == group.Stable {
			d.Protocol = gr.g.Protocol()
		}
		return nil
	})
	return d, err
}

// ListGroups lists every live group this broker coordinates, sorted by id
// (Kafka's brokers do the same; clients merge the lists of all brokers).
func (c *Coordinator) ListGroups() []GroupListing {
	var out []GroupListing
	for _, gr := range c.snapshot() {
		gr.mu.Lock()
		if gr.serving() && gr.exists {
			out = append(out, GroupListing{Group: gr.g.ID(), ProtocolType: gr.g.ProtocolType(), State: gr.g.State().String()})
		}
		gr.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// DeleteGroup deletes an Empty group and its committed offsets:
// group.ErrNotEmpty while it has members, node.ErrGroupNotFound if absent.
func (c *Coordinator) DeleteGroup(ctx context.Context, groupID string) error {
	return c.locked(ctx, groupID, false, func(gr *groupRunner) error {
		if gr.g.State() != group.Empty {
			return fmt.Errorf("delete group %q in state %s: %w", groupID, gr.g.State(), group.ErrNotEmpty)
		}
		wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
		defer cancel()
		if err := c.store.DeleteGroupOffsetsIf(wctx, c.cfg.Tenant, groupID, gr.claimCond()); err != nil {
			return c.fenced(ctx, gr, err)
		}
		if err := gr.g.MarkDead(c.now()); err != nil {
			return err
		}
		c.release(ctx, gr, "group deleted")
		return nil
	})
}
