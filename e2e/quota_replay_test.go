package e2e

// A tenant replaying a long tiered topic from offset 0 beside a tenant
// reading its tail (issue 20's fair egress): the real sluiced binary on
// Versity's S3 gateway, security on, each tenant with its own SCRAM user on
// the SASL_PLAINTEXT listener, franz-go clients.
//
// The replay tenant's topic uploads small objects and keeps nothing
// locally once uploaded, and the broker's read cache is smaller than the
// topic, so every pass of the replay from offset 0 GETs its objects from
// S3 again; the replaying client runs in a process of its own (this test
// binary again, TestReplayConsumerHelper), so its CPU can be told apart
// from the test's (and pinned elsewhere: BENCHMARKS.md). The tail tenant
// produces at a modest fixed rate and a consumer of its own reads the
// tail; the figure is each record's latency from the producer's send to
// the tail consumer's receipt, p99 over a window, first with the tail
// tenant alone, then with the replay running beside it.
//
// In the default run (6 s windows) the test asserts what does not depend
// on how busy the machine is: both tenants make progress, the replay reads
// object storage while the tail is measured, and the tail reader is not
// starved (its p99 beside the replay within max(5 × alone, 1 s)). With
// SLUICE_QUOTA_E2E=1 (`make quota-e2e`; 20 s windows, 60 s with
// SLUICE_QUOTA_SOAK=1) it asserts issue 20's bound, p99 beside within 20 %
// of p99 alone. SLUICE_REPLAY_RATE=B gives the replay tenant a
// consumer_byte_rate of B bytes/s, as an operator of a shared cluster
// would; SLUICE_REPLAY_SLICE=B sets the broker's --remote-fetch-max-bytes
// (1 MiB, the default, if unset). SLUICE_REPLAY_PROFILE=FILE writes the broker's CPU profile of the
// window beside the replay to FILE, SLUICE_REPLAY_TRACE=FILE its execution
// trace (`go tool trace -pprof=sched FILE` shows what waited for the CPU),
// and the trace of the window alone to FILE.alone.
//
// Invariant: every client goroutine the test starts has returned before
// the test does; the broker and the S3 server are stopped by their
// cleanups.

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// replayWindow is the measured span of each phase.
func replayWindow() time.Duration {
	switch {
	case os.Getenv("SLUICE_QUOTA_SOAK") != "":
		return 60 * time.Second
	case os.Getenv("SLUICE_QUOTA_E2E") != "":
		return 20 * time.Second
	}
	return 6 * time.Second
}

// tailLatencies produces one 1 KiB record every interval to topic with
// prod, for span, while cons reads them at the tail; it returns each
// record's send-to-receipt latency, and how many were sent. Each record's
// value starts with its send time, the phase and its sequence number; the
// reader waits for the phase's last record and counts only the phase's.
func tailLatencies(t *testing.T, prod, cons *kgo.Client, topic string, phase uint32, interval, span time.Duration) (lat []time.Duration, sent int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), span+30*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		failed error
		acks   []time.Duration // send to acknowledgement, logged: where the latency is
		wg     sync.WaitGroup
		last   atomic.Int64 // the phase's last sequence number, once sent; -1 before
	)
	last.Store(-1)
	var maxSeq atomic.Int64 // the highest sequence number of the phase received
	maxSeq.Store(-1)
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for l := last.Load(); l < 0 || maxSeq.Load() < l; l = last.Load() {
			// Short polls, so the loop sees last set after its record came.
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cons.PollFetches(pctx)
			pcancel()
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) < 16 || binary.BigEndian.Uint32(r.Value[8:]) != phase {
					return
				}
				sentAt := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				mu.Lock()
				lat = append(lat, now.Sub(sentAt))
				mu.Unlock()
				maxSeq.Store(max(maxSeq.Load(), int64(binary.BigEndian.Uint32(r.Value[12:]))))
			})
		}
	}()
	value := make([]byte, 1<<10)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < span {
		v := slices.Clone(value)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		binary.BigEndian.PutUint32(v[8:], phase)
		binary.BigEndian.PutUint32(v[12:], uint32(sent))
		wg.Add(1)
		sent++
		sentAt := time.Now()
		prod.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			acks = append(acks, time.Since(sentAt))
			if err != nil {
				failed = err
			}
		})
		<-tick.C
	}
	wg.Wait()
	last.Store(int64(sent - 1))
	select {
	case <-recvDone:
	case <-time.After(20 * time.Second):
		cancel()
		<-recvDone
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		t.Fatalf("the tail consumer received %d of %d records within 20 s of the last send", n, sent)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		t.Fatalf("produce to %s: %v", topic, failed)
	}
	slices.Sort(acks)
	t.Logf("phase %d: produce ack p50 %v p90 %v p99 %v", phase, pct(acks, 50), pct(acks, 90), pct(acks, 99))
	slices.Sort(lat)
	return lat, sent
}

