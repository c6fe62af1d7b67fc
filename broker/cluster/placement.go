package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// This file owns where consumer groups are placed in this broker's view of
// the cluster (rendezvous hashing over the live brokers, in
// broker/coordinator), this broker's registration as the coordinator
// sees it, and what replica placement (cluster.go, broker/controller)
// needs of a topic's tenant: its pool and its leaders per broker.

// groupCoordinator is the broker that coordinates groupID in this broker's
// view of the cluster. Before the broker has registered it is itself.
func (b *Cluster) GroupCoordinator(groupID string) meta.BrokerInfo {
	if bi, ok := coordinator.PlaceGroup(groupID, b.GroupPlacementBrokers()); ok {
		return bi
	}
	return meta.BrokerInfo{NodeID: b.Cfg.NodeID, AZ: b.Cfg.AZ, Kafka: b.addrs.Kafka}
}

// groupPlacementBrokers is the live brokers, without this one once its own
// registration is lost (its claims went with the lease), and without the
// draining ones (drain.go) unless every broker drains.
func (b *Cluster) GroupPlacementBrokers() []meta.BrokerInfo {
	bs := b.Brokers()
	lost := b.registrationLost()
	draining := b.Draining()
	if len(bs) == 0 || (!lost && len(draining) == 0) {
		return bs
	}
	out := make([]meta.BrokerInfo, 0, len(bs))
	for _, bi := range bs {
		if (!lost || bi.NodeID != b.Cfg.NodeID) && !slices.Contains(draining, bi.NodeID) {
			out = append(out, bi)
		}
	}
	if len(out) == 0 && len(draining) > 0 {
		// Every broker drains: placement goes on over all of them.
		for _, bi := range bs {
			if !lost || bi.NodeID != b.Cfg.NodeID {
				out = append(out, bi)
			}
		}
	}
	return out
}

// registration returns this broker's current registration once it has
// registered (a lost lease is replaced by a new registration: cluster.go).
func (b *Cluster) Registration() (*meta.Registration, bool) {
	reg := b.reg.Load()
	if len(b.Brokers()) == 0 || reg == nil {
		return nil, false
	}
	return reg, true
}

func (b *Cluster) registrationLost() bool {
	reg, ok := b.Registration()
	if !ok {
		return false
	}
	select {
	case <-reg.Lost():
		return true
	default:
		return false
	}
}

// tenantPlacement is what placement needs of the tenant of topic (an
// internal name, node.SplitName): the pool it is bound to, read from etcd
// at each placement so a change of pool applies from the next topic or
// partition on, and the preferred leaderships its topics already hold per
// broker, so its leaders spread over its pool. Existing partitions are not
// moved when the pool changes.
func (b *Cluster) tenantPlacement(ctx context.Context, topic string) (controller.Tenant, error) {
	tenant, _ := node.SplitName(topic)
	pool, err := b.Store.TenantPool(ctx, tenant)
	if err != nil {
		return controller.Tenant{}, fmt.Errorf("broker: place topic %q: pool of tenant %q: %w", topic, tenant, err)
	}
	leaders := map[controller.NodeID]int{}
	for _, t := range b.SortedTopics() {
		if owner, _ := node.SplitName(t.Meta.Name); owner != tenant {
			continue
		}
		for _, st := range t.States {
			if len(st.Replicas) > 0 {
				leaders[controller.NodeID(st.Replicas[0])]++
			}
		}
	}
	return controller.Tenant{Pool: pool, Leaders: leaders}, nil
}
