package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceEndToEnd produces 1 KiB records with acks=all over
// loopback to an in-process broker that fsyncs every group commit, and
// reports records/s, MB/s and the p50/p99 acknowledgment latency.
//
//	go test -run '^$' -bench ProduceEndToEnd -benchtime 20000x ./broker/
func BenchmarkProduceEndToEnd(b *testing.B) {
	for _, partitions := range []int32{1, 8} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			br := startBroker(b, testBrokerConfig(b))
			cl := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(1<<16),
				kgo.ProducerBatchCompression(kgo.NoCompression()))
			createTopic(b, cl, "bench", partitions, nil)
			value := make([]byte, 1024)
			rand.NewChaCha8([32]byte{1}).Read(value) // incompressible, like real payloads
			var mu sync.Mutex
			lat := make([]time.Duration, 0, b.N)
			var firstErr error
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				sent := time.Now()
				cl.Produce(context.Background(), &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
					d := time.Since(sent)
					mu.Lock()
					lat = append(lat, d)
					if err != nil && firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				})
			}
			if err := cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ack-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ack-ms")
		})
	}
}