func pct(lat []time.Duration, p int) time.Duration { return lat[(len(lat)-1)*p/100] }

// TestQuotaTieredReplayBesideTail: see the file's header.
func TestQuotaTieredReplayBesideTail(t *testing.T) {
	srv := s3test.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	pw := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pw, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		replayBytes  = 24 << 20 // the replay tenant's topic
		replayRecord = 16 << 10
	)
	b := quotaBroker{startBroker(t, brokerOptions{saslListener: true, extraArgs: []string{
		"--security", "--admin-password-file", pw, "--allow-everyone-if-no-acl-found",
		"--object-store", srv.URL(fmt.Sprintf("e2e-replay-%d", time.Now().UnixNano())),
		"--retention-check-interval", "100ms", "--tier-chunk-bytes", "262144",
		"--read-cache-bytes", fmt.Sprint(4 << 20), // a sixth of the topic: each pass GETs again
		"--remote-fetch-max-bytes", cmp.Or(os.Getenv("SLUICE_REPLAY_SLICE"), "1048576"),
	}})}
	var archiveQuota map[string]int64
	if v := os.Getenv("SLUICE_REPLAY_RATE"); v != "" { // bytes/s: the replay tenant's consumer_byte_rate
		rate, err := strconv.ParseInt(v, 10, 64)
		if err != nil || rate <= 0 {
			t.Fatalf("SLUICE_REPLAY_RATE=%q: want a positive number of bytes per second", v)
		}
		archiveQuota = map[string]int64{"consumer_byte_rate": rate}
	}
	b.tenant(t, "archive", "rita", archiveQuota)
	b.tenant(t, "live", "tom", nil)

	// The replay tenant's history, tiered: 256 KiB segments uploaded as
	// soon as they roll, none kept locally.
	rita := b.franz(t, "rita", kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond))
	createTopic(t, kadm.NewClient(rita), "history", 1, map[string]*string{
		"segment.bytes": strp("262144"), "remote.upload.bytes": strp("262144"), "remote.upload.max.delay.ms": strp("0"),
		"local.retention.ms": strp("0"), "retention.ms": strp("-1"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	value := randomBytes(replayRecord)
	var recs []*kgo.Record
	for range replayBytes / replayRecord {
		recs = append(recs, &kgo.Record{Topic: "history", Value: value})
	}
	for len(recs) > 0 {
		k := min(len(recs), 64)
		if err := rita.ProduceSync(ctx, recs[:k]...).FirstErr(); err != nil {
			t.Fatalf("prefill history: %v", err)
		}
		recs = recs[k:]
	}
	const records = replayBytes / replayRecord
	metric := func(name string, labels ...string) float64 {
		_, text := httpGet(t, "http://"+b.httpAddr+"/metrics")
		return parseMetrics(t, text)[seriesKey(name, labels...)]
	}
	eventually(t, defaultTimeout, "most of history in object storage and gone locally", func() (bool, string) {
		end := metric("sluice_tier_remote_end_offset", "partition", "0", "topic", "archive~history")       // the tenant's namespace
		start := metric("sluice_partition_log_start_offset", "partition", "0", "topic", "archive~history") // the tenant's namespace
		deleted := metric("sluice_tier_local_segments_deleted_total")
		return end >= records*9/10 && deleted >= 10, fmt.Sprintf("remote end %v of %d, local log start %v, local segments deleted %v", end, records, start, deleted)
	})
	// The history's objects are still dirty pages of the S3 server's files:
	// written back now, not in one burst during a window below.
	flushWriteback()

	// The tail tenant: 100 records/s of 1 KiB, and its tail reader.
	tom := b.franz(t, "tom", kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	createTopic(t, kadm.NewClient(tom), "live", 1, nil)
	tail := b.franz(t, "tom", kgo.ConsumeTopics("live"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchMaxWait(500*time.Millisecond))
	const interval = 10 * time.Millisecond
	span := replayWindow()
	tailLatencies(t, tom, tail, "live", 0, interval, 2*time.Second) // warm: connections, the consumer's position
	aloneTrace := ""
	if p := os.Getenv("SLUICE_REPLAY_TRACE"); p != "" {
		aloneTrace = p + ".alone"
	}
	tracedAlone := b.profile(t, "trace", aloneTrace, span)
	alone, sentAlone := tailLatencies(t, tom, tail, "live", 1, interval, span)
	<-tracedAlone
	t.Logf("tail alone: %d of %d records, p50 %v p90 %v p99 %v max %v", len(alone), sentAlone,
		pct(alone, 50), pct(alone, 90), pct(alone, 99), alone[len(alone)-1])

	// The replay: passes from offset 0 to the end, over and over, each
	// with a fresh client, until the measurement ends; from a process of
	// its own, as a tenant's clients run on machines of their own
	// (SLUICE_REPLAY_SAME_PROCESS=1: from the test's). Its progress is the
	// broker's count of the tenant's bytes out.
	replayCtx, stopReplay := context.WithCancel(ctx)
	replayErr := make(chan error, 1)
	go func() {
		defer close(replayErr)
		var err error
		if os.Getenv("SLUICE_REPLAY_SAME_PROCESS") != "" {
			err = replayPasses(replayCtx, b.kafkaAddr, records)
		} else {
			err = runHelper(replayCtx, "TestReplayConsumerHelper",
				"SLUICE_REPLAY_HELPER="+b.kafkaAddr, fmt.Sprintf("SLUICE_REPLAY_RECORDS=%d", records))
		}
		if err != nil && replayCtx.Err() == nil {
			replayErr <- err
		}
	}()
	outStart := b.tenantBytes(t, "out", "archive")
	eventually(t, defaultTimeout, "the replay under way", func() (bool, string) {
		if len(replayErr) > 0 {
			return true, ""
		}
		n := b.tenantBytes(t, "out", "archive") - outStart
		return n >= replayBytes/4, fmt.Sprintf("%.0f bytes replayed", n)
	})
	remoteBefore := metric("sluice_tier_remote_read_bytes_total")
	profiled := b.profile(t, "profile", os.Getenv("SLUICE_REPLAY_PROFILE"), span)
	traced := b.profile(t, "trace", os.Getenv("SLUICE_REPLAY_TRACE"), span)
	outBefore, start := b.tenantBytes(t, "out", "archive"), time.Now()
	beside, sentBeside := tailLatencies(t, tom, tail, "live", 2, interval, span)
	<-profiled
	<-traced
	elapsed := time.Since(start)
	remoteRead := metric("sluice_tier_remote_read_bytes_total") - remoteBefore
	archiveOut := b.tenantBytes(t, "out", "archive") - outBefore
	stopReplay()
	for err := range replayErr {
		t.Fatalf("replay: %v", err)
	}
	t.Logf("tail beside the replay: %d of %d records, p50 %v p90 %v p99 %v max %v", len(beside), sentBeside,
		pct(beside, 50), pct(beside, 90), pct(beside, 99), beside[len(beside)-1])
	t.Logf("replay while measured: %.1f MB/s to the tenant, %.1f MB/s read from object storage",
		archiveOut/elapsed.Seconds()/1e6, remoteRead/elapsed.Seconds()/1e6)
	t.Logf("tail p99 beside / alone: %.2f", float64(pct(beside, 99))/float64(pct(alone, 99)))

	// Both make progress; the replay reads object storage.
	if archiveOut < replayBytes/2 {
		t.Errorf("the replay read %.0f bytes while the tail was measured, want at least half a pass (%d)", archiveOut, replayBytes/2)
	}
	if remoteRead <= 0 {
		t.Errorf("the replay read nothing from object storage while the tail was measured")
	}
	if len(beside) != sentBeside || len(alone) != sentAlone {
		t.Errorf("the tail reader received %d of %d records alone, %d of %d beside", len(alone), sentAlone, len(beside), sentBeside)
	}
	// The tail reader is not starved.
	if limit := max(5*pct(alone, 99), time.Second); pct(beside, 99) > limit {
		t.Errorf("tail p99 %v beside the replay, %v alone: above %v", pct(beside, 99), pct(alone, 99), limit)
	}
	if os.Getenv("SLUICE_QUOTA_E2E") == "" && os.Getenv("SLUICE_QUOTA_SOAK") == "" {
		return
	}
	if float64(pct(beside, 99)) > 1.2*float64(pct(alone, 99)) {
		t.Errorf("tail p99 %v beside the replay, %v alone: more than 20%% higher", pct(beside, 99), pct(alone, 99))
	}
}

// profile writes the broker's CPU profile (kind "profile",
// SLUICE_REPLAY_PROFILE: where the replay's CPU goes) or execution trace
// (kind "trace", SLUICE_REPLAY_TRACE: what the tail's goroutines wait for)
// over the next span to path; the channel closes when it is written, or at
// once when path is empty.
func (b quotaBroker) profile(t *testing.T, kind, path string, span time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if path == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		req, err := http.NewRequest("GET", fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", b.httpAddr, kind, int(span.Seconds())), nil)
		if err != nil {
			t.Error(err)
			return
		}
		req.SetBasicAuth("admin", "admin-secret")
		resp, err := (&http.Client{Timeout: span + 30*time.Second}).Do(req)
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, %v", kind, resp.StatusCode, err)
			return
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Error(err)
		}
	}()
	return done
}

// replayPasses reads topic history of the archive tenant (records
// records) from offset 0 to its end, over and over, each pass with a fresh
// client, until ctx ends.
func replayPasses(ctx context.Context, addr string, records int) error {
	for ctx.Err() == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "rita", Pass: "rita-pw"}.AsSha512Mechanism()),
			kgo.ConsumeTopics("history"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(4<<20))
		if err != nil {
			return err
		}
		for n := 0; n < records && ctx.Err() == nil; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil && ctx.Err() == nil {
				cl.Close()
				return err
			}
			n += fs.NumRecords()
		}
		cl.Close()
	}
	return nil
}

// TestReplayConsumerHelper is the archive tenant's replaying process of
// TestQuotaTieredReplayBesideTail (this test binary run again, with
// SLUICE_REPLAY_HELPER naming the broker's SASL listener); it replays
// until its standard input closes.
func TestReplayConsumerHelper(t *testing.T) {
	addr := os.Getenv("SLUICE_REPLAY_HELPER")
	if addr == "" {
		t.Skip("the replaying process of TestQuotaTieredReplayBesideTail")
	}
	records, err := strconv.Atoi(os.Getenv("SLUICE_REPLAY_RECORDS"))
	if err != nil || records <= 0 {
		t.Fatalf("SLUICE_REPLAY_RECORDS=%q", os.Getenv("SLUICE_REPLAY_RECORDS"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // ends when the parent closes it, or dies
		cancel()
	}()
	if err := replayPasses(ctx, addr, records); err != nil {
		t.Fatal(err)
	}
}
