package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a Fetch for partition 0 of topic; the client sends it at
// the highest version both sides support, so it names the topic both ways.
func fetchReq(b *Broker, topic string, offset int64, maxWait, minBytes, maxBytes, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = b.LookupTopic(topic).Meta.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, offset, partMax, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestFetchLongPoll: a fetch at the high watermark waits for data (min
// bytes) instead of answering empty, and answers as soon as a produce
// raises the high watermark, long before its max wait.
func TestFetchLongPoll(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "poll", 1, nil)
	ctx := context.Background()

	type result struct {
		resp *kmsg.FetchResponse
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := fetchReq(b, "poll", 0, 30000, 1, 1<<20, 1<<20).RequestWith(ctx, cl)
		done <- result{resp, err, time.Since(start)}
	}()
	select {
	case r := <-done:
		t.Fatalf("fetch at the high watermark answered at once (%v, %v) instead of waiting", r.took, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "poll", Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := brokertest.RecvWithin(t, done, 20*time.Second, "the long-polling fetch to answer after a produce")
	if r.err != nil {
		t.Fatal(r.err)
	}
	p := r.resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("woken fetch: code %d hw %d %d bytes", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}
	if r.took > 25*time.Second { // a timed-out poll would take the full 30 s
		t.Fatalf("the fetch waited %v: it was not woken by the produce", r.took)
	}

	// With MinBytes 0 (or a zero wait) an empty fetch answers at once.
	resp, err := fetchReq(b, "poll", 1, 20000, 0, 1<<20, 1<<20).RequestWith(ctx, cl)
	if err != nil || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("min bytes 0: %v", err)
	}
}

// TestFetchByteLimits: partition max bytes and max bytes cut whole batches,
// but the first batch is returned even when it is larger than the limits.
func TestFetchByteLimits(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "limits", 1, nil)
	ctx := context.Background()
	for i := 0; i < 5; i++ { // five separate batches of ~2 KiB
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "limits", Value: make([]byte, 2000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(resp *kmsg.FetchResponse) int {
		return node.CountRecords(resp.Topics[0].Partitions[0].RecordBatches)
	}
	for _, tt := range []struct {
		name              string
		maxBytes, partMax int32
		want              int
	}{
		{"everything", 1 << 20, 1 << 20, 5},
		{"partition max below one batch", 1 << 20, 100, 1},
		{"max bytes below one batch", 100, 1 << 20, 1},
		{"partition max of two batches", 1 << 20, 4300, 2},
	} {
		resp, err := fetchReq(b, "limits", 0, 0, 0, tt.maxBytes, tt.partMax).RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := count(resp); got != tt.want {
			t.Errorf("%s: %d records, want %d", tt.name, got, tt.want)
		}
	}
}

// TestFetchBrokerMaxBytes: the broker's fetch max bytes caps what a Kafka
// fetch and an HTTP fetch return, whatever the client asks, but the first
// batch is returned whole even when it alone is over the cap.
func TestFetchBrokerMaxBytes(t *testing.T) {
	for _, tt := range []struct {
		name          string
		fetchMaxBytes int32
		want          int // of five ~2 KiB batches, asking for 1 MiB
	}{
		{"cap of two batches", 4300, 2},
		{"cap below one batch", 1024, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testBrokerConfig(t)
			cfg.FetchMaxBytes = tt.fetchMaxBytes
			cfg.Coordinator.MinSessionTimeout = 500 * time.Millisecond
			b := startBroker(t, cfg)
			cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
			createTopic(t, cl, "capped", 1, nil)
			ctx := context.Background()
			for i := 0; i < 5; i++ { // five separate batches of ~2 KiB
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "capped", Value: make([]byte, 2000)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := fetchReq(b, "capped", 0, 0, 0, 1<<20, 1<<20).RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if got := node.CountRecords(resp.Topics[0].Partitions[0].RecordBatches); got != tt.want {
				t.Errorf("Kafka fetch: %d records, want %d", got, tt.want)
			}

			if got := httpFetchFromStart(t, b, "capped"); got != tt.want {
				t.Errorf("HTTP fetch: %d messages, want %d", got, tt.want)
			}
		})
	}
}

// TestFetchHeldToTheConsumerSlice: a tenant with a consumer_byte_rate reads
// at most a tenth of a second of it per fetch, over Kafka and over HTTP,
// whatever max_bytes the client asks for (the first batch whole). The old
// HTTP fetch read up to its 1 MiB default, a burst its tenant then waited
// out in 429s.
func TestFetchHeldToTheConsumerSlice(t *testing.T) {
	const rate = 43000 // a slice of 4300 bytes: two of the ~2 KiB batches
	cfg := testBrokerConfig(t)
	cfg.Coordinator.MinSessionTimeout = 500 * time.Millisecond
	b := startBroker(t, cfg)
	ctx := context.Background()
	if _, err := b.Store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.SetQuotas(ctx, meta.DefaultTenant, map[string]float64{quota.ConsumerByteRate: rate}, nil, quota.Check); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the quota followed", func() (bool, string) {
		l := b.Quotas().Limits(meta.DefaultTenant)
		return l[quota.ConsumerByteRate] == rate, fmt.Sprint(l)
	})
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "held", 1, nil)
	for range 5 { // five separate batches of ~2 KiB
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "held", Value: make([]byte, 2000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := fetchReq(b, "held", 0, 0, 0, 1<<20, 1<<20).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := node.CountRecords(resp.Topics[0].Partitions[0].RecordBatches); got != 2 {
		t.Errorf("Kafka fetch: %d records, want the 2 of one slice", got)
	}

	if got := httpFetchFromStart(t, b, "held"); got != 2 {
		t.Errorf("HTTP fetch: %d messages, want the 2 of one slice", got)
	}
}

// httpFetchFromStart joins group g over HTTP for topic and fetches its
// partition 0 from offset 0 with max_bytes 1 MiB; it returns how many
// messages came.
func httpFetchFromStart(t *testing.T, b *Broker, topic string) int {
	t.Helper()
	base := "http://" + b.Cfg.HTTPListen
	code, joined := postJSON(t, base+"/v1/groups/g/members:join", fmt.Sprintf(`{"topics":[%q],"session_timeout_ms":5000}`, topic))
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	code, fetched := postJSON(t, base+"/v1/groups/g/messages:fetch", fmt.Sprintf(
		`{"member_id":%q,"generation":%v,"topic":%q,"partition":0,"offset":0,"max_bytes":1048576}`,
		joined["member_id"], joined["generation"], topic))
	if code != 200 {
		t.Fatalf("HTTP fetch: %d %v", code, fetched)
	}
	return len(fetched["messages"].([]any))
}
