package broker

// The overhead of quota accounting and the fair lanes (DRR) on the
// single-tenant peak, issue 20's ≤ 5 %: two in-process brokers, one with
// the lanes off and no quota rows ("off"), one with the lanes on and every
// quota key of its tenant set far above what it uses ("on"), run the same
// produce+fetch load in alternating order, round after round, in one
// process: the machine's noise lands on both arms alike.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/fair"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// farAbove is every quota key at a value the benchmark never reaches, so
// each request is charged to its meters and never held.
var farAbove = map[string]float64{
	quota.ProducerByteRate: 1e12, quota.ConsumerByteRate: 1e12, quota.ProducerRecordRate: 1e12,
	quota.RequestPercentage: 100 * 1024, quota.ConnectionCreationRate: 1e6, quota.ControllerMutationRate: 1e6,
	quota.Partitions: 1e6, quota.Topics: 1e6, quota.Groups: 1e6, quota.Connections: 1e6,
	quota.InflightRequests: 1e6, quota.StorageBytes: 1e15,
	quota.ObjectUploadByteRate: 1e12, quota.ObjectDownloads: 1e6, quota.ObjectStorageBytes: 1e15,
}

// startBrokerLanesOff starts a broker whose fair lanes are the zero Set:
// every handler run, tail read and backfill GET goes at once, as before the
// lanes existed.
func startBrokerLanesOff(b *testing.B, cfg Config) *Broker {
	b.Helper()
	br, err := New(cfg, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	br.Fair = &fair.Set{}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- br.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		awaitStop(b, errc, "broker")
	})
	select {
	case <-br.Ready():
	case err := <-errc:
		b.Fatalf("broker stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		b.Fatal("broker not ready after 60s")
	}
	return br
}

// overheadRound produces n 1 KiB records with acks=all to a fresh topic of
// 8 partitions while a consumer reads them from its start, and returns the
// records per second until the consumer has read the last.
func overheadRound(b *testing.B, br *Broker, prod *kgo.Client, topic string, n int, value []byte) float64 {
	b.Helper()
	createTopic(b, prod, topic, 8, nil)
	cons := testClient(b, br, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for got := 0; got < n; {
			fs := cons.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				mu.Lock()
				firstErr = fmt.Errorf("consume %s after %d records: %w", topic, got, err)
				mu.Unlock()
				return
			}
			got += fs.NumRecords()
		}
	}()
	for range n {
		prod.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatalf("%s: flush %d records: %v (throttled %.1f s so far)", topic, n, err, throttleSeconds(b, br))
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	// The topic goes, so the brokers' partitions (each with its own
	// goroutine and timers) do not pile up over the rounds and make the
	// later rounds dearer than the first.
	if _, err := kadm.NewClient(prod).DeleteTopics(ctx, topic); err != nil {
		b.Fatalf("delete %s: %v", topic, err)
	}
	return float64(n) / elapsed.Seconds()
}

