package runner

// faults_large.go owns the large-payloads family (issue 21): beside the
// workload, a producer uploads payloads of 64 KiB to 3 MiB through the
// brokers' HTTP API (payload.Client, through the broker's PUTs, so that
// the sessions cross the S3 fault proxy) and publishes their envelopes on
// a side topic; a payload/consume group reads them back, verifying each
// object before it commits. Each injection is one of:
//
//	session-s3-errors   S3 answers 500/503 or loses responses on every
//	                    operation for 6 s while sessions run
//	read-s3-errors      S3 GETs answer 500/503 or are cut short for 6 s
//	                    while the consumer reads objects
//	publish-failure     for 6 s the producer "crashes" between a completed
//	                    upload and its publish: orphans, never published
//
// After the heal the consumer is given a minute to commit every
// partition's end, then the side topic is read from its start and every
// acknowledged envelope's object read back through a broker: the checker
// (chaos/checker CheckPayloads) reports lost, corrupt, orphans published
// and commits past unverified payloads.
//
// Invariant: an envelope is acknowledged only on a produce that succeeded;
// an upload is an orphan only if its publish was never attempted.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/s3fault"
	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/payload/consume"
	"github.com/sluice-mq/sluice/payload/ref"
)

const (
	largeTopic = "chaos-large"
	largeGroup = "chaos-large-group"
	largeMin   = 64 << 10
	largeMax   = 3 << 20
)

// largeState is the family's producer, consumer and what they saw.
type largeState struct {
	prod     *kgo.Client
	cons     *consume.Consumer
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	dropping atomic.Bool // publish-failure: complete uploads, never publish
	bases    []string

	mu       sync.Mutex
	run      checker.PayloadRun
	uploads  int
	failures int // uploads or publishes that failed (retried with new payloads)
	readErrs int // consumer failures (retried)
}

// largeFault applies one of the family's injections for 6 s.
func (e *faultEnv) largeFault(ctx context.Context) error {
	if err := e.startLarge(ctx); err != nil {
		return err
	}
	p := e.c.S3Faults()
	if p == nil {
		return errors.New("large-payloads needs the S3 fault proxy (cluster.Config.S3Faults)")
	}
	kinds := []string{"session-s3-errors", "read-s3-errors", "publish-failure"}
	kind := kinds[e.rng.IntN(len(kinds))]
	rec := e.start("large-"+kind, "large payloads", nil)
	switch kind {
	case "session-s3-errors":
		if err := p.SetFaults(s3fault.AllOps(s3fault.OpFaults{InternalErrorRate: 0.2, SlowDownRate: 0.1, LostResponseRate: 0.1})); err != nil {
			return err
		}
	case "read-s3-errors":
		get := s3fault.OpFaults{InternalErrorRate: 0.2, SlowDownRate: 0.1, TruncateRate: 0.3}
		if err := p.SetFaults(s3fault.Faults{Get: get, RangedGet: get}); err != nil {
			return err
		}
	case "publish-failure":
		e.large.dropping.Store(true)
	}
	sleep(ctx, 6*time.Second)
	p.Heal()
	e.large.dropping.Store(false)
	e.stop(rec)
	return nil
}

// startLarge makes the side topic and starts the producer and the
// consumer, once.
func (e *faultEnv) startLarge(ctx context.Context) error {
	if e.large != nil {
		return nil
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.c.Bootstrap()...), kgo.DefaultProduceTopic(largeTopic),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		return err
	}
	resp, err := kadm.NewClient(prod).CreateTopic(ctx, 3, 3, nil, largeTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		prod.Close()
		return fmt.Errorf("runner: create %s: %w", largeTopic, err)
	}
	l := &largeState{prod: prod}
	for _, id := range e.c.Up() {
		l.bases = append(l.bases, "http://"+e.c.Broker(id).HTTPAddr)
	}
	l.run = checker.PayloadRun{Reads: map[string]checker.PayloadRead{}, Verified: map[string]bool{}}
	l.cons, err = consume.New(consume.Config{Group: largeGroup, Topics: []string{largeTopic},
		Payload: &payload.Client{Base: l.bases[0]}, Handler: l.handle,
		Backoff: func(a int) time.Duration { return min(time.Duration(a)*200*time.Millisecond, 2*time.Second) },
		OnError: func(*kgo.Record, int, error) { l.mu.Lock(); l.readErrs++; l.mu.Unlock() }},
		kgo.SeedBrokers(e.c.Bootstrap()...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		prod.Close()
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	seed := e.rng.Uint64()
	l.wg.Add(2)
	go func() { defer l.wg.Done(); l.produce(bg, seed) }()
	go func() { defer l.wg.Done(); _ = l.cons.Run(bg) }()
	e.large = l
	return nil
}

// handle is the consumer's handler: a payload read to its verified end.
func (l *largeState) handle(_ context.Context, rec *kgo.Record, body io.Reader) error {
	if _, err := io.Copy(io.Discard, body); err != nil {
		return err
	}
	if r, ok := envelopeRef(rec); ok {
		l.mu.Lock()
		l.run.Verified[r.ID] = true
		l.mu.Unlock()
	}
	return nil
}

func envelopeRef(rec *kgo.Record) (ref.Ref, bool) {
	hs := make([]ref.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = ref.Header{Key: h.Key, Value: h.Value}
	}
	r, ok, err := ref.Parse(hs)
	return r, ok && err == nil
}

// produce uploads and publishes payloads until ctx ends.
func (l *largeState) produce(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x1a29e))
	for i := 0; ctx.Err() == nil; i++ {
		size := largeMin + rng.Int64N(largeMax-largeMin)
		body := make([]byte, size)
		var s [32]byte
		s[0], s[1], s[2] = byte(i), byte(i>>8), byte(seed)
		_, _ = rand.NewChaCha8(s).Read(body)
		sum := sha256.Sum256(body)
		pc := &payload.Client{Base: l.bases[i%len(l.bases)], Options: payload.Options{
			SHA256: hex.EncodeToString(sum[:]), Transfer: payload.TransferBroker}}
		uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := pc.Upload(uctx, largeTopic, bytes.NewReader(body), size)
		cancel()
		l.mu.Lock()
		l.uploads++
		if err != nil {
			l.failures++
		}
		l.mu.Unlock()
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if l.dropping.Load() {
			l.mu.Lock()
			l.run.Orphans = append(l.run.Orphans, r.ID)
			l.mu.Unlock()
			continue
		}
		rec := &kgo.Record{Key: []byte(r.ID)}
		for _, h := range r.Headers() {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		res := l.prod.ProduceSync(ctx, rec)
		got, perr := res.First()
		l.mu.Lock()
		if perr == nil {
			l.run.Acked = append(l.run.Acked, checker.AckedPayload{Ref: r.ID, SHA256: r.SHA256, Size: r.Size,
				Partition: got.Partition, Offset: got.Offset})
		} else {
			l.failures++ // unknown outcome: neither acknowledged nor an orphan
		}
		l.mu.Unlock()
	}
}

