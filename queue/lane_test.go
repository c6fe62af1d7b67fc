package queue

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

type modelRec struct {
	off int64
	key []byte
}

// laneModel drives a Lane the way the queue API does and checks its
// invariants against a model: settled records, the pauses, and what was
// delivered since the last restart.
type laneModel struct {
	t        *testing.T
	rnd      *rand.Rand
	order    string
	log      []modelRec
	end      int64
	lane     *Lane
	limit    int
	poison   map[int64]bool
	settled  map[int64]bool
	skipped  map[int64]bool
	paused   map[string]int64 // scope → first held offset, as the model saw the nacks
	epoch    map[int64]bool   // delivered since the last restart and not withdrawn
	pending  []modelRec       // delivered to the consumer, not yet processed
	acked    map[string][]int64
	restarts int
	clock    time.Time
}

// expire runs the visibility timeout: the expired records (and, on a
// strict order, the later in-flight ones of their scopes) are no longer
// the consumer's.
func (m *laneModel) expire() {
	timeout := time.Duration(1+m.rnd.Intn(5)) * time.Second
	expired := m.lane.Expire(m.clock, timeout)
	gone := map[int64]bool{}
	for _, o := range expired {
		gone[o] = true
		delete(m.epoch, o)
		if _, err := m.lane.Ack(o); err == nil {
			m.t.Fatalf("ack of expired %d accepted", o)
		}
	}
	kept := m.pending[:0]
	for _, p := range m.pending {
		if !gone[p.off] {
			kept = append(kept, p)
		}
	}
	m.pending = kept
}

func (m *laneModel) scope(key []byte) string { return ScopeOf(m.order, key) }

func (m *laneModel) keyOf(off int64) []byte {
	for _, r := range m.log {
		if r.off == off {
			return r.key
		}
	}
	m.t.Fatalf("offset %d not in the log", off)
	return nil
}

func (m *laneModel) delivered(r modelRec) {
	s := m.scope(r.key)
	if f, ok := m.paused[s]; ok && r.off >= f {
		m.t.Fatalf("offset %d of scope %q delivered while paused at %d", r.off, s, f)
	}
	if m.settled[r.off] {
		m.t.Fatalf("offset %d delivered after it was settled", r.off)
	}
	for _, o := range m.log {
		if o.off < r.off && m.scope(o.key) == s && !m.settled[o.off] && !m.epoch[o.off] {
			m.t.Fatalf("offset %d of scope %q delivered before offset %d of it (neither settled nor delivered since the restart)", r.off, s, o.off)
		}
	}
	m.epoch[r.off] = true
	m.pending = append(m.pending, r)
}

func (m *laneModel) fetch(max int) {
	ready := m.lane.Ready()
	for _, off := range ready[:m.rnd.Intn(len(ready)+1)] { // a budget may end it
		if err := m.lane.Redeliver(off); err != nil {
			m.t.Fatalf("redeliver %d: %v", off, err)
		}
		m.delivered(modelRec{off, m.keyOf(off)})
	}
	n := 0
	for _, r := range m.log {
		if r.off < m.lane.Next() {
			continue
		}
		if n == max {
			return
		}
		v, err := m.lane.Offer(r.off, r.key)
		if err != nil {
			m.t.Fatal(err)
		}
		switch v {
		case Stop:
			return
		case Deliver:
			m.delivered(r)
		case Skip:
			if !m.settled[r.off] {
				m.t.Fatalf("offset %d skipped as done, never settled", r.off)
			}
		}
		n++
	}
	m.lane.Advance(m.end)
}

