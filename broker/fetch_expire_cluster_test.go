package broker

// A follower learns its leader's high watermark only from an answer to one
// of its fetches. The leader's core holds a fetch at the log end until new
// data, a new high watermark or the core's own deadline (ticks); the Kafka
// handler answers the request at its MaxWait. When the core's deadline came
// later than the request's (a loaded machine runs ticks late), the held
// fetch was left out of the response, the follower asked again, was held
// again with the same high watermark, and never learned it: the chaos run
// leader-kill, seed 3, ended with followers a few records behind their
// leaders for minutes after the workload stopped.

import (
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// TestClusterFollowersLearnTheHighWatermarkWhileTheLeaderTicksLate holds
// the leader's ticks (so its core never answers a held fetch on its own)
// and produces with acks=all: the follower whose fetch arrives after the
// other follower's has moved the high watermark is held with the new one,
// and must still learn it. On the old code it stayed one batch behind.
func TestClusterFollowersLearnTheHighWatermarkWhileTheLeaderTicksLate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	const topic = "late-ticks"
	createReplicated(t, c, topic, 1)
	lead := c.leaderOf(topic, 0)
	if lead < 0 {
		t.Fatal("no leader")
	}
	c.brokers[lead].HoldTicksForTest(true)
	t.Cleanup(func() { c.brokers[lead].HoldTicksForTest(false) })
	for i := range 3 {
		if got := produceAt(t, c.brokers[lead], topic, brokertest.Batch(2, -1, -1, -1, int64(i))); got.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, got.ErrorCode)
		}
	}
	lp, err := c.brokers[lead].PartitionOf(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lp.HighWatermark()
	if want != 6 {
		t.Fatalf("leader's high watermark %d after three acknowledged batches of two, want 6", want)
	}
	eventuallyTrue(t, "every follower at the leader's high watermark", func() (bool, string) {
		for i, b := range c.brokers {
			if i == lead {
				continue
			}
			p, err := b.PartitionOf(topic, 0)
			if err != nil {
				return false, err.Error()
			}
			if hw, _ := p.HighWatermark(); hw != want {
				return false, fmt.Sprintf("broker %d at high watermark %d (log end %d), the leader at %d", i+1, hw, p.Log().EndOffset(), want)
			}
		}
		return true, ""
	})
}
