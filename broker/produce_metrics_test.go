package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// histogramCount is the sample count and sum of b's histogram name whose
// labels include the given name=value pairs; zeros if there is none.
func histogramCount(t testing.TB, b *Broker, name string, labels ...string) (uint64, float64) {
	t.Helper()
	m := findMetric(t, b, name, labels...)
	if m == nil {
		return 0, 0
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestProduceAckMetrics produces with acks=all, 1 and 0 through franz-go
// clients and checks that sluice_produce_ack_seconds observed each answer
// under its acks, and that a Produce naming a topic that does not exist
// counts each of its partitions in sluice_produce_errors_total.
func TestProduceAckMetrics(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	admin := testClient(t, b)
	createTopic(t, admin, "acked", 1, nil)
	ctx := context.Background()

	for _, c := range []struct {
		acks  string
		opts  []kgo.Opt
		count int
	}{
		{"all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, 3},
		{"1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, 4},
		{"0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}, 5},
	} {
		cl := testClient(t, b, append(c.opts, kgo.DefaultProduceTopic("acked"))...)
		before, _ := histogramCount(t, b, "sluice_produce_ack_seconds", "acks", c.acks)
		for i := 0; i < c.count; i++ {
			// One record per request: each is flushed before the next.
			if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
				t.Fatalf("acks=%s: %v", c.acks, err)
			}
		}
		// An acks=0 request is observed when its append completes, after
		// the client has moved on.
		brokertest.Eventually(t, 10*time.Second, "acks="+c.acks+" observed", func() bool {
			n, _ := histogramCount(t, b, "sluice_produce_ack_seconds", "acks", c.acks)
			return n-before >= uint64(c.count)
		})
		n, sum := histogramCount(t, b, "sluice_produce_ack_seconds", "acks", c.acks)
		if n-before != uint64(c.count) {
			t.Errorf("acks=%s: %d answers observed, want %d", c.acks, n-before, c.count)
		}
		if sum <= 0 {
			t.Errorf("acks=%s: the observed times sum to %v", c.acks, sum)
		}
	}
	if got := metricValue(t, b, "sluice_produce_errors_total", "code", "UNKNOWN_TOPIC_OR_PARTITION"); got != 0 {
		t.Fatalf("errors before any failed produce: %v", got)
	}

	// Two partitions of a topic that does not exist, sent to the broker
	// directly (the client would not route them).
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "no-such-topic"
	for i := int32(0); i < 2; i++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = i
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	allBefore, _ := histogramCount(t, b, "sluice_produce_ack_seconds", "acks", "all")
	resp, err := req.RequestWith(ctx, admin.Broker(int(b.Cfg.NodeID)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode == 0 {
			t.Fatalf("partition %d of a missing topic accepted", p.Partition)
		}
	}
	if got := metricValue(t, b, "sluice_produce_errors_total", "code", "UNKNOWN_TOPIC_OR_PARTITION"); got != 2 {
		t.Errorf("sluice_produce_errors_total{code=UNKNOWN_TOPIC_OR_PARTITION} = %v, want 2", got)
	}
	if n, _ := histogramCount(t, b, "sluice_produce_ack_seconds", "acks", "all"); n != allBefore+1 {
		t.Errorf("the refused request: %d acks=all answers observed, want 1", n-allBefore)
	}
}