// process handles one pending record whose scope has no earlier pending
// one (a consumer processes a key in order).
func (m *laneModel) process() {
	var cand []int
	seen := map[string]bool{}
	for i, r := range m.pending {
		s := m.scope(r.key)
		if !seen[s] {
			cand = append(cand, i)
		}
		seen[s] = true
	}
	if len(cand) == 0 {
		return
	}
	i := cand[m.rnd.Intn(len(cand))]
	r := m.pending[i]
	m.pending = append(m.pending[:i], m.pending[i+1:]...)
	if m.poison[r.off] {
		withdrawn, err := m.lane.Nack(r.off, time.UnixMilli(int64(r.off)), "transient")
		if errors.Is(err, ErrPauseLimit) {
			m.pending = append(m.pending, r) // tried again later
			return
		}
		if err != nil {
			m.t.Fatalf("nack %d: %v", r.off, err)
		}
		s := m.scope(r.key)
		if f, ok := m.paused[s]; !ok || r.off < f {
			m.paused[s] = r.off
		}
		delete(m.epoch, r.off)
		for _, w := range withdrawn {
			delete(m.epoch, w)
			if _, err := m.lane.Ack(w); err == nil {
				m.t.Fatalf("ack of withdrawn %d accepted", w)
			}
		}
		// The consumer drops the scope's later pending records.
		kept := m.pending[:0]
		for _, p := range m.pending {
			if m.scope(p.key) != s {
				kept = append(kept, p)
			}
		}
		m.pending = kept
		return
	}
	if _, err := m.lane.Ack(r.off); err != nil {
		m.t.Fatalf("ack %d: %v", r.off, err)
	}
	m.settled[r.off] = true
	m.acked[m.scope(r.key)] = append(m.acked[m.scope(r.key)], r.off)
}

func (m *laneModel) pausedScopes() []string {
	var out []string
	for _, p := range m.lane.Pauses() {
		out = append(out, p.Scope)
	}
	return out
}

func (m *laneModel) resume(skip bool) {
	scopes := m.pausedScopes()
	if len(scopes) == 0 {
		return
	}
	s := scopes[m.rnd.Intn(len(scopes))]
	if skip {
		p, _, err := m.lane.Skip(s)
		if err != nil {
			m.t.Fatal(err)
		}
		m.settled[p.First], m.skipped[p.First] = true, true
	} else {
		p, err := m.lane.Resume(s)
		if err != nil {
			m.t.Fatal(err)
		}
		delete(m.poison, p.First) // repaired
	}
	delete(m.paused, s)
}

func (m *laneModel) restart() {
	meta, err := EncodeState(m.lane.State(MaxDoneRanges))
	if err != nil {
		m.t.Fatal(err)
	}
	st, err := DecodeState(meta, m.lane.Committed())
	if err != nil {
		m.t.Fatalf("decode %q: %v", meta, err)
	}
	m.lane = FromState(m.order, st, m.limit)
	m.epoch, m.pending = map[int64]bool{}, nil
	m.restarts++
}

func (m *laneModel) check() {
	for _, r := range m.log {
		if !m.settled[r.off] {
			if c := m.lane.Committed(); c > r.off {
				m.t.Fatalf("committed %d passed unsettled offset %d", c, r.off)
			}
			break
		}
	}
	if len(m.lane.Pauses()) != len(m.paused) {
		m.t.Fatalf("lane pauses %v, model %v", m.lane.Pauses(), m.paused)
	}
	for _, p := range m.lane.Pauses() {
		if f, ok := m.paused[p.Scope]; !ok || f != p.First {
			m.t.Fatalf("lane pause %q at %d, model %v", p.Scope, p.First, m.paused)
		}
	}
}

func runLaneModel(t *testing.T, seed int64, order string) {
	rnd := rand.New(rand.NewSource(seed))
	m := &laneModel{t: t, rnd: rnd, order: order, limit: 2 + rnd.Intn(12),
		poison: map[int64]bool{}, settled: map[int64]bool{}, skipped: map[int64]bool{},
		paused: map[string]int64{}, epoch: map[int64]bool{}, acked: map[string][]int64{}}
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"), nil, make([]byte, 100)}
	off := int64(rnd.Intn(5))
	start := off
	for i := 0; i < 20+rnd.Intn(60); i++ {
		off += 1 + int64(rnd.Intn(3)/2) // some offsets absent
		m.log = append(m.log, modelRec{off, keys[rnd.Intn(len(keys))]})
		if rnd.Intn(8) == 0 {
			m.poison[off] = true
		}
	}
	m.end = off + 1 + int64(rnd.Intn(2))
	m.lane = NewLane(order, start, m.limit)
	m.clock = time.Unix(1000, 0)
	for step := 0; step < 400; step++ {
		m.clock = m.clock.Add(time.Second)
		m.lane.SetTime(m.clock)
		switch x := rnd.Intn(21); {
		case x < 6:
			m.fetch(1 + rnd.Intn(6))
		case x < 15:
			m.process()
		case x < 17:
			m.resume(false)
		case x < 18:
			m.resume(true)
		case x < 19:
			m.expire()
		default:
			m.restart()
		}
		m.check()
	}
	// Drain: repair everything, and the lane reaches the log's end.
	for step := 0; ; step++ {
		if step > 10000 {
			t.Fatalf("seed %d: no progress: committed %d of %d, pauses %v", seed, m.lane.Committed(), m.end, m.lane.Pauses())
		}
		if len(m.pending) == 0 && m.lane.Committed() == m.end {
			break
		}
		if step%50 == 49 {
			for range m.pausedScopes() {
				m.resume(false)
			}
		}
		m.fetch(8)
		for len(m.pending) > 0 {
			m.process()
		}
		m.check()
	}
	for s, offs := range m.acked {
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] {
				t.Fatalf("seed %d: scope %q acked out of order: %v", seed, s, offs)
			}
		}
	}
	for _, r := range m.log {
		if !m.settled[r.off] {
			t.Fatalf("seed %d: offset %d never settled", seed, r.off)
		}
	}
}