// BenchmarkQuotaFairOverhead runs b.N rounds; each round runs the same load
// (overheadRound, 10,000 records) against four brokers, in an order that
// rotates from round to round: "off" (lanes off, no quota rows), "lanes"
// (the fair lanes alone), "quotas" (every quota key set far above use, lanes
// off) and "on" (both, as sluiced runs). It reports each arm's records/s
// over all rounds, the median over the rounds of each arm's ratio to "off"
// in the same round, and the throttle time the quota arms' tenant was given
// (0: no quota ever held it, so a ratio is the accounting's cost alone).
//
//	go test -run '^$' -bench QuotaFairOverhead -benchtime 4x ./broker/
func BenchmarkQuotaFairOverhead(b *testing.B) {
	records := 10000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_OVERHEAD_RECORDS")); err == nil && v > 0 {
		records = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := make([]byte, 1024)
	rand.NewChaCha8([32]byte{2}).Read(value)
	type arm struct {
		name   string
		br     *Broker
		prod   *kgo.Client
		sum    float64 // seconds
		ratios []float64
		cpu    []float64 // the process's CPU per record of each round, µs
		cpuRat []float64 // cpu over the reference arm's in the same round
	}
	var arms []*arm
	for _, a := range []struct {
		name          string
		lanes, quotas bool
	}{{"off", false, false}, {"lanes", true, false}, {"quotas", false, true}, {"on", true, true}} {
		if only := os.Getenv("SLUICE_OVERHEAD_ARMS"); only != "" && !slices.Contains(strings.Split(only, ","), a.name) {
			continue // SLUICE_OVERHEAD_ARMS=off,on runs only those (the first is the reference)
		}
		var br *Broker
		if a.lanes {
			br = startBroker(b, testBrokerConfig(b))
		} else {
			br = startBrokerLanesOff(b, testBrokerConfig(b))
		}
		if a.quotas {
			if _, err := br.Store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
				b.Fatal(err)
			}
			if _, err := br.Store.SetQuotas(ctx, meta.DefaultTenant, farAbove, nil, quota.Check); err != nil {
				b.Fatal(err)
			}
		}
		want := 0
		if a.quotas {
			want = len(farAbove)
		}
		brokertest.EventuallyWhy(b, 20*time.Second, a.name+": the quotas followed", func() (bool, string) {
			l := br.Quotas().Limits(meta.DefaultTenant)
			return len(l) == want, fmt.Sprint(l)
		})
		prod := testClient(b, br, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
			kgo.MaxBufferedRecords(1<<14), kgo.ProducerBatchCompression(kgo.NoCompression()))
		// A warm-up round: connections, the first segments.
		overheadRound(b, br, prod, "warm", records/4, value)
		arms = append(arms, &arm{name: a.name, br: br, prod: prod})
	}
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		rate, cpu := make([]float64, len(arms)), make([]float64, len(arms))
		var order []string
		for k := range arms {
			i := (round + k) % len(arms)
			order = append(order, arms[i].name)
			// The previous arm's garbage is collected and its background
			// work (segment rolls, the journal's checkpoint) settles before
			// this arm is measured, or it would be charged to this one.
			runtime.GC()
			time.Sleep(time.Second)
			c0 := processCPU(b)
			rate[i] = overheadRound(b, arms[i].br, arms[i].prod, fmt.Sprintf("r%d", round), records, value)
			cpu[i] = (processCPU(b) - c0).Seconds() * 1e6 / float64(records)
			arms[i].sum += float64(records) / rate[i]
		}
		line := fmt.Sprintf("round %d %v:", round, order)
		for i, a := range arms {
			a.ratios = append(a.ratios, rate[i]/rate[0])
			a.cpu, a.cpuRat = append(a.cpu, cpu[i]), append(a.cpuRat, cpu[i]/cpu[0])
			line += fmt.Sprintf(" %s %.0f/s (%.3f) %.1f µs CPU/record (%.3f)", a.name, rate[i], rate[i]/rate[0], cpu[i], cpu[i]/cpu[0])
		}
		b.Log(line)
	}
	b.StopTimer()
	for _, a := range arms {
		b.ReportMetric(float64(b.N*records)/a.sum, a.name+"-records/s")
		slices.Sort(a.cpu)
		b.ReportMetric(a.cpu[len(a.cpu)/2], a.name+"-cpu-µs/record")
		if a != arms[0] {
			slices.Sort(a.ratios)
			slices.Sort(a.cpuRat)
			b.ReportMetric(a.ratios[len(a.ratios)/2], a.name+"/"+arms[0].name+"-median")
			b.ReportMetric(a.cpuRat[len(a.cpuRat)/2], a.name+"/"+arms[0].name+"-cpu-median")
		}
	}
	var throttled float64
	for _, a := range arms {
		throttled += throttleSeconds(b, a.br)
	}
	b.ReportMetric(throttled, "throttled-s")
}

// processCPU is the user and system CPU time this process has used: every
// broker of the benchmark runs in it, and the arms take turns, so a round's
// difference is that arm's load (its broker, its etcd, the client), plus
// the idle arms' timers, which every round carries alike.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// throttleSeconds is the throttle time the broker gave the default tenant,
// for any reason.
func throttleSeconds(b *testing.B, br *Broker) float64 {
	b.Helper()
	resp, err := http.Get(httpBase(br) + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	text := string(raw)
	var sum float64
	for _, m := range regexp.MustCompile(`sluice_tenant_throttle_seconds_total\{[^}]*tenant="default"[^}]*\} ([0-9.e+-]+)`).FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}
