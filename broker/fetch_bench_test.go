package broker

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkFetchEndToEnd fills a 4-partition topic with 1 KiB records, then
// measures how fast a franz-go consumer reads b.N of them back over
// loopback.
//
//	go test -run '^$' -bench FetchEndToEnd -benchtime 200000x ./broker/
func BenchmarkFetchEndToEnd(b *testing.B) {
	br := startBroker(b, testBrokerConfig(b))
	prod := testClient(b, br, kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(b, prod, "fetch", 4, nil)
	value := make([]byte, 1024)
	rand.NewChaCha8([32]byte{2}).Read(value)
	for i := 0; i < b.N; i++ {
		prod.Produce(context.Background(), &kgo.Record{Topic: "fetch", Value: value}, nil)
	}
	if err := prod.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	cons := testClient(b, br, kgo.ConsumeTopics("fetch"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20))
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for got := 0; got < b.N; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("read %d of %d: %v", got, b.N, err)
		}
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
