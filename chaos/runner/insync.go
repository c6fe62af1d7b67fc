package runner

// insync.go owns the end-of-run check that the cluster healed whole: once
// the drain is done, every partition of the run's topics must have all its
// replicas back in its leader's in-sync set within syncTimeout, and the
// side topic's replicas (faults_lag.go) must agree wherever they overlap.
// A replica that never catches up is a liveness finding even when no
// acknowledged record was lost.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/cluster"
)

// syncTimeout bounds the wait for full in-sync sets after the drain.
const syncTimeout = time.Minute

// checkInSync waits until every partition of topics has its whole replica
// set in sync, and returns what is still out of sync at the deadline.
func checkInSync(ctx context.Context, c *cluster.Cluster, topics ...string) []string {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var missing []string
		for _, t := range topics {
			parts, err := c.Sync(ctx, t)
			if err != nil {
				missing = append(missing, err.Error())
				continue
			}
			for _, p := range parts {
				if !p.InSync() {
					missing = append(missing, fmt.Sprintf("%s/%d: leader %d, replicas %v, in sync %v", t, p.Partition, p.Leader, p.Replicas, p.ISR))
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return missing
		case <-tick.C:
		}
	}
}

// checkLagReplicas compares the side topic's replicas, if the run made it.
func checkLagReplicas(ctx context.Context, c *cluster.Cluster) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return []string{err.Error()}
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, lagTopic)
	if err != nil {
		return []string{fmt.Sprintf("metadata of %s: %v", lagTopic, err)}
	}
	td, ok := md.Topics[lagTopic]
	if !ok || td.Err != nil {
		return []string{fmt.Sprintf("%s missing from metadata", lagTopic)}
	}
	pd, ok := td.Partitions[0]
	if !ok {
		return []string{fmt.Sprintf("%s/0 missing from metadata", lagTopic)}
	}
	return lagCheck(ctx, cl, td.ID, pd.Replicas)
}
