package canary

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func store(m map[string]Result) Lookup {
	return func(id string) (Result, bool) { r, ok := m[id]; return r, ok }
}
func kinds(ms []Mismatch) (out []string) {
	for _, m := range ms {
		out = append(out, m.Kind+":"+m.ID)
	}
	return out
}

func TestReconcilerSettledIsForgottenWithoutMismatch(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	results := map[string]Result{}
	r.Sent("a")
	r.Acked("a", 1, 7)
	clk.add(30 * time.Millisecond)
	results["a"] = Result{1, 7}
	lat, ok := r.Applied("a")
	if !ok || lat != 30*time.Millisecond {
		t.Fatalf("Applied: %v %v, want 30ms true", lat, ok)
	}
	if _, ok := r.Applied("a"); ok {
		t.Fatal("a second Applied counted a latency again")
	}
	// Not committed yet: held, no mismatch.
	if ms := r.Check(store(results)); len(ms) != 0 || r.Tracked() != 1 {
		t.Fatalf("before commit: %v, tracked %d", kinds(ms), r.Tracked())
	}
	r.Committed(1, 8)
	if ms := r.Check(store(results)); len(ms) != 0 || r.Tracked() != 0 {
		t.Fatalf("after commit: %v, tracked %d", kinds(ms), r.Tracked())
	}
}

func TestReconcilerCommitPastUnprocessedIsSkipped(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	r.Sent("a")
	r.Acked("a", 0, 5)
	r.Committed(0, 5) // up to, not past: fine
	if ms := r.Check(store(nil)); len(ms) != 0 {
		t.Fatalf("commit at the id's offset: %v", kinds(ms))
	}
	r.Committed(0, 6)
	ms := r.Check(store(nil))
	if len(ms) != 1 || ms[0].Kind != KindSkipped || ms[0].Offset != 5 {
		t.Fatalf("commit past it: %+v, want one skipped at 5", ms)
	}
	if ms := r.Check(store(nil)); len(ms) != 0 {
		t.Fatalf("counted twice: %v", kinds(ms))
	}
}

func TestReconcilerLostAfterDeadline(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	r.Sent("a")
	r.Acked("a", 0, 1)
	r.Sent("f") // publish failed: never a mismatch
	r.Failed("f")
	clk.add(time.Minute)
	if ms := r.Check(store(nil)); len(ms) != 0 {
		t.Fatalf("at the deadline: %v", kinds(ms))
	}
	if got := r.OldestUnapplied(); got != time.Minute {
		t.Fatalf("oldest unapplied %v, want 1m", got)
	}
	clk.add(time.Millisecond)
	ms := r.Check(store(nil))
	if len(ms) != 1 || ms[0].Kind != KindLost || ms[0].ID != "a" {
		t.Fatalf("past the deadline: %v, want lost:a", kinds(ms))
	}
	if r.Tracked() != 0 || r.OldestUnapplied() != 0 {
		t.Fatalf("tracked %d, oldest %v after the deadline", r.Tracked(), r.OldestUnapplied())
	}
}

func TestReconcilerResultAtAnotherOffset(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	r.Sent("a")
	r.Acked("a", 2, 10)
	ms := r.Check(store(map[string]Result{"a": {2, 11}}))
	if len(ms) != 1 || ms[0].Kind != KindOffset {
		t.Fatalf("%v, want offset:a", kinds(ms))
	}
}

func TestReconcilerAppliedBeforeAckAndUnknownIDs(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	if _, ok := r.Applied("other-run"); ok {
		t.Fatal("an untracked id counted")
	}
	r.Sent("a")
	clk.add(5 * time.Millisecond)
	if lat, ok := r.Applied("a"); !ok || lat != 5*time.Millisecond { // the consumer saw it before the ack returned
		t.Fatalf("Applied before Acked: %v %v", lat, ok)
	}
	r.Acked("a", 0, 0)
	r.Committed(0, 1)
	if ms := r.Check(store(map[string]Result{"a": {0, 0}})); len(ms) != 0 || r.Tracked() != 0 {
		t.Fatalf("%v, tracked %d", kinds(ms), r.Tracked())
	}
}

func TestReconcilerUnackedInFlightIsHeld(t *testing.T) {
	clk := newClock()
	r := NewReconciler(clk.now, time.Minute)
	r.Sent("a")
	r.Committed(0, 100)
	if ms := r.Check(store(nil)); len(ms) != 0 || r.Tracked() != 1 {
		t.Fatalf("in flight: %v tracked %d", kinds(ms), r.Tracked())
	}
	if r.OldestUnapplied() != 0 {
		t.Fatal("an unacknowledged id counts as unapplied")
	}
}
