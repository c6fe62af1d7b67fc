package cache

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func TestReadahead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		gates := make([]*gate, 10)
		refs := make([]Ref, len(gates))
		for i := range gates {
			gates[i] = newGate(fmt.Appendf(nil, "chunk %d", i), nil)
			refs[i] = Ref{Key: fmt.Sprintf("obj#%d", i), Fill: gates[i].fill}
		}
		// The reader already read chunk 5 (another consumer did, say).
		var calls5 atomic.Int64
		if _, err := c.Get(t.Context(), refs[5].Key, constFill(gates[5].val, &calls5)); err != nil {
			t.Fatal(err)
		}
		ra := c.NewReadahead(3)
		land := func(i int) {
			t.Helper()
			close(gates[i].release)
			synctest.Wait()
		}
		steps := []struct {
			name    string
			do      func()
			next    []Ref
			started int
			running int
		}{
			{"at chunk 0: fill 1, 2, 3", nil, refs[1:], 3, 3},
			{"again: all in flight", nil, refs[1:], 0, 3},
			{"at chunk 1: 2, 3 in flight, fill 4", func() { land(1) }, refs[2:], 1, 3},
			{"at chunk 3: 4 in flight, 5 cached, fill 6", func() { land(2); land(3) }, refs[4:], 1, 2},
			{"at chunk 4: 5 cached, 6 in flight, fill 7", func() { land(4) }, refs[5:], 1, 2},
			{"seek to chunk 8: 6 and 7 still run, fill 9 only", nil, refs[9:], 1, 3},
			{"end of the log", func() { land(6); land(7); land(9) }, refs[10:], 0, 0},
		}
		for _, st := range steps {
			if st.do != nil {
				st.do()
			}
			if got := ra.Advance(st.next); got != st.started || ra.InFlight() != st.running {
				t.Fatalf("%s: started %d with %d running, want %d with %d", st.name, got, ra.InFlight(), st.started, st.running)
			}
		}
		for i, g := range gates {
			want := int64(1)
			if i == 0 || i == 5 || i == 8 {
				want = 0 // never ahead of the reader, or cached
			}
			if g.calls.Load() != want {
				t.Errorf("chunk %d filled %d times, want %d", i, g.calls.Load(), want)
			}
			if want == 1 {
				if got, err := c.Get(t.Context(), refs[i].Key, noFill(t)); err != nil || string(got) != string(g.val) {
					t.Errorf("Get(%s) = %q, %v; want the read-ahead chunk", refs[i].Key, got, err)
				}
			}
		}
		if calls5.Load() != 1 {
			t.Errorf("cached chunk 5 filled again")
		}
	})
}

func TestReadaheadDroppedWhenSlotsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One prefetch slot shared by two readers.
		c := newTestCache(t, Config{MaxBytes: 1 << 20, MaxConcurrentFills: 2, ReservedGetFills: 1})
		a, b := newGate([]byte("a"), nil), newGate([]byte("b"), nil)
		ra, rb := c.NewReadahead(4), c.NewReadahead(4)
		if got := ra.Advance([]Ref{{"a", a.fill}, {"a2", a.fill}}); got != 1 {
			t.Fatalf("first reader started %d, want 1 (one slot)", got)
		}
		if got := rb.Advance([]Ref{{"b", b.fill}}); got != 0 || rb.InFlight() != 0 {
			t.Fatalf("second reader started %d, want 0", got)
		}
		if s := c.Stats(); s.PrefetchesStarted != 1 || s.PrefetchesDropped != 2 {
			t.Fatalf("stats %+v, want 1 started, 2 dropped", s)
		}
		close(a.release)
		synctest.Wait()
		if got := rb.Advance([]Ref{{"b", b.fill}}); got != 1 {
			t.Fatalf("second reader started %d once the slot was free, want 1", got)
		}
		close(b.release)
	})
}

func TestReadaheadOff(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20})
	ra := c.NewReadahead(0)
	if got := ra.Advance([]Ref{{"a", noFill(t)}}); got != 0 {
		t.Fatalf("window 0 started %d fills", got)
	}
}
