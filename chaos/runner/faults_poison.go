package runner

// faults_poison.go owns the poison family (issue 22): beside the workload,
// a producer sends keyed records to two side topics, one relaxed (retry
// tiers of 200 and 500 ms, three attempts) and one per-key-strict, and one
// HTTP queue member per topic (chaos/workload.QueueMember, a group each)
// consumes them. A record's value says how the consumer treats it:
//
//	ok      processed (acked) at once
//	flaky   (relaxed only) nacked transient at its first delivery, processed
//	        at its retry
//	poison  nacked at every delivery: on the relaxed topic it goes through
//	        the tiers to the DLQ (or at once, with class permanent, for a
//	        third of them); on the strict topic it pauses its key
//
// An operator goroutine reads the strict group's paused keys (its lag) and,
// once a pause is a second old, either skips it (keys:skip: the poison
// record is dead-lettered) or repairs the consumer for that record and
// resumes the key (keys:resume: it is processed, then the key's later
// records). Each injection sends a burst of poison records and kills,
// during it, one of: the leader of a strict partition (restarted once
// another is elected), the coordinator of one of the two groups (the
// broker holding the pauses' state in memory), or every broker at once.
//
// After the heal the producer stops and the consumers and the operator get
// two minutes to settle every acknowledged record; then the dead-letter
// topics are read from their start and chaos/checker.CheckPoison judges
// at-least-once (processed or dead-lettered with its history, never
// neither) and per-key order on the strict topic.
//
// Invariant: a processing is recorded before its ack is sent, and an
// operator's skip or resume before its request, so the events' order is
// never later than what the broker saw; a record counts as acknowledged
// only on a produce that succeeded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/workload"
	"github.com/sluice-mq/sluice/queue"
)

const (
	poisonRelaxed = "chaos-poison-relaxed"
	poisonStrict  = "chaos-poison-strict"
	poisonKeys    = 6
	poisonBurst   = 4 // poison records sent at each injection, per topic
	poisonSettle  = 2 * time.Minute
)

// poisonGroup is the queue group of a side topic.
func poisonGroup(topic string) string { return topic + "-group" }

// sourceRef names a record of a source topic.
type sourceRef struct {
	topic     string
	partition int32
	offset    int64
}

// poisonSide is the family's producer, consumers, operator and record.
type poisonSide struct {
	prod   *kgo.Client
	bases  []string
	cancel context.CancelFunc // the consumers and the operator
	stopP  context.CancelFunc // the producer
	wg, pw sync.WaitGroup
	burst  atomic.Int32 // poison records the producer owes

	mu       sync.Mutex
	run      checker.PoisonRun
	seq      int
	acked    map[sourceRef]string // id of each acknowledged record
	repaired map[sourceRef]bool   // strict records the operator repaired before a resume
	settled  map[string]bool      // ids processed, or dead-lettered by a nack or a skip
	sent     int
	failed   int                // produces that did not succeed (unknown outcome)
	statuses map[string]int     // nack and ack results, by topic kind and status
	ackedOK  map[sourceRef]bool // source records whose ack was answered ok
	again    int                // deliveries of a source record after its ack was answered ok
	errText  map[string]int     // the failures' texts (cut short), for the log
	paused   int                // pauses the operator saw last
}

// poisonFault sends a burst of poison records and kills, meanwhile, a
// strict partition's leader, a queue group's coordinator, or every broker.
func (e *faultEnv) poisonFault(ctx context.Context) error {
	if err := e.startPoison(ctx); err != nil {
		return err
	}
	e.poison.burst.Add(2 * poisonBurst)
	kinds := []string{"leader-kill", "coordinator-kill", "crash-all"}
	switch kinds[e.rng.IntN(len(kinds))] {
	case "leader-kill":
		p := int32(e.rng.IntN(partitions))
		id, _, err := e.c.Leader(ctx, poisonStrict, p)
		if err != nil || id <= 0 {
			return nil
		}
		return e.killAndRestart(ctx, "poison-kill-leader", id, func() { e.waitLeaderOf(ctx, poisonStrict, p, id) })
	case "coordinator-kill":
		g := poisonGroup([]string{poisonRelaxed, poisonStrict}[e.rng.IntN(2)])
		resp := kadm.NewClient(e.poison.prod).FindGroupCoordinators(ctx, g)
		c, ok := resp[g]
		if !ok || c.Err != nil || c.NodeID <= 0 {
			return nil
		}
		return e.killAndRestart(ctx, "poison-kill-coordinator", c.NodeID, func() { sleep(ctx, 4*time.Second) })
	default:
		return e.crashAll(ctx)
	}
}

