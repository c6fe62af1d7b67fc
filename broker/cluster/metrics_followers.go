package cluster

// This file owns the leader's per-follower replication lag, computed at
// scrape time from the replica core's view of its followers
// (partition.Followers), and registered with the other replication metrics
// (registerReplicationMetrics):
//
//	sluice_partition_follower_lag_offsets{topic,partition,replica}
//
// the leader's log end minus the follower's last fetch offset in the
// current epoch.
//
// Invariant: the series are bounded: one per follower (replication factor
// minus one) of each partition this broker leads, and only for a follower
// that has fetched in the current epoch; replica is the follower's node id.
// Invariant: a scrape waits at most followerScrapeWait in all for the
// partitions' owner goroutines; a partition whose owner does not answer in
// time is left out of that scrape.

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
)

// followerScrapeWait bounds how long one scrape waits for the partitions'
// owner goroutines (a partition stalled on a slow fsync, say).
const followerScrapeWait = time.Second

type followerCollector struct {
	n   *node.Node
	lag *prometheus.Desc
}

// newFollowerCollector reports the replication lag of each follower of the
// partitions n leads.
func newFollowerCollector(n *node.Node) prometheus.Collector {
	return &followerCollector{n: n, lag: prometheus.NewDesc("sluice_partition_follower_lag_offsets",
		"The partition leader's log end minus a follower's last fetch offset in the current epoch, by follower (replica: its node id).",
		[]string{"topic", "partition", "replica"}, nil)}
}

func (c *followerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lag }

func (c *followerCollector) Collect(ch chan<- prometheus.Metric) {
	deadline := time.Now().Add(followerScrapeWait)
	type asked struct {
		p   *partition.Partition
		ans <-chan partition.FollowerReport
	}
	var all []asked
	for _, p := range c.n.AllPartitions() {
		if p.ReplicaStatus().Role != replica.RoleLeader {
			continue
		}
		if ans, ok := p.Followers(deadline); ok {
			all = append(all, asked{p, ans})
		}
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for _, a := range all {
		var r partition.FollowerReport
		select {
		case r = <-a.ans:
		case <-t.C:
			return // the rest are left out of this scrape
		}
		part := strconv.Itoa(int(a.p.Index()))
		for _, f := range r.Followers {
			if f.Fetched < 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(max(r.End-f.Fetched, 0)),
				a.p.Topic(), part, strconv.Itoa(int(f.ID)))
		}
	}
}
