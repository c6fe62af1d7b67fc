package broker

// Object storage down for a while: uploads fail and retry, nothing that was
// not uploaded is deleted, produce goes on until the local disk watermark
// and then gets a retriable error; once the store is back everything is
// uploaded, the local logs shrink, produce is accepted again and a replay
// from 0 returns every acknowledged record.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/s3"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

func TestTieringStoreDownDiskWatermark(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := s3test.Start(t)
	s3cfg, err := s3.ParseURL(srv.URL(fmt.Sprintf("down-%d", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := s3.New(context.Background(), s3cfg, srv.Options())
	if err != nil {
		t.Fatal(err)
	}
	store := fault.New(inner, fault.Config{Seed: 1})
	store.SetDown(true)
	cfg := testBrokerConfig(t)
	cfg.Objects = store
	cfg.TierChunkBytes = 2048
	const limit = 96 << 10
	cfg.LocalMaxBytes = limit
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(3*time.Second))
	const topic = "down"
	createTopic(t, cl, topic, 1, tieringConfigs)
	p, err := b.PartitionOf(topic, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Produce until the watermark refuses; every refusal is the retriable
	// KAFKA_STORAGE_ERROR, never a timeout or a lost record.
	var want []string
	refused := false
	for i := 0; i < 5000 && !refused; i++ {
		v := fmt.Sprintf("record-%05d-%0300d", i, i)
		err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr()
		switch {
		case err == nil:
			want = append(want, v)
		case errors.Is(err, kerr.KafkaStorageError) || errors.Is(err, kgo.ErrRecordTimeout):
			// The client retries the retriable refusal until its delivery
			// timeout; the broker's own answer is checked directly.
			sp := produceRaw(t, b, cl, topic, 0, brokertest.Batch(1, -1, -1, -1, time.Now().UnixMilli()))
			if sp.ErrorCode != kerr.KafkaStorageError.Code {
				t.Fatalf("produce %d: %v; a direct produce gets code %d, want KAFKA_STORAGE_ERROR", i, err, sp.ErrorCode)
			}
			refused = true
		default:
			t.Fatalf("produce %d: %v, want success or KAFKA_STORAGE_ERROR", i, err)
		}
	}
	if !refused {
		t.Fatalf("5000 records produced with the store down and a %d-byte watermark", limit)
	}
	if size := p.Log().Size(); size < limit/2 || size > 2*limit {
		t.Fatalf("refused at %d local bytes, watermark %d", size, limit)
	}
	if p.Log().StartOffset() != 0 {
		t.Fatalf("local start %d: data deleted before it was uploaded", p.Log().StartOffset())
	}
	if st := b.Tiers.Stats(); st.UploadErrors == 0 || b.RemoteRange(context.Background(), p).RemoteEnd != 0 {
		t.Fatalf("with the store down: %+v, remote %+v", st, b.RemoteRange(context.Background(), p))
	}
	t.Logf("%d records accepted, then refused at %d local bytes; %d upload errors", len(want), p.Log().Size(), b.Tiers.Stats().UploadErrors)

	// The store comes back: the backlog uploads, the local log shrinks
	// and produce is accepted again.
	store.SetDown(false)
	eventuallyTrue(t, "the backlog uploaded and deleted locally", func() (bool, string) {
		r := b.RemoteRange(context.Background(), p)
		hw, _ := p.HighWatermark()
		return r.RemoteEnd >= hw-10 && p.Log().Size() < limit/2, fmt.Sprintf("remote end %d, hw %d, local %d bytes", r.RemoteEnd, hw, p.Log().Size())
	})
	eventuallyTrue(t, "produce accepted again", func() (bool, string) {
		v := fmt.Sprintf("after-%d", len(want))
		err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr()
		if err == nil {
			want = append(want, v)
		}
		return err == nil, fmt.Sprint(err)
	})
	equalValues(t, replayAll(t, b, topic, len(want)), want)
}