// killAndRestart kills broker id, waits, and restarts it.
func (e *faultEnv) killAndRestart(ctx context.Context, name string, id int32, wait func()) error {
	f := e.start(name, brokerName(id), nil)
	if err := e.kill(id); err != nil {
		return err
	}
	wait()
	if err := e.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restart %s: %w", brokerName(id), err)
	}
	e.stop(f)
	return nil
}

// waitLeaderOf polls until topic's partition p has a leader other than old.
func (e *faultEnv) waitLeaderOf(ctx context.Context, topic string, p, old int32) {
	start := time.Now()
	for time.Since(start) < time.Minute && ctx.Err() == nil {
		if id, _, err := e.c.Leader(ctx, topic, p); err == nil && id > 0 && id != old {
			e.res.Recoveries = append(e.res.Recoveries, time.Since(start))
			return
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// startPoison makes the side topics and starts the producer, the two
// consumers and the operator, once.
func (e *faultEnv) startPoison(ctx context.Context) error {
	if e.poison != nil {
		return nil
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.c.Bootstrap()...), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return err
	}
	adm := kadm.NewClient(prod)
	for name, configs := range map[string]map[string]*string{
		poisonRelaxed: {"retry.backoff.ms": ptr("200,500"), "retry.max.attempts": ptr("3")},
		poisonStrict:  {"delivery.order": ptr("per-key-strict")},
	} {
		resp, err := adm.CreateTopic(ctx, partitions, 3, configs, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			prod.Close()
			return fmt.Errorf("runner: create %s: %w", name, err)
		}
	}
	s := &poisonSide{prod: prod, acked: map[sourceRef]string{}, repaired: map[sourceRef]bool{},
		settled: map[string]bool{}, statuses: map[string]int{},
		ackedOK: map[sourceRef]bool{}, errText: map[string]int{}}
	for _, id := range e.c.Up() {
		s.bases = append(s.bases, "http://"+e.c.Broker(id).HTTPAddr)
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pctx, stopP := context.WithCancel(bg)
	s.cancel, s.stopP = cancel, stopP
	seed := e.rng.Uint64()
	s.pw.Add(1)
	go func() { defer s.pw.Done(); s.produce(pctx, seed) }()
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.consume(bg, poisonRelaxed, false) }()
	go func() { defer s.wg.Done(); s.consume(bg, poisonStrict, true) }()
	go func() { defer s.wg.Done(); s.operate(bg, seed) }()
	e.poison = s
	return nil
}

func ptr(s string) *string { return &s }

// produce sends about 60 records a second, alternating the topics, until
// ctx ends: 1 in 30 poison (and every owed burst), on the relaxed topic 1
// in 10 flaky.
func (s *poisonSide) produce(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9015))
	tick := time.NewTicker(time.Second / 60)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		topic, strict := poisonRelaxed, false
		if i%2 == 1 {
			topic, strict = poisonStrict, true
		}
		kind := checker.PoisonOK
		switch r := rng.IntN(30); {
		case s.burst.Load() > 0:
			s.burst.Add(-1)
			kind = checker.PoisonPoison
		case r == 0:
			kind = checker.PoisonPoison
		case !strict && r < 4:
			kind = checker.PoisonFlaky
		}
		key := "k" + strconv.Itoa(rng.IntN(poisonKeys))
		id := "poison-" + strconv.Itoa(i)
		rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(kind),
			Headers: []kgo.RecordHeader{{Key: "message_id", Value: []byte(id)}}}
		s.mu.Lock()
		s.sent++
		s.mu.Unlock()
		s.prod.Produce(ctx, rec, func(r *kgo.Record, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				s.failed++
				return
			}
			s.run.Acked = append(s.run.Acked, checker.PoisonRecord{Topic: topic, Strict: strict, Partition: r.Partition,
				Offset: r.Offset, Key: key, ID: id, Kind: kind})
			s.acked[sourceRef{topic, r.Partition, r.Offset}] = id
		})
	}
}

// event records one step, in order.
func (s *poisonSide) event(e checker.PoisonEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e.Seq = s.seq
	s.run.Events = append(s.run.Events, e)
	if e.Kind == checker.EventProcessed {
		s.settled[e.ID] = true
	}
}

// permanent says which relaxed poison records fail with class permanent
// (straight to the DLQ): a third of them, by id.
func permanent(id string) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return h.Sum32()%3 == 0
}

// pendingNack is a nack without a definite answer yet (a transport error,
// a 5xx, or status error: it may or may not have taken effect).
type pendingNack struct {
	ref workload.QueueRef
	msg workload.QueueMessage
	gen int32
}

