package queue

// This file owns the per-partition acknowledgement tracker (doc.go, "The
// acknowledgement tracker").
//
// Invariant: Committed() is the smallest delivered offset not acknowledged,
// or Next() when none is outstanding; it never decreases except by Rewind.
// Invariant: at most Limit delivered offsets are remembered (outstanding,
// or acknowledged out of order behind an outstanding one).

import (
	"errors"
	"fmt"
	"sort"
)

// DefaultTrackerLimit bounds the outstanding offsets of one partition.
const DefaultTrackerLimit = 10000

// ErrNotOutstanding refuses an acknowledgement of an offset that was not
// delivered since the committed offset, or was acknowledged already.
var ErrNotOutstanding = errors.New("not an outstanding delivery")

// Tracker is one partition's acknowledgements for one group. It is not
// safe for concurrent use.
type Tracker struct {
	committed int64
	next      int64
	window    []slot // delivered since committed, in offset order
	acked     int    // acknowledged slots in window
	limit     int
}

type slot struct {
	off   int64
	acked bool
}

// NewTracker starts at the committed offset; limit ≤ 0 is the default.
func NewTracker(committed int64, limit int) *Tracker {
	if limit <= 0 {
		limit = DefaultTrackerLimit
	}
	return &Tracker{committed: committed, next: committed, limit: limit}
}

// Committed is the offset the group may commit: every offset below it was
// acknowledged or never delivered (absent from the log).
func (t *Tracker) Committed() int64 { return t.committed }

// Next is the next offset to deliver.
func (t *Tracker) Next() int64 { return t.next }

// Room is how many more offsets may be delivered before the limit: the
// window from the committed offset holds at most limit delivered offsets.
func (t *Tracker) Room() int { return t.limit - len(t.window) }

// Outstanding is the number of delivered offsets not acknowledged.
func (t *Tracker) Outstanding() int { return len(t.window) - t.acked }

// Deliver records that offsets (increasing, each ≥ Next) were handed out
// and that the next delivery starts at next (> every offset). Offsets
// between Next and next that are not listed are not in the log (or were
// skipped as not records) and need no acknowledgement.
func (t *Tracker) Deliver(offsets []int64, next int64) error {
	prev := t.next - 1
	for _, o := range offsets {
		if o <= prev {
			return fmt.Errorf("deliver offset %d: not after %d", o, prev)
		}
		prev = o
	}
	if next <= prev || next < t.next {
		return fmt.Errorf("deliver up to %d: not after %d", next, max(prev, t.next-1))
	}
	if t.Room() < len(offsets) {
		return fmt.Errorf("deliver %d offsets: only %d fit under the limit of %d", len(offsets), t.Room(), t.limit)
	}
	for _, o := range offsets {
		t.window = append(t.window, slot{off: o})
	}
	t.next = next
	t.advance()
	return nil
}

// Ack acknowledges off; it reports whether the committed offset moved.
func (t *Tracker) Ack(off int64) (bool, error) {
	i := sort.Search(len(t.window), func(i int) bool { return t.window[i].off >= off })
	if i == len(t.window) || t.window[i].off != off || t.window[i].acked {
		return false, fmt.Errorf("offset %d: %w (committed %d, next %d)", off, ErrNotOutstanding, t.committed, t.next)
	}
	t.window[i].acked = true
	t.acked++
	before := t.committed
	t.advance()
	return t.committed != before, nil
}

// IsOutstanding reports whether off was delivered and not acknowledged.
func (t *Tracker) IsOutstanding(off int64) bool {
	i := sort.Search(len(t.window), func(i int) bool { return t.window[i].off >= off })
	return i < len(t.window) && t.window[i].off == off && !t.window[i].acked
}

// advance drops the acknowledged prefix and sets the committed offset.
func (t *Tracker) advance() {
	i := 0
	for i < len(t.window) && t.window[i].acked {
		i++
	}
	if i > 0 {
		t.acked -= i
		t.window = append(t.window[:0], t.window[i:]...)
	}
	if len(t.window) > 0 {
		t.committed = t.window[0].off
	} else {
		t.committed = t.next
	}
}

// Rewind forgets every delivery since the committed offset: they are
// delivered again (a rebalance, a member's loss). Acknowledgements out of
// order are forgotten too, so their records are delivered again: a
// duplicate, never a loss.
func (t *Tracker) Rewind() {
	t.window, t.acked, t.next = t.window[:0], 0, t.committed
}
