package broker

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// This file owns what the group coordinator (broker/coordinator) needs of
// the cluster: where a group is placed, this broker's registration, the
// range of a partition at its leader, and the coordinator's start and stop
// with the broker.

// groupCoordinator is the broker that coordinates groupID in this broker's
// view of the cluster. Before the broker has registered it is itself.
func (b *Broker) GroupCoordinator(groupID string) meta.BrokerInfo {
	if bi, ok := coordinator.PlaceGroup(groupID, b.GroupPlacementBrokers()); ok {
		return bi
	}
	return meta.BrokerInfo{NodeID: b.Cfg.NodeID, AZ: b.Cfg.AZ, Kafka: b.kafka.Advertise()}
}

// groupPlacementBrokers is the live brokers, without this one once its own
// registration is lost (its claims went with the lease).
func (b *Broker) GroupPlacementBrokers() []meta.BrokerInfo {
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
func (b *Broker) Registration() (*meta.Registration, bool) {
	reg := b.reg.Load()
	if len(b.Brokers()) == 0 || reg == nil {
		return nil, false
	}
	return reg, true
}

func (b *Broker) registrationLost() bool {
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

func (b *Broker) startCoordinator(ctx context.Context) error {
	b.coord = coordinator.Start(ctx, b.Node, b)
	return nil
}

// PartitionRange is the log start and high watermark of a partition at its
// leader (coordinator.Cluster).
func (b *Broker) PartitionRange(ctx context.Context, t *node.Topic, index int32) (logStart, hw int64, err error) {
	if b.http == nil {
		return 0, 0, fmt.Errorf("partition range of %s-%d: %w", t.Meta.Name, index, node.ErrShuttingDown)
	}
	return b.http.PartitionRange(ctx, t, index)
}

func (b *Broker) stopCoordinator() {
	if b.coord != nil {
		b.coord.Stop()
	}
}