// consume runs topic's queue member until ctx ends. A nack is repeated
// until it has a definite answer, and on the strict topic the key's later
// deliveries are left alone meanwhile (neither processed nor acked): had
// the nack not taken effect, the record would still be in flight, and the
// lane delivers a key's later records past an in-flight one; a consumer
// that processed them would break the key's order itself. A new
// generation makes every delivery of the old one void (they come again).
func (s *poisonSide) consume(ctx context.Context, topic string, strict bool) {
	m := &workload.QueueMember{Bases: s.bases, Group: poisonGroup(topic), Topics: []string{topic}}
	pending := map[string]pendingNack{} // by lane (strict) or by record (relaxed)
	for ctx.Err() == nil {
		for k, p := range pending {
			if p.gen != m.Generation() || !m.Joined() {
				delete(pending, k) // void: the new generation delivers it again
				continue
			}
			if s.nack(ctx, m, p) {
				delete(pending, k)
			}
		}
		msgs, err := m.Fetch(ctx, 500*time.Millisecond)
		if err != nil {
			s.fail("fetch-error", err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		blocked := map[string]bool{} // strict: keys nacked in this fetch
		var acks []workload.QueueRef
		for _, msg := range msgs {
			key := ""
			if msg.MessageKey != nil {
				key = *msg.MessageKey
			}
			lane := strconv.Itoa(int(msg.Partition)) + "/" + key
			if p, ok := pending[lane]; blocked[lane] || (strict && ok && p.gen == m.Generation()) {
				continue
			}
			src, off := msg.Topic, msg.Offset
			if msg.SourceTopic != "" {
				src, off = msg.SourceTopic, -1
			}
			kind := ""
			if msg.Payload != nil {
				kind = *msg.Payload
			}
			s.mu.Lock()
			repaired := s.repaired[sourceRef{src, msg.Partition, off}]
			if s.ackedOK[sourceRef{src, msg.Partition, off}] {
				s.again++
			}
			s.mu.Unlock()
			ref := workload.QueueRef{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
			if (kind == checker.PoisonPoison && !repaired) || (kind == checker.PoisonFlaky && msg.Attempt <= 1) {
				ref.ErrorClass, ref.Error = "transient", "cannot process "+kind
				if kind == checker.PoisonPoison && permanent(msg.MessageID) {
					ref.ErrorClass = "permanent"
				}
				if strict {
					// Paused, void or unknown: the key's later
					// deliveries of this fetch are not processed.
					blocked[lane] = true
				}
				p := pendingNack{ref: ref, msg: msg, gen: m.Generation()}
				if !s.nack(ctx, m, p) {
					k := lane
					if !strict {
						k = fmt.Sprintf("%s/%d/%d", msg.Topic, msg.Partition, msg.Offset)
					}
					pending[k] = p
				}
				continue
			}
			s.event(checker.PoisonEvent{Kind: checker.EventProcessed, Topic: src, Partition: msg.Partition, Offset: off,
				Key: key, ID: msg.MessageID})
			acks = append(acks, ref)
		}
		if len(acks) > 0 {
			res, err := m.Ack(ctx, acks...)
			s.results("ack", res, err)
			s.mu.Lock()
			for _, r := range res {
				if r.Status == "ok" && r.Topic == topic {
					s.ackedOK[sourceRef{r.Topic, r.Partition, r.Offset}] = true
				}
			}
			s.mu.Unlock()
		}
	}
}

// nack sends p's nack and records it; false when its outcome is unknown.
func (s *poisonSide) nack(ctx context.Context, m *workload.QueueMember, p pendingNack) bool {
	res, err := m.Nack(ctx, p.ref)
	s.results("nack", res, err)
	src, off := p.msg.Topic, p.msg.Offset
	if p.msg.SourceTopic != "" {
		src, off = p.msg.SourceTopic, -1
	}
	e := checker.PoisonEvent{Kind: checker.EventNack, Topic: src, Partition: p.msg.Partition, Offset: off, ID: p.msg.MessageID}
	if p.msg.MessageKey != nil {
		e.Key = *p.msg.MessageKey
	}
	switch {
	case errors.Is(err, workload.ErrRejoin):
		e.Note = "rejoin"
	case err != nil:
		e.Note = "unknown: " + err.Error()
	default:
		e.Note = res[0].Status
		if len(res[0].Withdrawn) > 0 {
			e.Note += fmt.Sprintf(" withdrawn %v", res[0].Withdrawn)
		}
	}
	s.event(e)
	if err == nil && res[0].Status == "dead_letter" {
		s.mu.Lock()
		s.settled[p.msg.MessageID] = true
		s.mu.Unlock()
	}
	return errors.Is(err, workload.ErrRejoin) || (err == nil && res[0].Status != "error")
}

func (s *poisonSide) count(what string) {
	s.mu.Lock()
	s.statuses[what]++
	s.mu.Unlock()
}

// fail counts a failed request and keeps its text.
func (s *poisonSide) fail(what string, err error) {
	msg := what + ": " + err.Error()
	if len(msg) > 160 {
		msg = msg[:160]
	}
	s.mu.Lock()
	s.statuses[what]++
	if len(s.errText) < 40 || s.errText[msg] > 0 {
		s.errText[msg]++
	}
	s.mu.Unlock()
}

func (s *poisonSide) results(op string, res []workload.QueueResult, err error) {
	if err != nil {
		s.fail(op+"-error", err)
		return
	}
	for _, r := range res {
		if r.Status == "error" {
			s.fail(op+"-error", errors.New(r.Error))
			continue
		}
		s.count(op + "-" + r.Status)
	}
}

// operate resolves the strict group's pauses once each is a second old:
// a skip or a repair and resume, drawn from seed.
func (s *poisonSide) operate(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x0be7))
	m := &workload.QueueMember{Bases: s.bases, Group: poisonGroup(poisonStrict)}
	for ctx.Err() == nil {
		sleep(ctx, 500*time.Millisecond)
		paused, err := m.Paused(ctx)
		if err != nil {
			s.fail("operator-error", err)
			continue
		}
		s.mu.Lock()
		s.paused = len(paused)
		s.mu.Unlock()
		for _, p := range paused {
			if p.AgeMs < 1000 || p.MessageKey == nil || p.Topic != poisonStrict {
				continue
			}
			ref := sourceRef{poisonStrict, p.Partition, p.FirstHeld}
			s.mu.Lock()
			id := s.acked[ref]
			s.mu.Unlock()
			e := checker.PoisonEvent{Topic: poisonStrict, Partition: p.Partition, Offset: p.FirstHeld, Key: *p.MessageKey, ID: id}
			if rng.IntN(2) == 0 {
				e.Kind = checker.EventSkip
				s.event(e)
				// Settled as far as waiting goes, whatever the answer: a
				// skip that failed leaves the pause, which is asked again;
				// one whose answer was lost took effect. The checker
				// judges by the dead-letter topic.
				s.mu.Lock()
				s.settled[id] = true
				s.mu.Unlock()
				if err := m.Skip(ctx, poisonStrict, p.Partition, *p.MessageKey); err != nil {
					s.fail("skip-error", err)
					continue
				}
				s.count("skip-ok")
				continue
			}
			s.mu.Lock()
			s.repaired[ref] = true
			s.mu.Unlock()
			e.Kind = checker.EventResume
			s.event(e)
			if err := m.Resume(ctx, poisonStrict, p.Partition, *p.MessageKey); err != nil {
				s.fail("resume-error", err)
				continue
			}
			s.count("resume-ok")
		}
	}
}

// unsettled counts the acknowledged records neither processed nor
// dead-lettered yet, and the pauses the operator saw last.
func (s *poisonSide) unsettled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.paused
	for _, r := range s.run.Acked {
		if !s.settled[r.ID] {
			n++
		}
	}
	return n
}

