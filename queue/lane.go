package queue

// This file owns the Lane: one partition's deliveries for one group, with
// the pauses of a strict delivery order (doc.go, "Strict order: pauses").
//
// Invariants (checked by TestLaneModel over many seeds):
//   - Every offset in [Committed(), Next()) is exactly one of: in flight
//     (delivered, not settled), waiting (held back by a pause, or by an
//     earlier waiting record of its scope) or done (acknowledged, skipped,
//     or absent from the log). Only in-flight and waiting offsets are
//     remembered (the window); Committed() is the first of them, or Next().
//     So the committed offset never passes a record that was not settled.
//   - A scope (a key on per-key-strict, the whole partition on
//     per-partition-strict) with a pause at first held offset F gets no
//     record at or after F delivered until Resume or Skip; its records
//     before F are unaffected.
//   - A scope's waiting records are delivered in offset order, each before
//     any later record of the scope: a record is held while its scope has
//     a waiting record, and Ready lists waiting records in order.
//   - At most limit offsets are in the window; Offer stops at the limit.
//   - State() is what survives a restart: the committed offset, the done
//     offsets above it (as ranges) and the pauses. A lane built from it
//     (FromState) and fed the log from Committed() on delivers again every
//     record that was in flight or waiting, holds the paused scopes, and
//     skips every done record the ranges name (a dropped range only
//     redelivers: a duplicate, never a loss).

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Scope ids: the unit a pause holds back.
const (
	scopePartition = ""  // per-partition-strict: every record
	scopeNilKey    = "n" // per-key-strict, a record without a key
	// MaxScopeKey is the longest key kept verbatim in a scope id; a longer
	// key is named by its SHA-256.
	MaxScopeKey = 64
)

// ScopeOf is the scope id of a record with key under order: "" for the
// whole partition (per-partition-strict), "n" for no key, "k"+key for a
// key of at most MaxScopeKey bytes, "h"+SHA-256(key) for a longer one.
// The four forms cannot collide.
func ScopeOf(order string, key []byte) string {
	switch {
	case order == OrderPerPartitionStrict:
		return scopePartition
	case key == nil:
		return scopeNilKey
	case len(key) <= MaxScopeKey:
		return "k" + string(key)
	}
	sum := sha256.Sum256(key)
	return "h" + string(sum[:])
}

// Pause is one paused scope.
type Pause struct {
	Scope string    // see ScopeOf
	First int64     // the first held offset: the nacked record
	Since time.Time // when the nack paused it
	Class string    // the nack's error class ("" when not told)
	// A pause the pausing client retries by itself (the Go helper,
	// payload/retry): the failed deliveries of the record at First so
	// far, and when it is delivered again. Zero (the HTTP queue's
	// pauses): it waits for keys:resume or keys:skip.
	Attempts int
	Due      time.Time
}

// Verdict is what Offer decides about a record.
type Verdict int

const (
	Deliver Verdict = iota // hand it out (now in flight)
	Hold                   // held back by its scope's pause (now waiting)
	Skip                   // done already (acknowledged before a restart)
	Stop                   // read no further: the limit, or the partition's pause
)

// Errors of a lane.
var (
	ErrNotPaused   = errors.New("not paused")
	ErrPauseLimit  = errors.New("too many paused keys")
	ErrOutOfOrder  = errors.New("offered out of order")
	ErrNotInFlight = ErrNotOutstanding
)

// MaxPauses bounds the paused scopes of one lane (its state must fit the
// 4096 bytes of an offset commit's metadata).
const MaxPauses = 16

type laneSlot struct {
	off     int64
	scope   string
	waiting bool      // held back; else in flight
	at      time.Time // in flight: when delivered (SetTime)
}

// Lane is one partition's deliveries for one group. It is not safe for
// concurrent use.
type Lane struct {
	order     string
	committed int64
	next      int64
	win       []laneSlot // in flight or waiting, in offset order
	waiting   map[string]int
	pauses    map[string]Pause
	done      []Range // from a restored state: done offsets ≥ next
	limit     int
	now       time.Time // stamps deliveries (SetTime)
	op        int64     // the operator revision of the state (commitcheck.go)
}

