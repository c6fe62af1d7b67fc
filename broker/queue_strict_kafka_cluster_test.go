package broker

// The Go helper's strict pause across a consumer's restart and the kill of
// the partition's leader, which also coordinates the group: the pause
// lives in the group's committed offset (its metadata), which the
// coordinator's etcd record keeps, so neither changes anything.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/payload/retry"
	"github.com/sluice-mq/sluice/queue"
)

// TestRetryConsumerStrictPauseSurvivesLeaderKill: key A's first record
// fails for good (permanent), A pauses, B flows; the consumer stops; the
// leader of the partition, also the group's coordinator, is killed; a new
// consumer on the surviving brokers goes on with B and still holds A; a
// Resume brings A's records in their order.
func TestRetryConsumerStrictPauseSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createTopicWith(t, testClient(t, c.brokers[0]), "orders", 1, 3, map[string]string{"delivery.order": "per-key-strict",
		"retry.backoff.ms": "200", "retry.jitter": "0", "retry.max.attempts": "5"})
	leader := hostOf(t, c, "orders", 0)
	var group string
	for i := 0; group == ""; i++ {
		if id := fmt.Sprintf("shippers-%d", i); leader.GroupCoordinator(id).NodeID == leader.Cfg.NodeID {
			group = id
		}
	}
	var survivors []string
	var survivor *Broker
	for _, b := range c.brokers {
		if b != leader {
			survivors, survivor = append(survivors, b.KafkaAddr()), b
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := testClient(t, survivor)
	produceKV(t, ctx, admin, "orders", "A0", "B0", "A1", "B1")

	newConsumer := func() *retry.Consumer {
		cons, err := retry.NewConsumer(ctx, retry.Config{Group: group, Topics: []string{"orders"}}, kgo.SeedBrokers(survivors...))
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	c1 := newConsumer()
	w := newStrictWorker(t, c1, func(r *kgo.Record, n int) (string, bool) {
		return queue.ClassPermanent, string(r.Value) == "A0" && n == 1
	})
	w.until(ctx, "A0's nack and B's records", func() bool { return len(w.nacks) == 1 && slices.Contains(w.log, "B1") })
	if n := w.nacks[0]; n.Outcome != queue.Paused || !n.Paused {
		t.Fatalf("nack: %+v", n)
	}
	if err := c1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()

	c.stops[leader.Cfg.NodeID-1]()
	produceKV(t, ctx, admin, "orders", "A2", "B2")
	c2 := newConsumer()
	defer c2.Close()
	w2 := newStrictWorker(t, c2, func(*kgo.Record, int) (string, bool) { return "", false })
	w2.until(ctx, "B2 after the failover", func() bool { return slices.Contains(w2.log, "B2") })
	for until := time.Now().Add(1500 * time.Millisecond); time.Now().Before(until); {
		w2.poll(ctx, 300*time.Millisecond)
	}
	if got := ofKey(w2.log, "A"); len(got) != 0 {
		t.Fatalf("key A delivered while paused, after the restart and the failover: %v", got)
	}
	if st := durableState(t, ctx, admin, group, "orders"); st.Committed != 0 || len(st.Pauses) != 1 {
		t.Fatalf("durable state after the failover: %+v", st)
	}
	if err := c2.Resume("orders", 0, []byte("A")); err != nil {
		t.Fatal(err)
	}
	w2.resumed = true
	w2.until(ctx, "A's records after Resume", func() bool { return slices.Contains(w2.log, "A2") })
	if got := ofKey(w2.log, "A"); !slices.Equal(got, []string{"A0", "A1", "A2"}) {
		t.Fatalf("key A after Resume: %v, want [A0 A1 A2]", got)
	}
}
