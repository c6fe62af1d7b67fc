package broker

// Benchmarks of issue 21's large payloads: publishing by reference through
// payload.Client (upload session over HTTP, object in versitygw, envelope
// produced with franz-go acks=all) next to an inline 256 KiB record, and
// the memory a consumer's payload.Client.Open costs while it streams a
// 100 MiB object. They report numbers only; nothing here asserts a timing.
//
//	go test -run '^$' -bench LargePayload -benchtime 5x ./broker/
//	go test -run '^$' -bench 'LargePayload/ref-100MiB' -benchtime 3x ./broker/ -largepayload.100mib

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// bench100MiB enables BenchmarkLargePayload/ref-100MiB (seconds per
// operation on a shared 2-core machine: run it with -benchtime 3x).
var bench100MiB = flag.Bool("largepayload.100mib", false, "run BenchmarkLargePayload/ref-100MiB")

// startLargeObjectBenchBroker is a broker on versitygw with topic "big"
// (one partition), as startLargeObjectBroker but for a benchmark.
func startLargeObjectBenchBroker(b *testing.B) (*Broker, string) {
	b.Helper()
	srv := s3test.Start(b)
	cfg := testBrokerConfig(b)
	cfg.ObjectStore, cfg.ObjectStoreOptions = srv.URL(fmt.Sprintf("bench-%d", time.Now().UnixNano())), srv.Options()
	cfg.ObjectStoreOptions.Timeout = 2 * time.Minute
	br := startBroker(b, cfg)
	if br.LargeObjects() == nil {
		b.Fatal("a broker with an object store has no large-object service")
	}
	return br, "http://" + br.Cfg.HTTPListen
}

// randomBytes is n incompressible bytes.
func randomBytes(seed byte, n int) []byte {
	p := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(p)
	return p
}

// reportLatency reports the p50 and p99 of ds (p99 is the maximum when
// there are fewer than 100 samples) in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[(len(ds)-1)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkLargePayload publishes one payload per operation on a single
// broker backed by versitygw: ref-* through payload.Client.Put (open a
// session, PUT the parts, complete, produce the envelope with acks=all),
// inline-256KiB as one franz-go ProduceSync with acks=all of a 256 KiB
// value (the largest a topic's default max.inline.bytes admits). MB/s is
// payload bytes per second of one sequential producer; p50/p99 are per
// publish. ref-100MiB runs only with -largepayload.100mib.
func BenchmarkLargePayload(b *testing.B) {
	br, base := startLargeObjectBenchBroker(b)
	cl := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(b, cl, "big", 1, nil)
	createTopic(b, cl, "inline", 1, nil)

	b.Run("inline-256KiB", func(b *testing.B) {
		value := randomBytes(1, 256<<10)
		ds := make([]time.Duration, 0, b.N)
		b.SetBytes(int64(len(value)))
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "inline", Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		reportLatency(b, ds)
	})

	for _, size := range []int{1 << 20, 10 << 20, 100 << 20} {
		name := fmt.Sprintf("ref-%dMiB", size>>20)
		b.Run(name, func(b *testing.B) {
			if size == 100<<20 && !*bench100MiB {
				b.Skip("100 MiB per operation: run with -largepayload.100mib -benchtime 3x")
			}
			body := randomBytes(2, size)
			pc := &payload.Client{Base: base}
			pc.SHA256 = sha256Hex(body)
			ds := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				r, err := pc.Put(context.Background(), cl, "big", nil, bytes.NewReader(body), int64(size))
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				if r.Size != int64(size) {
					b.Fatalf("reference of %d bytes, %d sent", r.Size, size)
				}
			}
			b.StopTimer()
			reportLatency(b, ds)
		})
	}
}

// BenchmarkLargePayloadOpen streams one 100 MiB object per operation with
// payload.Client.Open into io.Discard (the SHA-256 verified as it reads)
// and reports the heap it costs: heap-growth-MiB is the highest HeapInuse
// sampled during the read minus HeapInuse before it, alloc-MiB/op the
// bytes allocated per read (runtime TotalAlloc). The broker that streams
// the object from versitygw runs in the same process, so both figures are
// the consumer's and the broker's together: an upper bound for the
// consumer alone.
//
//	go test -run '^$' -bench LargePayloadOpen -benchtime 3x ./broker/
func BenchmarkLargePayloadOpen(b *testing.B) {
	const size = 100 << 20
	br, base := startLargeObjectBenchBroker(b)
	cl := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(b, cl, "big", 1, nil)
	pc := &payload.Client{Base: base}
	body := randomBytes(3, size)
	pc.SHA256 = sha256Hex(body)
	r, err := pc.Put(context.Background(), cl, "big", nil, bytes.NewReader(body), size)
	if err != nil {
		b.Fatal(err)
	}
	body = nil // the consumer has only the envelope
	rec := &kgo.Record{Topic: "big"}
	for _, h := range r.Headers() {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if _, ok, err := ref.Parse(toRefHeaders(rec.Headers)); !ok || err != nil {
		b.Fatalf("the envelope does not parse: %v", err)
	}

	var growth, alloc uint64
	ds := make([]time.Duration, 0, b.N)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		peak := before.HeapInuse
		stop, sampled := make(chan struct{}), sync.WaitGroup{}
		sampled.Add(1)
		go func() { // sample HeapInuse every 2 ms while the object streams
			defer sampled.Done()
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			var m runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					runtime.ReadMemStats(&m)
					peak = max(peak, m.HeapInuse)
				}
			}
		}()
		b.StartTimer()
		t0 := time.Now()
		rc, err := pc.Open(context.Background(), rec)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d bytes: %v", n, size, err)
		}
		ds = append(ds, time.Since(t0))
		b.StopTimer()
		close(stop)
		sampled.Wait()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		peak = max(peak, after.HeapInuse)
		growth = max(growth, peak-before.HeapInuse)
		alloc += after.TotalAlloc - before.TotalAlloc
		b.StartTimer()
	}
	b.StopTimer()
	reportLatency(b, ds)
	b.ReportMetric(float64(growth)/(1<<20), "heap-growth-MiB")
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
}

func toRefHeaders(hs []kgo.RecordHeader) []ref.Header {
	out := make([]ref.Header, len(hs))
	for i, h := range hs {
		out[i] = ref.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func sha256Hex(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}