// stopPoison stops the producer, gives the consumers and the operator
// poisonSettle to settle every acknowledged record, reads the dead-letter
// topics and returns the checker's anomalies (nil when the family never
// ran).
func (e *faultEnv) stopPoison(ctx context.Context) []string {
	s := e.poison
	if s == nil {
		return nil
	}
	s.stopP()
	s.pw.Wait()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = s.prod.Flush(fctx)
	cancel()
	var problems []string
	deadline := time.Now().Add(poisonSettle)
	for i := 1; s.unsettled() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		sleep(ctx, 500*time.Millisecond)
		if i%10 == 0 {
			// A nack or skip whose answer was lost may have dead-lettered
			// its record: look in the dead-letter topics.
			for _, t := range []string{poisonRelaxed, poisonStrict} {
				ds, _ := readDeadLetters(ctx, e.c.Bootstrap(), s.prod, queue.Contract{}.DeadLetterTopic(t))
				s.mu.Lock()
				for _, d := range ds {
					s.settled[d.ID] = true
				}
				s.mu.Unlock()
			}
		}
	}
	if n := s.unsettled(); n > 0 {
		problems = append(problems, fmt.Sprintf("poison: %d acknowledged records (and pauses) not settled %v after the heal", n, poisonSettle))
	}
	s.cancel()
	s.wg.Wait()
	var dlq []checker.DeadLetter
	for _, t := range []string{poisonRelaxed, poisonStrict} {
		ds, err := readDeadLetters(ctx, e.c.Bootstrap(), s.prod, queue.Contract{}.DeadLetterTopic(t))
		if err != nil {
			problems = append(problems, fmt.Sprintf("poison: read the DLQ of %s: %v", t, err))
		}
		dlq = append(dlq, ds...)
	}
	s.prod.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.run.DLQ = dlq
	anomalies, cnt := checker.CheckPoison(s.run)
	if raw, err := json.Marshal(s.run); err == nil {
		// Beside the history: what the checker judged, to read again.
		if err := os.WriteFile(filepath.Join(e.dir, "poison.json"), raw, 0o644); err != nil {
			problems = append(problems, fmt.Sprintf("poison: keep the run: %v", err))
		}
	}
	e.log.Info().Int("sent", s.sent).Int("acked", cnt.Acked).Int("acked_poison", cnt.AckedPoison).
		Int("produce_failed", s.failed).Int("processed", cnt.Processed).Int("duplicates", cnt.Duplicates).
		Interface("dead_lettered", cnt.DeadLettered).Int("dlq_records", len(dlq)).Int("skips", cnt.Skips).
		Int("resumes", cnt.Resumes).Int("delivered_again_after_ack_ok", s.again).Int("order_checks", cnt.OrderChecks).Interface("results", s.statuses).Interface("failures", s.errText).
		Int("anomalies", len(anomalies)).Msg("poison")
	return append(problems, anomalies...)
}

