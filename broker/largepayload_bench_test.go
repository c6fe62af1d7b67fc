package broker

// Benchmarks of issue 21's large payloads: publishing by reference through
// payload.Client (upload session over HTTP, object in versitygw, envelope
// produced with franz-go acks=all) next to an inline 256 KiB record, and
// the memory a consumer's payload.Client.Open costs while it streams a
// 100 MiB object. They report numbers only; nothing here asserts a timing.
//
//	go test -run '^$' -bench 'LargePayload$' -benchtime 2s ./broker/
//	go test -run '^$' -bench 'LargePayload/ref-100MiB' -benchtime 3x ./broker/ -largepayload.100mib
//	go test -run '^$' -bench 'LargePayloadOpen' -benchtime 3x ./broker/
//
// (the commands of BENCHMARKS.md, "Large payloads by reference").

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// reportLatency reports the p50 and p99 (nearest rank) of ds in
// milliseconds: with fewer than 100 samples p99 is the maximum.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[(len(ds)*99+99)/100-1].Microseconds())/1000, "p99-ms") // the ceil(0.99n)-th
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
// sampled every 2 ms during the read minus HeapInuse before it (after a
// GC), alloc-MiB/op the bytes allocated per read (runtime TotalAlloc).
//
// in-process: the broker that streams the object from versitygw (in
// ranged GETs of 4 MiB) runs in the same process, so the figures are the
// consumer's and the broker's together. consumer-process: the consumer is
// a child process (this test binary running
// TestLargePayloadOpenConsumerProcess) and the figures are its own, with
// its peak RSS (VmHWM of /proc/self/status) as rss-MiB.
//
//	go test -run '^$' -bench LargePayloadOpen -benchtime 3x ./broker/
func BenchmarkLargePayloadOpen(b *testing.B) {
	const size = 100 << 20
	br, base := startLargeObjectBenchBroker(b)
	cl := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(b, cl, "big", 1, nil)
	pc := &payload.Client{Base: base}
	r, err := func() (ref.Ref, error) { // the payload's bytes are garbage once it is put
		body := randomBytes(3, size)
		pc.SHA256 = sha256Hex(body)
		return pc.Put(context.Background(), cl, "big", nil, bytes.NewReader(body), size)
	}()
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{Topic: "big"}
	for _, h := range r.Headers() {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}

	b.Run("in-process", func(b *testing.B) {
		var growth, alloc uint64
		ds := make([]time.Duration, 0, b.N)
		for range b.N {
			m, d, err := measureOpen(pc, rec)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, d)
			growth, alloc = max(growth, m.Growth), alloc+m.Alloc
		}
		reportReads(b, size, ds)
		b.ReportMetric(float64(growth)/(1<<20), "heap-growth-MiB")
		b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
	})

	b.Run("consumer-process", func(b *testing.B) {
		hdrs, err := json.Marshal(r.Headers())
		if err != nil {
			b.Fatal(err)
		}
		var growth, alloc, rss uint64
		ds := make([]time.Duration, 0, b.N)
		for range b.N {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestLargePayloadOpenConsumerProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "SLUICE_LP_BASE="+base, "SLUICE_LP_HEADERS="+string(hdrs))
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("consumer process: %v\n%s", err, out)
			}
			var m openMeasure
			i := bytes.Index(out, []byte("LPMEASURE "))
			if i < 0 {
				b.Fatalf("consumer process printed no measure:\n%s", out)
			}
			line, _, _ := bytes.Cut(out[i+len("LPMEASURE "):], []byte("\n"))
			if err := json.Unmarshal(line, &m); err != nil {
				b.Fatalf("consumer measure %q: %v", line, err)
			}
			ds = append(ds, time.Duration(m.Nanos))
			growth, alloc, rss = max(growth, m.Growth), alloc+m.Alloc, max(rss, m.HWM)
		}
		reportReads(b, size, ds)
		b.ReportMetric(float64(growth)/(1<<20), "heap-growth-MiB")
		b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	})
}

// openMeasure is one payload.Client.Open read's cost.
type openMeasure struct {
	Growth uint64 // peak HeapInuse during the read minus HeapInuse before
	Alloc  uint64 // TotalAlloc during the read
	Nanos  int64  // the read's duration
	HWM    uint64 // the process's peak RSS (VmHWM), where known
}

// reportReads reports the reads' MB/s and latency: the benchmark's own
// timer also counts the GCs and process starts around each read, so ns/op
// is replaced by the reads' mean.
func reportReads(b *testing.B, size int64, ds []time.Duration) {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(ds)), "ns/op")
	b.ReportMetric(float64(size)*float64(len(ds))/sum.Seconds()/1e6, "read-MB/s")
	reportLatency(b, ds)
}

// vmHWMBytes is this process's peak resident set from /proc/self/status (0
// where there is none).
func vmHWMBytes() uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// measureOpen reads rec's object with pc.Open into io.Discard and measures
// the heap while it does.
func measureOpen(pc *payload.Client, rec *kgo.Record) (openMeasure, time.Duration, error) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	peak.Store(before.HeapInuse)
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
				peak.Store(max(peak.Load(), m.HeapInuse))
			}
		}
	}()
	t0 := time.Now()
	n, err := func() (int64, error) {
		rc, err := pc.Open(context.Background(), rec)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		return io.Copy(io.Discard, rc)
	}()
	d := time.Since(t0)
	close(stop)
	sampled.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err == nil && n != rec2size(rec) {
		err = fmt.Errorf("read %d bytes of %d", n, rec2size(rec))
	}
	return openMeasure{Growth: max(peak.Load(), after.HeapInuse) - before.HeapInuse,
		Alloc: after.TotalAlloc - before.TotalAlloc, Nanos: int64(d)}, d, err
}

func rec2size(rec *kgo.Record) int64 {
	r, _, _ := ref.Parse(toRefHeaders(rec.Headers))
	return r.Size
}

// TestLargePayloadOpenConsumerProcess is BenchmarkLargePayloadOpen's
// consumer process: it runs only with SLUICE_LP_BASE and SLUICE_LP_HEADERS
// set (the benchmark sets them) and prints its measure on one line.
func TestLargePayloadOpenConsumerProcess(t *testing.T) {
	base, hdrs := os.Getenv("SLUICE_LP_BASE"), os.Getenv("SLUICE_LP_HEADERS")
	if base == "" || hdrs == "" {
		t.Skip("BenchmarkLargePayloadOpen's child process; run by the benchmark")
	}
	var hs []ref.Header
	if err := json.Unmarshal([]byte(hdrs), &hs); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "big"}
	for _, h := range hs {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	m, _, err := measureOpen(&payload.Client{Base: base}, rec)
	if err != nil {
		t.Fatal(err)
	}
	m.HWM = vmHWMBytes()
	out, _ := json.Marshal(m)
	fmt.Printf("LPMEASURE %s\n", out)
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