// TestLaneModel: over many seeds, random fetches, in-order processing with
// poison records, nacks, resumes, skips and restarts from the durable
// state: no record is delivered while its scope is paused at or before it,
// nor before an earlier record of its scope that is neither settled nor
// delivered since the restart; the committed offset never passes an
// unsettled record; and once repaired everything is settled.
func TestLaneModel(t *testing.T) {
	for _, order := range []string{OrderPerKeyStrict, OrderPerPartitionStrict} {
		for seed := int64(0); seed < 800; seed++ {
			t.Run(fmt.Sprintf("%s/%d", order, seed), func(t *testing.T) { runLaneModel(t, seed, order) })
			if t.Failed() {
				return
			}
		}
	}
}

// TestLanePausedKeyLetsOthersFlow: a nack on key K holds K's later records
// while the other keys' records are delivered; after Resume K's records
// come in their order, from the nacked one.
func TestLanePausedKeyLetsOthersFlow(t *testing.T) {
	l := NewLane(OrderPerKeyStrict, 0, 100)
	recs := []struct {
		key string
	}{{"K"}, {"A"}, {"K"}, {"B"}, {"K"}, {"A"}}
	offer := func(from, to int) []Verdict {
		var out []Verdict
		for i := from; i < to; i++ {
			v, err := l.Offer(int64(i), []byte(recs[i].key))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	if v := offer(0, 2); v[0] != Deliver || v[1] != Deliver {
		t.Fatalf("%v", v)
	}
	if w, err := l.Nack(0, time.Unix(1, 0), ""); err != nil || len(w) != 0 {
		t.Fatalf("nack: %v %v", w, err)
	}
	if _, err := l.Ack(1); err != nil {
		t.Fatal(err)
	}
	got := offer(2, 6)
	want := []Verdict{Hold, Deliver, Hold, Deliver}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if l.Committed() != 0 || len(l.Ready()) != 0 {
		t.Fatalf("committed %d ready %v", l.Committed(), l.Ready())
	}
	st := l.State(MaxDoneRanges)
	if fmt.Sprint(st.Done) != "[{1 2}]" || len(st.Pauses) != 1 || st.Pauses[0].Scope != "kK" || st.Pauses[0].First != 0 {
		t.Fatalf("state %+v", st)
	}
	if _, err := l.Resume("kK"); err != nil {
		t.Fatal(err)
	}
	if r := l.Ready(); fmt.Sprint(r) != "[0 2 4]" {
		t.Fatalf("ready %v", r)
	}
	if err := l.Redeliver(2); err == nil {
		t.Fatal("redelivered 2 before 0")
	}
	for _, o := range []int64{0, 2, 4} {
		if err := l.Redeliver(o); err != nil {
			t.Fatal(err)
		}
	}
	// A new record of K after the ready ones is delivered normally.
	if v, _ := l.Offer(6, []byte("K")); v != Deliver {
		t.Fatalf("verdict %v", v)
	}
}

func TestLanePartitionPauseStops(t *testing.T) {
	l := NewLane(OrderPerPartitionStrict, 10, 100)
	for o := int64(10); o < 13; o++ {
		if v, _ := l.Offer(o, []byte("x")); v != Deliver {
			t.Fatalf("offset %d: %v", o, v)
		}
	}
	w, err := l.Nack(11, time.Unix(1, 0), "x")
	if err != nil || fmt.Sprint(w) != "[12]" {
		t.Fatalf("withdrawn %v err %v", w, err)
	}
	if v, _ := l.Offer(13, []byte("y")); v != Stop {
		t.Fatalf("verdict %v after a partition pause", v)
	}
	if _, err := l.Ack(10); err != nil || l.Committed() != 11 {
		t.Fatalf("committed %d err %v", l.Committed(), err)
	}
	if _, moved, err := l.Skip(""); err != nil || !moved || l.Committed() != 12 {
		t.Fatalf("skip: moved %v committed %d err %v", moved, l.Committed(), err)
	}
	if r := l.Ready(); fmt.Sprint(r) != "[12]" {
		t.Fatalf("ready %v", r)
	}
}

func TestStateRoundTripAndTrim(t *testing.T) {
	st := LaneState{Committed: 5, Pauses: []Pause{{Scope: ScopeOf(OrderPerKeyStrict, make([]byte, 200)), First: 7, Since: time.UnixMilli(123), Class: "bad-json"}}}
	for i := int64(0); i < 200; i++ {
		st.Done = append(st.Done, Range{10 + 3*i, 11 + 3*i})
	}
	s, err := EncodeState(st)
	if err != nil || len(s) > MaxStateBytes {
		t.Fatalf("%d bytes, %v", len(s), err)
	}
	got, err := DecodeState(s, 5)
	if err != nil || len(got.Pauses) != 1 || got.Pauses[0] != st.Pauses[0] || len(got.Done) == 0 || got.Done[0] != st.Done[0] {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := DecodeState(s, 8); err == nil {
		t.Fatal("a pause below the committed offset accepted")
	}
	if got, err := DecodeState("kafka client metadata", 3); err != nil || got.Committed != 3 || len(got.Pauses)+len(got.Done) != 0 {
		t.Fatalf("%+v %v", got, err)
	}
}

// FuzzDecodeState: DecodeState never panics, and what it accepts encodes
// back to a state it accepts equally.
func FuzzDecodeState(f *testing.F) {
	f.Add(StatePrefix+`{"d":[[3,5]],"p":[{"s":"a0s=","f":4,"t":1}]}`, int64(2))
	f.Add(StatePrefix+`{"p":[{"s":"","f":0,"t":0}]}`, int64(0))
	f.Add(StatePrefix+`{"d":[[5,3]]}`, int64(0))
	f.Add("", int64(0))
	f.Add(StatePrefix+`{"p":[{"s":"a2E=","f":4,"t":1,"c":"transient","a":3,"u":77}]}`, int64(4))
	f.Add(StatePrefix+`{"o":3}`, int64(4))
	f.Add(StatePrefix+`{"o":-1}`, int64(4))
	f.Fuzz(func(t *testing.T, s string, committed int64) {
		st, err := DecodeState(s, committed)
		if err != nil {
			return
		}
		enc, err := EncodeState(st)
		if err != nil {
			t.Fatalf("accepted %q, cannot encode: %v", s, err)
		}
		back, err := DecodeState(enc, committed)
		if err != nil || len(back.Pauses) != len(st.Pauses) || back.Op != st.Op {
			t.Fatalf("round trip of %q: %+v %v", s, back, err)
		}
		for i, p := range st.Pauses {
			if q := back.Pauses[i]; q.Scope != p.Scope || q.First != p.First || q.Attempts != p.Attempts || q.Due.UnixMilli() != p.Due.UnixMilli() {
				t.Fatalf("round trip of %q: pause %d %+v became %+v", s, i, p, q)
			}
		}
	})
}

// TestLaneSetRetryState: a retried pause's attempts and due time survive
// the commit metadata (the Go helper's retry in place), and a state that
// names one without the other, or attempts out of range, is refused.
func TestLaneSetRetryState(t *testing.T) {
	l := NewLane(OrderPerKeyStrict, 0, 10)
	for off := int64(0); off < 3; off++ {
		if v, err := l.Offer(off, []byte("a")); err != nil || (off == 0) != (v == Deliver) {
			t.Fatalf("offer %d: %v %v", off, v, err)
		}
		if off == 0 {
			if _, err := l.Nack(0, time.UnixMilli(1000), ClassTransient); err != nil {
				t.Fatal(err)
			}
		}
	}
	scope := ScopeOf(OrderPerKeyStrict, []byte("a"))
	if err := l.SetRetry("kb", 1, time.UnixMilli(5000), ClassTransient); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("retry of an unpaused scope: %v", err)
	}
	if err := l.SetRetry(scope, 0, time.UnixMilli(5000), ClassTransient); err == nil {
		t.Fatal("attempts 0 accepted")
	}
	if err := l.SetRetry(scope, 2, time.UnixMilli(5000), "bad-input"); err != nil {
		t.Fatal(err)
	}
	md, err := EncodeState(l.State(MaxDoneRanges))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md, `"a":2,"u":5000`) {
		t.Fatalf("metadata %s lacks the retry", md)
	}
	st, err := DecodeState(md, l.Committed())
	if err != nil {
		t.Fatal(err)
	}
	back := FromState(OrderPerKeyStrict, st, 10)
	p, ok := back.Paused(scope)
	if !ok || p.First != 0 || p.Attempts != 2 || !p.Due.Equal(time.UnixMilli(5000)) || p.Class != "bad-input" || !p.Since.Equal(time.UnixMilli(1000)) {
		t.Fatalf("restored pause %+v %v", p, ok)
	}
	for _, bad := range []string{
		`{"p":[{"s":"a2E=","f":0,"t":1,"a":2}]}`,
		`{"p":[{"s":"a2E=","f":0,"t":1,"u":9}]}`,
		`{"p":[{"s":"a2E=","f":0,"t":1,"a":101,"u":9}]}`,
		`{"p":[{"s":"a2E=","f":0,"t":1,"a":-1,"u":9}]}`,
		`{"p":[{"s":"a2E=","f":0,"t":1,"a":1,"u":-9}]}`,
	} {
		if _, err := DecodeState(StatePrefix+bad, 0); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// An HTTP pause (no a, u) encodes as before.
	h := NewLane(OrderPerKeyStrict, 0, 10)
	h.Offer(0, []byte("a"))
	h.Nack(0, time.UnixMilli(1000), ClassTransient)
	if md, _ := EncodeState(h.State(MaxDoneRanges)); md != StatePrefix+`{"p":[{"s":"a2E=","f":0,"t":1000,"c":"transient"}]}` {
		t.Fatalf("HTTP pause metadata %s", md)
	}
}

// TestLaneClearRetry: a retried pause whose attempts are exhausted waits
// for Resume or Skip: ClearRetry drops its attempts and due time, so its
// commit metadata is exactly an HTTP pause's (the class the last
// failure's), and the scope stays held.
func TestLaneClearRetry(t *testing.T) {
	l := NewLane(OrderPerKeyStrict, 0, 10)
	l.Offer(0, []byte("a"))
	if _, err := l.Nack(0, time.UnixMilli(1000), ClassTransient); err != nil {
		t.Fatal(err)
	}
	scope := ScopeOf(OrderPerKeyStrict, []byte("a"))
	if err := l.SetRetry(scope, 3, time.UnixMilli(5000), ClassTransient); err != nil {
		t.Fatal(err)
	}
	if err := l.ClearRetry("kb", ClassPermanent); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("clear of an unpaused scope: %v", err)
	}
	if err := l.ClearRetry(scope, ClassPermanent); err != nil {
		t.Fatal(err)
	}
	md, err := EncodeState(l.State(MaxDoneRanges))
	if err != nil {
		t.Fatal(err)
	}
	if want := StatePrefix + `{"p":[{"s":"a2E=","f":0,"t":1000,"c":"permanent"}]}`; md != want {
		t.Fatalf("metadata %s, want %s", md, want)
	}
	if v, err := l.Offer(1, []byte("a")); err != nil || v != Hold {
		t.Fatalf("a later record of the scope: %v %v", v, err)
	}
	if p, ok := l.Paused(scope); !ok || p.Attempts != 0 || !p.Due.IsZero() || len(l.Ready()) != 0 {
		t.Fatalf("pause %+v %v, ready %v", p, ok, l.Ready())
	}
}
