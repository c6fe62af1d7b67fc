package runner

// insync.go owns the end-of-run check that the cluster healed whole: once
// the drain is done and nothing more is produced, every partition of the
// run's topics must, within syncTimeout, have all its replicas in its
// leader's in-sync set and every replica's own high watermark at the
// leader's (a leader's in-sync set alone can be wrong: a follower stuck
// below the leader's log start was once counted in sync for ever). The side
// topic's replicas (faults_lag.go) must also agree wherever they overlap.
// A replica that never catches up is a liveness finding even when no
// acknowledged record was lost.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/cluster"
	"github.com/sluice-mq/sluice/chaos/replicas"
)

// syncTimeout bounds the wait for a healed cluster after the drain.
const syncTimeout = time.Minute

// checkInSync waits until every partition of topics is whole (notWhole
// finds nothing), and returns what is still not at the deadline.
func checkInSync(ctx context.Context, c *cluster.Cluster, topics ...string) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return []string{err.Error()}
	}
	defer cl.Close()
	deadline := time.Now().Add(syncTimeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var missing []string
		for _, t := range topics {
			missing = append(missing, notWhole(ctx, c, cl, t)...)
		}
		// The last full look is what is reported: one cut short by the
		// deadline would say only that it was cut short.
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		select {
		case <-ctx.Done():
			return append(missing, ctx.Err().Error())
		case <-tick.C:
		}
	}
}

// notWhole lists the partitions of topic that lack a replica in their
// in-sync set, or one of whose replicas reports a high watermark other
// than its leader's.
func notWhole(ctx context.Context, c *cluster.Cluster, cl *kgo.Client, topic string) []string {
	parts, err := c.Sync(ctx, topic)
	if err != nil {
		return []string{err.Error()}
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return []string{fmt.Sprintf("metadata of %s: %v", topic, err)}
	}
	id := md.Topics[topic].ID
	var out []string
	for _, p := range parts {
		if !p.InSync() {
			out = append(out, fmt.Sprintf("%s/%d: leader %d, replicas %v, in sync %v", topic, p.Partition, p.Leader, p.Replicas, p.ISR))
			continue
		}
		want, err := replicas.HighWatermark(ctx, cl, topic, id, p.Partition, p.Leader)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		for _, r := range p.Replicas {
			if r == p.Leader {
				continue
			}
			hw, err := replicas.HighWatermark(ctx, cl, topic, id, p.Partition, r)
			switch {
			case err != nil:
				out = append(out, err.Error())
			case hw != want:
				out = append(out, fmt.Sprintf("%s/%d: broker %d at high watermark %d, its leader %d at %d", topic, p.Partition, r, hw, p.Leader, want))
			}
		}
	}
	return out
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