// SetTime sets the time Offer and Redeliver stamp deliveries with (the
// visibility timeout counts from it: Expire).
func (l *Lane) SetTime(now time.Time) { l.now = now }

// Expire makes every in-flight record delivered at or before now−timeout
// wait again, ready to be delivered again in order (Ready); an ack of it
// is refused. On a strict order the later in-flight records of its scope
// wait too, so the scope's order holds. timeout ≤ 0 expires nothing. It
// returns the offsets expired.
func (l *Lane) Expire(now time.Time, timeout time.Duration) []int64 {
	if timeout <= 0 {
		return nil
	}
	cut := now.Add(-timeout)
	expired := map[string]bool{}
	var out []int64
	for i := range l.win {
		s := &l.win[i]
		if s.waiting || (s.at.After(cut) && (l.order == OrderRelaxed || !expired[s.scope])) {
			continue
		}
		s.waiting = true
		l.waiting[s.scope]++
		expired[s.scope] = true
		out = append(out, s.off)
	}
	return out
}

// NewLane starts a lane with nothing delivered at committed.
func NewLane(order string, committed int64, limit int) *Lane {
	if limit <= 0 {
		limit = DefaultTrackerLimit
	}
	return &Lane{order: order, committed: committed, next: committed, limit: limit,
		waiting: map[string]int{}, pauses: map[string]Pause{}}
}

// FromState restores a lane from its durable state (State).
func FromState(order string, st LaneState, limit int) *Lane {
	l := NewLane(order, st.Committed, limit)
	l.op = st.Op
	for _, r := range st.Done {
		if r.To > r.From && r.From >= st.Committed {
			l.done = append(l.done, r)
		}
	}
	sort.Slice(l.done, func(i, j int) bool { return l.done[i].From < l.done[j].From })
	for _, p := range st.Pauses {
		if order == OrderRelaxed || (order == OrderPerPartitionStrict) != (p.Scope == scopePartition) {
			continue // the topic's order changed: a pause of the other kind is void
		}
		if p.First < st.Committed {
			p.First = st.Committed
		}
		l.pauses[p.Scope] = p
	}
	return l
}

// Op is the operator revision of the lane's state (commitcheck.go).
func (l *Lane) Op() int64 { return l.op }

// AdoptOp raises the lane's operator revision to op (the consumer has
// applied the operator's change of the committed state it read).
func (l *Lane) AdoptOp(op int64) { l.op = max(l.op, op) }

// OperatorChange marks the lane's next state as an operator's: its
// revision rises by one (keys:resume, keys:skip).
func (l *Lane) OperatorChange() { l.op++ }

// Order is the lane's delivery order.
func (l *Lane) Order() string { return l.order }

// Committed is the offset the group may commit.
func (l *Lane) Committed() int64 { return l.committed }

// Next is the next offset to offer.
func (l *Lane) Next() int64 { return l.next }

// Room is how many more offsets fit in the window.
func (l *Lane) Room() int { return l.limit - len(l.win) }

