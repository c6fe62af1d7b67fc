package retry

// This file owns the Consumer's strict source partitions (doc.go, "Strict
// topics"): a queue.Lane per partition of a per-key-strict or
// per-partition-strict source topic, whose state is committed in the
// commit's metadata (queue.EncodeState), as the broker's HTTP queue does.
//
// Invariants:
//   - A strict partition's offset is committed only here, as its lane's
//     Committed() with its state (never marked for kgo's autocommit), so
//     the committed offset never passes a record that was not settled nor
//     the first held record of a pause.
//   - A paused scope's first held record is handed out again only at its
//     pause's due time (never, for a pause without one, until it is
//     lifted), and the scope's later records only after it is settled
//     (acked: the pause is lifted; or dead-lettered by keys:skip or Skip),
//     in order. A nack never dead-letters a strict record by itself.
//   - A nack that pauses (or re-pauses, or stops retrying) is committed
//     before Nack returns; Skip's dead letter is acknowledged before its
//     record is settled.
//   - A pause that was durable and is gone from the durable commit
//     (keys:resume or keys:skip over HTTP) is lifted here before the next
//     commit, so the commit does not bring it back. A commit that races
//     with the operator's carries the older operator revision and is
//     refused by the coordinator (queue.CheckCommit); it is made again
//     after a reconcile.
//
// State is guarded by Consumer.mu; commits and reconciles are serialised
// by Consumer.commitMu (not held by the rebalance callbacks, which commit
// directly, so a commit waiting for a rebalance cannot deadlock it).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/queue"
)

// StrictSyncInterval is how often a Consumer commits its strict
// partitions' acknowledgements and looks for pauses lifted over HTTP.
const StrictSyncInterval = time.Second

// ErrNotDelivered refuses a nack of a strict topic's record that is not an
// outstanding delivery of this consumer (settled, withdrawn by a pause, or
// of a partition no longer assigned).
var ErrNotDelivered = errors.New("retry: not an outstanding delivery of this consumer")

// restartedError stands for a failure of a paused record before the
// consumer restarted: the pause keeps the count, not the messages.
const restartedError = "(failed before a consumer restart; the message is not kept)"

type commitMark struct {
	offset   int64
	metadata string
}

// strictPart is one strict source partition the consumer owns.
type strictPart struct {
	order    string
	lane     *queue.Lane               // nil until offsets are fetched or a first record comes
	recs     map[int64]*kgo.Record     // the lane's window: in flight or waiting
	backlog  []*kgo.Record             // fetched, not yet offered (the lane said Stop)
	stopped  bool                      // fetching paused until the backlog drains
	retrying map[string]int64          // scope → its first held record, handed out again
	hist     map[int64][]queue.Failure // failures of a paused record in this process
	last     commitMark                // the last commit known durable
	known    bool
	lastP    map[string]int64 // scope → first held offset of the pauses in last
	dirty    bool
	stale    bool // a commit was refused: an operator changed the state since (queue.CheckCommit)
}

func newStrictPart(order string) *strictPart {
	return &strictPart{order: order, recs: map[int64]*kgo.Record{}, retrying: map[string]int64{},
		hist: map[int64][]queue.Failure{}, lastP: map[string]int64{}}
}

func (sp *strictPart) setLast(m commitMark, st queue.LaneState) {
	sp.last, sp.known = m, true
	sp.lastP = map[string]int64{}
	for _, p := range st.Pauses {
		sp.lastP[p.Scope] = p.First
	}
}

// strictOrder is the delivery order of a strict source topic, "" for any
// other topic.
func (c *Consumer) strictOrder(topic string) string {
	if ct, ok := c.contracts[topic]; ok && ct.IsStrict() {
		return ct.Order
	}
	return ""
}

// fetched restores the lanes of the strict partitions assigned from the
// offsets kgo fetched (kgo.OnOffsetsFetched): kgo starts reading at the
// same committed offset the lane starts at.
func (c *Consumer) fetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	add := func(topic string, partition int32, offset int64, md *string) {
		order := c.strictOrder(topic)
		if order == "" {
			return
		}
		k := tp{topic, partition}
		sp := newStrictPart(order)
		if old := c.strict[k]; old != nil && old.stopped {
			c.cl.ResumeFetchPartitions(map[string][]int32{topic: {partition}})
		}
		c.strict[k] = sp
		if offset < 0 {
			return // nothing committed: the lane starts at the first record
		}
		m := commitMark{offset: offset}
		if md != nil {
			m.metadata = *md
		}
		st, err := queue.DecodeState(m.metadata, offset)
		if err != nil {
			// Not a lane's state we can read: start from the committed
			// offset (a duplicate delivery, never a loss).
			st = queue.LaneState{Committed: offset}
		}
		sp.lane = queue.FromState(order, st, 0)
		sp.setLast(m, st)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				add(t.Topic, p.Partition, p.Offset, p.Metadata)
			}
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					add(t.Topic, p.Partition, p.Offset, p.Metadata)
				}
			}
		}
	}
	return nil
}

