package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/kafka/quotaadmit"
	"github.com/sluice-mq/sluice/broker/quota"
)

// BenchmarkAdmitProduce is the admit stage's own cost per produce request
// (one partition, one batch of 100 records), without quotas and with every
// rate key of the tenant set (high enough never to hold it):
//
//	go test ./broker/kafka/ -run '^$' -bench BenchmarkAdmitProduce
func BenchmarkAdmitProduce(b *testing.B) {
	req := kmsg.NewPtrProduceRequest()
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = brokertest.Batch(100, -1, -1, -1, time.Now().UnixMilli())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := req.ResponseKind()
	id := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}
	limits := quota.Static{"acme": {quota.ProducerByteRate: 1e15, quota.ProducerRecordRate: 1e15,
		quota.ConsumerByteRate: 1e15, quota.RequestPercentage: 1e5}}
	for _, tc := range []struct {
		name string
		adm  kafka.Admitter
	}{
		{"none", kafka.AdmitAll{}},
		{"quotas", quotaadmit.New(quota.NewMeters(limits, 0, quota.NewMetrics(nopRegisterer{})))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				a, err := tc.adm.Admit(ctx, id, req)
				if err != nil || a.Delay > 0 {
					b.Fatal(err, a)
				}
				tc.adm.Handled(id, req, 20*time.Microsecond)
				tc.adm.Answered(id, req, resp)
			}
		})
	}
}

// BenchmarkProduceQuotaOverhead is the single-tenant produce peak (1 KiB
// records, acks=all, one partition, SASL_PLAINTEXT) of a broker without
// quotas and of one enforcing quotas the tenant never reaches, in one run:
//
//	go test ./broker/kafka/ -run '^$' -bench BenchmarkProduceQuotaOverhead -benchtime 50000x
func BenchmarkProduceQuotaOverhead(b *testing.B) {
	limits := quota.Static{"acme": {quota.ProducerByteRate: 1e15, quota.ProducerRecordRate: 1e15,
		quota.RequestPercentage: 1e5}}
	plain := startSecureBroker(b, nil, kafka.WithCredentials(tenantUsers(b)))
	quotas := startSecureBroker(b, nil, kafka.WithCredentials(tenantUsers(b)),
		kafka.WithAdmitter(quotaadmit.New(quota.NewMeters(limits, 0, nil))))
	value := make([]byte, 1024)
	for _, tc := range []struct {
		name string
		sb   *secureBroker
	}{{"none", plain}, {"quotas", quotas}} {
		b.Run(tc.name, func(b *testing.B) {
			cl := tenantClientB(b, tc.sb, "ann", kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var first error
			wg.Add(b.N)
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
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
