package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/kafka"
)

// BenchmarkProduceListeners compares produce throughput (1 KiB records,
// acks=all, one broker, one partition) over a PLAINTEXT listener and over
// SASL_SSL with SCRAM-SHA-512 (TLS 1.3), in one run:
//
//	go test ./broker/kafka/ -run '^$' -bench BenchmarkProduceListeners -benchtime 20000x
func BenchmarkProduceListeners(b *testing.B) {
	sb := startSecureBroker(b, nil, kafka.WithCredentials(testUsers.lookup(b)))
	value := make([]byte, 1024)
	for _, tc := range []struct {
		name     string
		listener string
		opts     []kgo.Opt
	}{
		{"PLAINTEXT", "PLAINTEXT", nil},
		{"SASL_SSL-SCRAM-SHA-512", "SASL_SSL", []kgo.Opt{
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.DialTLSConfig(sb.pki.clientTLS(b, false)),
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			topic := "bench-" + tc.listener
			cl := sb.client(b, tc.listener, append(tc.opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var first error
			wg.Add(b.N)
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						first = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if first != nil {
				b.Fatal(first)
			}
		})
	}
}
