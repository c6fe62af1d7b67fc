package broker

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/sluice-mq/sluice/broker/node"
)

// This file owns what the group coordinator (broker/coordinator) needs of
// the cluster: where a group is placed, this broker's registration, the
// range of a partition at its leader, and the coordinator's start and stop
// with the broker.

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