// offerStrict takes a fetched record of a strict partition; mu is held.
func (c *Consumer) offerStrict(sp *strictPart, r *kgo.Record, out *[]*kgo.Record) {
	if sp.lane == nil {
		sp.lane = queue.NewLane(sp.order, r.Offset, 0)
	}
	if len(sp.backlog) > 0 {
		sp.backlog = append(sp.backlog, r)
		return
	}
	if c.offerOne(sp, r, out) {
		return
	}
	sp.backlog = append(sp.backlog, r)
	if !sp.stopped {
		sp.stopped = true
		c.cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
	}
}

// offerOne offers r to the lane; it reports false when the lane reads no
// further (r is not taken).
func (c *Consumer) offerOne(sp *strictPart, r *kgo.Record, out *[]*kgo.Record) bool {
	v, err := sp.lane.Offer(r.Offset, r.Key)
	if err != nil {
		return true // below the lane's next offset: read before (a rewind after a rebalance)
	}
	switch v {
	case queue.Deliver:
		sp.recs[r.Offset] = r
		*out = append(*out, r)
	case queue.Hold:
		sp.recs[r.Offset] = r
	case queue.Skip:
		sp.dirty = true
	case queue.Stop:
		return false
	}
	return true
}

// releaseStrict hands out, per strict partition, the paused records now
// due, the waiting records of lifted pauses in order, and the backlog the
// lane takes; next is the earliest due time of a pause still waiting.
func (c *Consumer) releaseStrict(now time.Time) (out []*kgo.Record, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, sp := range c.strict {
		if sp.lane == nil {
			continue
		}
		for _, p := range sp.lane.Pauses() {
			if _, busy := sp.retrying[p.Scope]; busy || p.Attempts == 0 {
				continue // handed out already, or an HTTP pause (keys:resume lifts it)
			}
			if p.Due.After(now) {
				if next.IsZero() || p.Due.Before(next) {
					next = p.Due
				}
				continue
			}
			r := sp.recs[p.First]
			if r == nil && len(sp.backlog) > 0 && sp.backlog[0].Offset == p.First {
				r = sp.backlog[0] // a partition's pause restored: read, not offered
			}
			if r == nil {
				continue // not read again yet since a restart
			}
			sp.retrying[p.Scope] = p.First
			out = append(out, r)
		}
		for _, off := range sp.lane.Ready() {
			if r := sp.recs[off]; r != nil && sp.lane.Redeliver(off) == nil {
				out = append(out, r)
			}
		}
		for len(sp.backlog) > 0 {
			if !c.offerOne(sp, sp.backlog[0], &out) {
				break
			}
			sp.backlog = sp.backlog[1:]
		}
		if len(sp.backlog) == 0 && sp.stopped {
			sp.stopped = false
			c.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.partition}})
		}
	}
	return out, next
}

// settleStrict acknowledges a record handed out by the last Poll and not
// nacked; mu is held. The paused record handed out again lifts its pause
// (Lane.Skip: settled, the rest of the scope resumes).
func (c *Consumer) settleStrict(sp *strictPart, r *kgo.Record) {
	if sp.lane == nil {
		return
	}
	scope := queue.ScopeOf(sp.order, r.Key)
	if f, ok := sp.retrying[scope]; ok && f == r.Offset {
		delete(sp.retrying, scope)
		delete(sp.hist, r.Offset)
		if _, _, err := sp.lane.Skip(scope); err == nil {
			delete(sp.recs, r.Offset)
			sp.dirty = true
		}
		return
	}
	if _, err := sp.lane.Ack(r.Offset); err == nil {
		delete(sp.recs, r.Offset)
		sp.dirty = true
	}
}

