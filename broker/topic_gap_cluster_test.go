package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/meta"
)

// TestClusterTopicCreatedWhileABrokerStarts: a topic created after a
// broker loaded its topics and before its topic watch began is hosted by
// that broker too (cluster.ReconcileTopics). Before, broker 3 never opened
// its replica: it answered no fence for the partition, so once broker 1
// was gone the partition had no quorum and stayed leaderless (seen as a
// canary outage that never ended after a leader kill). Here broker 1 is
// stopped, and brokers 2 and 3 must elect a leader that takes writes.
func TestClusterTopicCreatedWhileABrokerStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	created := make(chan error, 1)
	testHookAfterLoadTopics = func(b *Broker) {
		if b.Cfg.NodeID != 3 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _, err := b.Store.CreateTopicWithPartitions(ctx,
			meta.Topic{Name: "gap", Partitions: 1, ReplicationFactor: 3}, [][]int32{{1, 2, 3}})
		created <- err
	}
	t.Cleanup(func() { testHookAfterLoadTopics = nil })
	c := startTestCluster(t, 3)
	testHookAfterLoadTopics = nil
	if err := <-created; err != nil {
		t.Fatalf("create the topic between broker 3's load and its watch: %v", err)
	}
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d hosts gap/0", i+1), func() (bool, string) {
			tp := b.LookupTopic("gap")
			if tp == nil {
				return false, "no such topic here"
			}
			if _, err := tp.Local(0); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	}
	c.stops[0]()
	cl := testClient(t, c.brokers[1], kgo.RecordRetries(100))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "gap", Value: []byte("after broker 1 stopped")}).FirstErr(); err != nil {
		t.Fatalf("produce to gap/0 with brokers 2 and 3: %v", err)
	}
}
