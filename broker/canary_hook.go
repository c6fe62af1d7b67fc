package broker

// This file starts the canary (broker/canary) when the configuration asks
// for it: a client of this broker's own Kafka listener, stopped with the
// other maintenance loops.

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/sluice-mq/sluice/broker/canary"
)

// runCanary probes this broker's AZ until ctx is cancelled.
func (b *Broker) runCanary(ctx context.Context) {
	c := canary.New(canary.Config{Brokers: []string{b.kafka.Addr()}, AZ: b.Cfg.AZ, NodeID: b.Cfg.NodeID,
		Dir: filepath.Join(b.Cfg.DataDir, "canary"), Interval: b.Cfg.CanaryInterval, Timeout: b.Cfg.CanaryTimeout,
		MinBrokers: b.clusterSize(), Logger: b.NodeLog, Registerer: b.M.Reg})
	if err := c.Run(ctx); err != nil {
		b.Logger.Error().Err(err).Msg("canary stopped")
	}
}

// clusterSize is how many brokers this one knows the cluster to have: the
// members of the embedded etcd's initial cluster (one member per broker),
// or 1 with an external etcd, whose members say nothing about brokers.
func (b *Broker) clusterSize() int {
	if len(b.Cfg.Meta.Endpoints) > 0 || b.Cfg.Meta.InitialCluster == "" {
		return 1
	}
	return len(strings.Split(b.Cfg.Meta.InitialCluster, ","))
}