// readDeadLetters reads a dead-letter topic from its start to its end
// offsets (none when it was never created) and parses each record.
func readDeadLetters(ctx context.Context, seeds []string, cl *kgo.Client, dlq string) ([]checker.DeadLetter, error) {
	adm := kadm.NewClient(cl)
	want := map[int32]int64{}
	var missing error
	// A leader elected a moment ago answers OFFSET_NOT_AVAILABLE (and a
	// broker just restarted NOT_LEADER...) until it has caught up: ask again.
	for deadline := time.Now().Add(30 * time.Second); ; {
		ends, err := adm.ListEndOffsets(ctx, dlq)
		if err != nil {
			return nil, err
		}
		missing = nil
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				missing = o.Err
				return
			}
			if o.Offset > 0 {
				want[o.Partition] = o.Offset
			}
		})
		if missing == nil || !kerr.IsRetriable(missing) || errors.Is(missing, kerr.UnknownTopicOrPartition) ||
			time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if missing != nil {
		if errors.Is(missing, kerr.UnknownTopicOrPartition) {
			return nil, nil
		}
		return nil, missing
	}
	if len(want) == 0 {
		return nil, nil
	}
	// Control records are kept (and not parsed) so the reader knows its
	// position when a partition ends with one.
	rd, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(dlq), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	next := map[int32]int64{}
	var out []checker.DeadLetter
	var lastErr error
	for {
		done := true
		for p, end := range want {
			if next[p] < end {
				done = false
			}
		}
		if done {
			return out, nil
		}
		fs := rd.PollFetches(rctx)
		if rctx.Err() != nil {
			now, _ := adm.ListEndOffsets(ctx, dlq)
			again := map[int32]int64{}
			now.Each(func(o kadm.ListedOffset) { again[o.Partition] = o.Offset })
			return out, fmt.Errorf("read %s to %v (end offsets now %v): got to %v: %w",
				dlq, want, again, next, errors.Join(rctx.Err(), lastErr))
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				lastErr = fmt.Errorf("%s-%d: %w", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, deadLetterOf(r))
			}
		})
	}
}

// deadLetterOf parses a DLQ record's message_id and sluice.retry.* headers.
func deadLetterOf(r *kgo.Record) checker.DeadLetter {
	var d checker.DeadLetter
	hs := make([]queue.Header, 0, len(r.Headers))
	for _, h := range r.Headers {
		if h.Key == "message_id" {
			d.ID = string(h.Value)
		}
		hs = append(hs, queue.Header{Key: h.Key, Value: h.Value})
	}
	m, ok, err := queue.Parse(hs)
	switch {
	case err != nil:
		d.Err = err.Error()
	case !ok:
		d.Err = "no sluice.retry headers"
	default:
		d.Reason, d.Attempt, d.History = m.DeadReason, m.Attempt, len(m.History)
		d.SourceTopic, d.SourcePartition, d.SourceOffset = m.SourceTopic, m.SourcePartition, m.SourceOffset
	}
	return d
}
