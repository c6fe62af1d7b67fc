package queue

import (
	"errors"
	"math/rand"
	"testing"
)

func TestTrackerTable(t *testing.T) {
	tr := NewTracker(10, 4)
	if err := tr.Deliver([]int64{10, 11, 13}, 14); err != nil { // 12 is not in the log
		t.Fatal(err)
	}
	steps := []struct {
		ack       int64
		moved     bool
		committed int64
		err       error
	}{
		{11, false, 10, nil},               // out of order: remembered
		{11, false, 10, ErrNotOutstanding}, // twice
		{9, false, 10, ErrNotOutstanding},  // before the window
		{12, false, 10, ErrNotOutstanding}, // never delivered
		{10, true, 13, nil},                // the gap closes over 11 and the absent 12
		{13, true, 14, nil},
		{14, false, 14, ErrNotOutstanding}, // not delivered yet
	}
	for i, s := range steps {
		moved, err := tr.Ack(s.ack)
		if moved != s.moved || tr.Committed() != s.committed || !errors.Is(err, s.err) {
			t.Fatalf("step %d ack %d: moved %v committed %d err %v; want %v %d %v", i, s.ack, moved, tr.Committed(), err, s.moved, s.committed, s.err)
		}
	}
	// The limit bounds what is outstanding.
	if err := tr.Deliver([]int64{14, 15, 16, 17}, 18); err != nil {
		t.Fatal(err)
	}
	if tr.Room() != 0 || tr.Deliver([]int64{18}, 19) == nil {
		t.Fatalf("room %d past the limit", tr.Room())
	}
	if _, err := tr.Ack(15); err != nil || tr.Room() != 0 { // acked out of order: still held
		t.Fatalf("room %d, err %v", tr.Room(), err)
	}
	if tr.Deliver([]int64{13}, 20) == nil || tr.Deliver(nil, 17) == nil {
		t.Fatal("delivery going backwards accepted")
	}
	tr.Rewind()
	if tr.Next() != 14 || tr.Committed() != 14 || tr.Outstanding() != 0 {
		t.Fatalf("rewind: next %d committed %d", tr.Next(), tr.Committed())
	}
}

// TestTrackerProperty checks the tracker against a model under random
// deliveries (with holes) and acknowledgements in random order: the
// committed offset is always the smallest delivered offset not
// acknowledged (or the next to deliver), so it never passes one.
func TestTrackerProperty(t *testing.T) {
	for seed := int64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		start := rng.Int63n(1000)
		limit := 1 + rng.Intn(20)
		tr := NewTracker(start, limit)
		outstanding := map[int64]bool{}
		var delivered []int64
		next := start
		for step := 0; step < 300; step++ {
			if rng.Intn(2) == 0 && tr.Room() > 0 {
				var offs []int64
				o := next
				for n := rng.Intn(tr.Room() + 1); n > 0; n-- {
					o += int64(1 + rng.Intn(3)) // holes
					offs = append(offs, o-1)
				}
				end := o + int64(rng.Intn(2))
				if err := tr.Deliver(offs, end); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				for _, x := range offs {
					outstanding[x] = true
				}
				delivered = append(delivered, offs...)
				next = end
			} else if len(outstanding) > 0 {
				var keys []int64
				for k := range outstanding {
					keys = append(keys, k)
				}
				k := keys[rng.Intn(len(keys))]
				if _, err := tr.Ack(k); err != nil {
					t.Fatalf("seed %d ack %d: %v", seed, k, err)
				}
				delete(outstanding, k)
			}
			want := next
			for k := range outstanding {
				want = min(want, k)
			}
			window := 0
			for _, d := range delivered {
				if d >= want {
					window++
				}
			}
			if tr.Committed() != want || tr.Next() != next || tr.Outstanding() != len(outstanding) || tr.Room() != limit-window {
				t.Fatalf("seed %d step %d: committed %d next %d outstanding %d; model %d %d %d", seed, step,
					tr.Committed(), tr.Next(), tr.Outstanding(), want, next, len(outstanding))
			}
		}
	}
}
