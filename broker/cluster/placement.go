package cluster

import (
	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/meta"
)

// This file owns where consumer groups are placed in this broker's view of
// the cluster (rendezvous hashing over the live brokers, in
// broker/coordinator) and this broker's registration as the coordinator
// sees it.

// groupCoordinator is the broker that coordinates groupID in this broker's
// view of the cluster. Before the broker has registered it is itself.
func (b *Cluster) GroupCoordinator(groupID string) meta.BrokerInfo {
	if bi, ok := coordinator.PlaceGroup(groupID, b.GroupPlacementBrokers()); ok {
		return bi
	}
	return meta.BrokerInfo{NodeID: b.Cfg.NodeID, AZ: b.Cfg.AZ, Kafka: b.addrs.Kafka}
}

// groupPlacementBrokers is the live brokers, without this one once its own
// registration is lost (its claims went with the lease).
func (b *Cluster) GroupPlacementBrokers() []meta.BrokerInfo {
	bs := b.Brokers()
	if len(bs) == 0 || !b.registrationLost() {
		return bs
	}
	out := make([]meta.BrokerInfo, 0, len(bs))
	for _, bi := range bs {
		if bi.NodeID != b.Cfg.NodeID {
			out = append(out, bi)
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