// stopLarge stops the producer, lets the consumer catch up, reads the
// side topic and every acknowledged object back, and returns the
// checker's anomalies (nil when the family never ran).
func (e *faultEnv) stopLarge(ctx context.Context) []string {
	l := e.large
	if l == nil {
		return nil
	}
	// The producer stops first; the consumer then has a minute to commit
	// every partition's end.
	l.mu.Lock()
	acked := len(l.run.Acked)
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	// The consumer was stopped with the producer; run it again to catch up.
	bg, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = l.cons.Run(bg) }()
	adm := kadm.NewClient(l.prod)
	ends, err := adm.ListEndOffsets(ctx, largeTopic)
	var problems []string
	if err != nil {
		problems = append(problems, fmt.Sprintf("large payloads: list end offsets: %v", err))
	}
	for bg.Err() == nil && err == nil {
		os, ferr := adm.FetchOffsets(bg, largeGroup)
		caught := ferr == nil
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := os.Lookup(o.Topic, o.Partition); !ok || c.At < o.Offset {
				caught = false
			}
		})
		if caught {
			break
		}
		sleep(bg, 500*time.Millisecond)
	}
	cancel()
	<-done
	l.cons.Close()
	committed := map[int32]int64{}
	if os, err := adm.FetchOffsets(ctx, largeGroup); err == nil {
		os.Each(func(o kadm.OffsetResponse) {
			if o.Topic == largeTopic && o.Err == nil {
				committed[o.Partition] = o.At
			}
		})
	}
	lagging := 0
	ends.Each(func(o kadm.ListedOffset) {
		if committed[o.Partition] < o.Offset {
			lagging++
		}
	})
	logs, rerr := readLargeLog(ctx, e.c.Bootstrap(), ends)
	if rerr != nil {
		problems = append(problems, fmt.Sprintf("large payloads: read %s back: %v", largeTopic, rerr))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run.Log, l.run.Committed = logs, committed
	for i, a := range l.run.Acked {
		l.run.Reads[a.Ref] = readBack(ctx, &payload.Client{Base: l.bases[i%len(l.bases)]}, a)
	}
	l.prod.Close()
	e.log.Info().Int("uploads", l.uploads).Int("acked", len(l.run.Acked)).Int("acked_before_stop", acked).
		Int("orphans", len(l.run.Orphans)).Int("failed_uploads_or_publishes", l.failures).
		Int("consumer_read_failures", l.readErrs).Int("verified", len(l.run.Verified)).
		Int("partitions_not_caught_up", lagging).Msg("large payloads")
	if lagging > 0 {
		problems = append(problems, fmt.Sprintf("large payloads: the consumer group had not committed the end of %d partitions a minute after the heal", lagging))
	}
	return append(problems, checker.CheckPayloads(l.run)...)
}

// readLargeLog reads every partition of the side topic from its start to
// ends: the reference each record names by partition and offset.
func readLargeLog(ctx context.Context, seeds []string, ends kadm.ListedOffsets) (map[int32]map[int64]string, error) {
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(largeTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32]map[int64]string{}
	next := map[int32]int64{}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return out, fmt.Errorf("read to the end offsets %v: got to %v: %w", want, next, rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if out[r.Partition] == nil {
				out[r.Partition] = map[int64]string{}
			}
			rf, _ := envelopeRef(r)
			out[r.Partition][r.Offset] = rf.ID
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
	}
	return out, nil
}

// readBack reads a's object through a broker, verified.
func readBack(ctx context.Context, pc *payload.Client, a checker.AckedPayload) checker.PayloadRead {
	rec := &kgo.Record{Topic: largeTopic, Partition: a.Partition, Offset: a.Offset}
	for _, h := range (ref.Ref{ID: a.Ref, Size: a.Size, SHA256: a.SHA256}).Headers() {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	var last checker.PayloadRead
	for attempt := 0; attempt < 3; attempt++ {
		rc, err := pc.Open(ctx, rec)
		if err != nil {
			last = checker.PayloadRead{Err: err.Error()}
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		_ = rc.Close()
		if err == nil {
			return checker.PayloadRead{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
		}
		if errors.Is(err, payload.ErrChecksum) {
			// The bytes read are not the envelope's: report what they were.
			return checker.PayloadRead{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
		}
		last = checker.PayloadRead{Err: err.Error()}
	}
	return last
}