// nackStrict is Nack on a strict topic: the record's scope pauses and the
// record is delivered again at its tier's due time; after the contract's
// last attempt, or on a permanent class, the scope stays paused with no
// due time until keys:resume or keys:skip (or Resume, Skip) lifts it: the
// record is never moved aside by itself, so no later record of its scope
// passes it.
func (c *Consumer) nackStrict(ctx context.Context, rec *kgo.Record, class string, cause error, ct queue.Contract) (Result, error) {
	k := tp{rec.Topic, rec.Partition}
	now := c.now()
	c.mu.Lock()
	sp := c.strict[k]
	if sp == nil || sp.lane == nil {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("%w: %s-%d is not assigned", ErrNotDelivered, rec.Topic, rec.Partition)
	}
	scope := queue.ScopeOf(sp.order, rec.Key)
	p, _ := sp.lane.Paused(scope)
	f, retried := sp.retrying[scope]
	retried = retried && f == rec.Offset
	if !retried && !sp.lane.IsInFlight(rec.Offset) {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("%w: %s-%d offset %d", ErrNotDelivered, rec.Topic, rec.Partition, rec.Offset)
	}
	attempt := 1
	var hist []queue.Failure
	if retried {
		attempt = p.Attempts + 1
		hist = append(hist, sp.hist[rec.Offset]...)
		for len(hist) < p.Attempts { // failures before a restart
			hist = append([]queue.Failure{{At: p.Since, Class: p.Class, Error: restartedError}}, hist...)
		}
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	hist = append(hist, queue.Failure{At: now, Class: class, Error: queue.TruncateError(msg)})
	m := queue.Meta{SourceTopic: rec.Topic, SourcePartition: rec.Partition, SourceOffset: rec.Offset, Group: c.nacker.Group,
		FirstSeen: hist[0].At, Attempt: attempt, History: hist, Tier: -1}
	d := ct.Decide(attempt, class, now, c.nacker.random)
	var withdrawn []int64
	if !retried {
		var err error
		if withdrawn, err = sp.lane.Nack(rec.Offset, now, class); err != nil {
			c.mu.Unlock()
			return Result{}, fmt.Errorf("retry: pause %s-%d offset %d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		}
	}
	delete(sp.retrying, scope)
	res := Result{Outcome: queue.Retry, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Paused: true, Withdrawn: withdrawn}
	var err error
	if d.Outcome == queue.Retry {
		due := time.UnixMilli(d.Due.Add(time.Millisecond - time.Nanosecond).UnixMilli())
		err = sp.lane.SetRetry(scope, attempt, due, class)
		m.Tier, m.Due, res.Due = d.Tier, due, due
	} else {
		// Exhausted or permanent: the pause stays, with no due time.
		err = sp.lane.ClearRetry(scope, class)
		m.DeadReason, res.Outcome = d.Reason, queue.Paused
	}
	if err != nil {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("retry: pause %s-%d offset %d: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	sp.hist[rec.Offset] = hist
	sp.dirty = true
	c.unhandLocked(rec)
	c.mu.Unlock()
	res.Meta = m
	return res, c.syncStrict(ctx, true)
}

// Attempt is the delivery number of a record Poll handed out: 1 from the
// source, the failures so far plus one for a retry copy (its
// sluice.retry.attempt header) or for a strict topic's paused record
// handed out again.
func (c *Consumer) Attempt(rec *kgo.Record) int {
	if m, ok, err := queue.Parse(headersOf(rec)); ok && err == nil && c.tiers[rec.Topic] {
		return m.Attempt + 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sp := c.strict[tp{rec.Topic, rec.Partition}]
	if sp == nil || sp.lane == nil {
		return 1
	}
	scope := queue.ScopeOf(sp.order, rec.Key)
	if f, ok := sp.retrying[scope]; ok && f == rec.Offset {
		p, _ := sp.lane.Paused(scope)
		return p.Attempts + 1
	}
	return 1
}

// unhandLocked takes rec out of the last Poll's handouts (it is not to be
// acknowledged); mu is held.
func (c *Consumer) unhandLocked(rec *kgo.Record) {
	for i, r := range c.handed {
		if r == rec {
			c.handed = append(c.handed[:i], c.handed[i+1:]...)
			return
		}
	}
}

// syncStrict lifts the pauses lifted over HTTP, then commits the strict
// partitions that changed: at once when force, else at most every
// StrictSyncInterval.
func (c *Consumer) syncStrict(ctx context.Context, force bool) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	if !force && time.Since(c.lastSync) < StrictSyncInterval {
		return nil
	}
	c.lastSync = time.Now()
	for try := 1; ; try++ {
		if err := c.reconcile(ctx); err != nil {
			return err
		}
		err := c.commitStrict(ctx, nil)
		// Refused as older than an operator's change: the reconcile
		// applies the change, and the commit is made again over it.
		if try == 3 || !errors.Is(err, kerr.UnstableOffsetCommit) {
			return err
		}
	}
}

// reconcile reads the durable commits of the strict partitions with a
// durable pause; one that differs from this consumer's last commit was
// written by keys:resume or keys:skip, and a durable pause it no longer
// holds is lifted here: skipped (keys:skip wrote the dead letter) when it
// marks the record done, else resumed from the record.
func (c *Consumer) reconcile(ctx context.Context) error {
	c.mu.Lock()
	var topics []string
	seen := map[string]bool{}
	for k, sp := range c.strict {
		if (len(sp.lastP) > 0 || sp.stale) && !seen[k.topic] {
			seen[k.topic] = true
			topics = append(topics, k.topic)
		}
	}
	c.mu.Unlock()
	if len(topics) == 0 {
		return nil
	}
	offs, err := kadm.NewClient(c.prod).FetchOffsetsForTopics(ctx, c.nacker.Group, topics...)
	if err != nil {
		return fmt.Errorf("retry: read the commits of %s: %w", c.nacker.Group, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, sp := range c.strict {
		o, ok := offs.Lookup(k.topic, k.partition)
		if !ok || o.Err != nil || (len(sp.lastP) == 0 && !sp.stale) || sp.lane == nil || o.At < 0 {
			continue
		}
		m := commitMark{o.At, o.Metadata}
		if m == sp.last {
			continue
		}
		st, err := queue.DecodeState(m.metadata, m.offset)
		if err != nil {
			continue
		}
		// The next commit builds on the operator's change read here.
		sp.lane.AdoptOp(st.Op)
		sp.stale = false
		still := map[string]int64{}
		for _, p := range st.Pauses {
			still[p.Scope] = p.First
		}
		for scope, first := range sp.lastP {
			cur, paused := sp.lane.Paused(scope)
			if f, ok := still[scope]; (ok && f == first) || !paused || cur.First != first {
				continue
			}
			delete(sp.retrying, scope)
			delete(sp.hist, first)
			if doneIn(st, first) {
				if _, _, err := sp.lane.Skip(scope); err == nil {
					delete(sp.recs, first)
				}
			} else {
				_, _ = sp.lane.Resume(scope) // paused: checked above
			}
			sp.dirty = true
		}
		sp.setLast(m, st)
	}
	return nil
}

// doneIn reports whether a durable state marks off done.
func doneIn(st queue.LaneState, off int64) bool {
	if off < st.Committed {
		return true
	}
	for _, r := range st.Done {
		if r.From <= off && off < r.To {
			return true
		}
	}
	return false
}

// commitStrict commits the changed strict partitions (of only, when not
// nil) with their lanes' states in the metadata.
func (c *Consumer) commitStrict(ctx context.Context, only map[string][]int32) error {
	c.mu.Lock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	marks := map[tp]commitMark{}
	states := map[tp]queue.LaneState{}
	for k, sp := range c.strict {
		if sp.lane == nil || !sp.dirty || (only != nil && !contains(only[k.topic], k.partition)) {
			continue
		}
		st := sp.lane.State(queue.MaxDoneRanges)
		md, err := queue.EncodeState(st)
		if err != nil {
			continue // cannot happen: a lane holds at most MaxPauses
		}
		if offsets[k.topic] == nil {
			offsets[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: st.Committed}
		marks[k], states[k] = commitMark{st.Committed, md}, st
		sp.dirty = false
	}
	c.mu.Unlock()
	if len(marks) == 0 {
		return nil
	}
	cctx := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				if m, ok := marks[tp{req.Topics[i].Topic, p.Partition}]; ok {
					md := m.metadata
					p.Metadata = &md
				}
			}
		}
		return nil
	})
	var cerr error
	stale := map[tp]bool{}
	c.cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				e := kerr.ErrorForCode(p.ErrorCode)
				if errors.Is(e, kerr.UnstableOffsetCommit) {
					// The broker refused a state older than an operator's
					// change (keys:resume, keys:skip): reconcile reads it.
					stale[tp{t.Topic, p.Partition}] = true
				}
				if e != nil && cerr == nil {
					cerr = fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, m := range marks {
		sp := c.strict[k]
		switch {
		case sp == nil:
		case cerr != nil:
			sp.dirty = true
			sp.stale = sp.stale || stale[k]
		default:
			sp.setLast(m, states[k])
		}
	}
	if cerr != nil {
		return fmt.Errorf("retry: commit the strict partitions of %s: %w", c.nacker.Group, cerr)
	}
	return nil
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// revoked commits the strict partitions being revoked, then drops them
// (kgo.OnPartitionsRevoked; the rebalance waits for it).
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, gone map[string][]int32) {
	// A failed commit leaves the durable state older: the new owner
	// delivers again what it does not cover (at least once).
	_ = c.commitStrict(ctx, gone)
	c.drop(ctx, cl, gone)
}

// dropStrictLocked forgets the strict partitions gone; mu is held.
func (c *Consumer) dropStrictLocked(gone map[string][]int32, resume map[string][]int32) {
	for t, ps := range gone {
		for _, p := range ps {
			if sp := c.strict[tp{t, p}]; sp != nil {
				if sp.stopped {
					resume[t] = append(resume[t], p)
				}
				delete(c.strict, tp{t, p})
			}
		}
	}
}