// Pauses lists the paused scopes, oldest first offset first.
func (l *Lane) Pauses() []Pause {
	out := make([]Pause, 0, len(l.pauses))
	for _, p := range l.pauses {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out
}

// Paused reports the pause of a scope.
func (l *Lane) Paused(scope string) (Pause, bool) { p, ok := l.pauses[scope]; return p, ok }

// Offer decides about the record at off (≥ Next) of key: offsets between
// Next and off were absent from the log and are done.
func (l *Lane) Offer(off int64, key []byte) (Verdict, error) {
	if off < l.next {
		return Stop, fmt.Errorf("offset %d: %w (next %d)", off, ErrOutOfOrder, l.next)
	}
	if l.doneAt(off) {
		l.next = off + 1
		l.advance()
		return Skip, nil
	}
	scope := l.scope(key)
	p, paused := l.pauses[scope]
	held := (paused && off >= p.First) || l.waiting[scope] > 0
	if l.Room() <= 0 || (held && l.order == OrderPerPartitionStrict) {
		// A partition's pause reads nothing at or after its first held
		// offset: there is no other scope to go on with.
		return Stop, nil
	}
	v := Deliver
	if held {
		v = Hold
		l.waiting[scope]++
	}
	l.win = append(l.win, laneSlot{off: off, scope: scope, waiting: held, at: l.now})
	l.next = off + 1
	l.advance()
	return v, nil
}

// doneAt reports whether a restored state named off done.
func (l *Lane) doneAt(off int64) bool {
	for len(l.done) > 0 && l.done[0].To <= off {
		l.done = l.done[1:]
	}
	return len(l.done) > 0 && l.done[0].From <= off
}

// Advance records that the log holds nothing more below next (absent
// offsets, the end of a read): they are done.
func (l *Lane) Advance(next int64) {
	if next > l.next {
		l.next = next
		l.advance()
	}
}

// Ready lists the waiting offsets whose scope is no longer paused, in
// offset order: they are to be delivered again (Redeliver) before the
// scope's later records.
func (l *Lane) Ready() []int64 {
	var out []int64
	for _, s := range l.win {
		if _, paused := l.pauses[s.scope]; s.waiting && !paused {
			out = append(out, s.off)
		}
	}
	return out
}

// Redeliver hands out a ready offset (one Ready listed): it is in flight
// again. Only the first ready offset of its scope may be redelivered.
func (l *Lane) Redeliver(off int64) error {
	i, ok := l.find(off)
	if !ok || !l.win[i].waiting {
		return fmt.Errorf("offset %d: not waiting", off)
	}
	s := l.win[i]
	if _, paused := l.pauses[s.scope]; paused {
		return fmt.Errorf("offset %d: %w: its scope is paused", off, ErrOutOfOrder)
	}
	for _, o := range l.win[:i] {
		if o.waiting && o.scope == s.scope {
			return fmt.Errorf("offset %d: %w: offset %d of its scope waits before it", off, ErrOutOfOrder, o.off)
		}
	}
	l.win[i].waiting, l.win[i].at = false, l.now
	l.waiting[s.scope]--
	if l.waiting[s.scope] == 0 {
		delete(l.waiting, s.scope)
	}
	return nil
}

// IsInFlight reports whether off was delivered and not settled.
func (l *Lane) IsInFlight(off int64) bool {
	i, ok := l.find(off)
	return ok && !l.win[i].waiting
}

// Ack settles an in-flight offset as done; it reports whether the
// committed offset moved.
func (l *Lane) Ack(off int64) (bool, error) {
	i, ok := l.find(off)
	if !ok || l.win[i].waiting {
		return false, fmt.Errorf("offset %d: %w (committed %d, next %d)", off, ErrNotOutstanding, l.committed, l.next)
	}
	return l.remove(i), nil
}

// Nack pauses the scope of an in-flight offset at it (a strict order):
// the record waits, and so does every later in-flight record of its
// scope (withdrawn: their acks are refused; they are delivered again
// after Resume, in order). A scope paused already keeps the earlier First.
func (l *Lane) Nack(off int64, now time.Time, class string) (withdrawn []int64, err error) {
	if l.order == OrderRelaxed {
		return nil, fmt.Errorf("offset %d: a relaxed lane does not pause", off)
	}
	i, ok := l.find(off)
	if !ok || l.win[i].waiting {
		return nil, fmt.Errorf("offset %d: %w (committed %d, next %d)", off, ErrNotOutstanding, l.committed, l.next)
	}
	scope := l.win[i].scope
	p, paused := l.pauses[scope]
	if !paused && len(l.pauses) >= MaxPauses {
		return nil, fmt.Errorf("%w: %d scopes of this partition are paused already; resume or skip one", ErrPauseLimit, len(l.pauses))
	}
	if !paused || off < p.First {
		l.pauses[scope] = Pause{Scope: scope, First: off, Since: now, Class: class}
	}
	for j := i; j < len(l.win); j++ {
		if s := &l.win[j]; s.scope == scope && !s.waiting {
			s.waiting = true
			l.waiting[scope]++
			if j > i {
				withdrawn = append(withdrawn, s.off)
			}
		}
	}
	return withdrawn, nil
}

// SetRetry records that a paused scope's first held record failed
// attempts times so far and is to be delivered again at due (the Go
// helper's retry in place; Pause.Attempts, Pause.Due), with the last
// failure's class. The pause is otherwise unchanged.
func (l *Lane) SetRetry(scope string, attempts int, due time.Time, class string) error {
	p, ok := l.pauses[scope]
	switch {
	case !ok:
		return ErrNotPaused
	case attempts < 1 || attempts > MaxAttempts:
		return fmt.Errorf("attempts %d out of 1..%d", attempts, MaxAttempts)
	case due.UnixMilli() <= 0:
		return fmt.Errorf("due time %v is not after 1970", due) // the state could not say it
	}
	p.Attempts, p.Due, p.Class = attempts, due, class
	l.pauses[scope] = p
	return nil
}

// ClearRetry makes a paused scope wait for Resume or Skip (an operator's
// keys:resume or keys:skip) however it was paused: its retry fields
// (Pause.Attempts, Pause.Due) are cleared, so the pause is the one the
// HTTP queue writes, and the last failure's class is recorded.
func (l *Lane) ClearRetry(scope string, class string) error {
	p, ok := l.pauses[scope]
	if !ok {
		return ErrNotPaused
	}
	p.Attempts, p.Due, p.Class = 0, time.Time{}, class
	l.pauses[scope] = p
	return nil
}

// Resume lifts a scope's pause: its waiting records become Ready, from
// the first held offset on.
func (l *Lane) Resume(scope string) (Pause, error) {
	p, ok := l.pauses[scope]
	if !ok {
		return Pause{}, ErrNotPaused
	}
	delete(l.pauses, scope)
	return p, nil
}

// Skip settles a paused scope's first held record as done (the caller
// dead-lettered it) and resumes the rest; it reports whether the
// committed offset moved.
func (l *Lane) Skip(scope string) (Pause, bool, error) {
	p, ok := l.pauses[scope]
	if !ok {
		return Pause{}, false, ErrNotPaused
	}
	moved := false
	if i, ok := l.find(p.First); ok {
		l.waiting[scope]--
		if l.waiting[scope] == 0 {
			delete(l.waiting, scope)
		}
		moved = l.remove(i)
	} else if p.First >= l.next {
		// Not read since a restart (a partition pause stops before it):
		// the record at First is done once read.
		l.done = mergeDone(l.done, Range{p.First, p.First + 1})
	}
	delete(l.pauses, scope)
	return p, moved, nil
}

// find is the window index of off.
func (l *Lane) find(off int64) (int, bool) {
	i := sort.Search(len(l.win), func(i int) bool { return l.win[i].off >= off })
	return i, i < len(l.win) && l.win[i].off == off
}

// remove drops window slot i (settled) and reports whether the committed
// offset moved.
func (l *Lane) remove(i int) bool {
	before := l.committed
	l.win = append(l.win[:i], l.win[i+1:]...)
	l.advance()
	return l.committed != before
}

func (l *Lane) advance() {
	if len(l.win) > 0 {
		l.committed = l.win[0].off
	} else {
		l.committed = l.next
	}
}

func (l *Lane) scope(key []byte) string { return ScopeOf(l.order, key) }

// State is the lane's durable state: the committed offset, the done
// offsets above it (at most maxRanges ranges, the lowest kept) and the
// pauses.
func (l *Lane) State(maxRanges int) LaneState {
	st := LaneState{Committed: l.committed, Pauses: l.Pauses(), Op: l.op}
	prev := l.committed
	for _, s := range l.win {
		if s.off > prev {
			st.Done = append(st.Done, Range{prev, s.off})
		}
		prev = s.off + 1
	}
	if l.next > prev && len(l.win) > 0 {
		st.Done = append(st.Done, Range{prev, l.next})
	}
	// Done offsets known from a restored state but not read again yet.
	for _, r := range l.done {
		if r.From < l.next {
			r.From = l.next
		}
		if r.To > r.From {
			st.Done = append(st.Done, r)
		}
	}
	if len(st.Done) > maxRanges {
		st.Done = st.Done[:maxRanges]
	}
	return st
}

func mergeDone(rs []Range, r Range) []Range {
	rs = append(rs, r)
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	return rs
}
