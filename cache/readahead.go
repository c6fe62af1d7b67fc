package cache

// readahead.go owns Readahead, the read-ahead window of one sequential
// reader over the cache.
//
// Invariant: running counts the fills this Readahead started that have not
// finished; Advance starts one only while running < window, so a reader
// never has more than window read-ahead fills in flight, even after a seek
// left some running behind it.

import "sync/atomic"

// Ref names an entry the reader will want and the fill that produces it.
type Ref struct {
	Key  string
	Fill Fill
}

// Readahead keeps the next window entries of one sequential reader cached
// or being filled, so that the reader's Get finds them ready. The tier
// reader makes one per replaying consumer and calls Advance each time it
// moves to a new chunk:
//
//	ra := c.NewReadahead(4)
//	for each chunk i in reading order:
//		ra.Advance(refs[i+1:])            // the next chunks, across object boundaries
//		buf, err := c.Get(ctx, refs[i].Key, refs[i].Fill)
//
// Read-ahead uses Prefetch's slots only, so it never delays a reader's own
// Get, and it is best effort: a prefetch dropped for want of a slot is
// tried again by the next Advance, or filled by the reader's Get when it
// gets there. Prefetched entries start with the highest use count
// (evict.go), so in a cache much larger than the window they are still
// there when the reader arrives. A Readahead is safe for concurrent use, though one
// reader calling it in order is what it is for; it holds no goroutine of its
// own (the cache owns the fills), so there is nothing to close.
type Readahead struct {
	c       *Cache
	window  int
	running atomic.Int64
}

// NewReadahead returns a Readahead that keeps up to window entries ahead of
// its reader; window <= 0 turns read-ahead off.
func (c *Cache) NewReadahead(window int) *Readahead {
	return &Readahead{c: c, window: max(window, 0)}
}

// Advance starts fills for the entries among next[:window] that are neither
// cached nor being filled, in order. next lists the entries after the one
// the reader is at, in reading order; entries beyond the window are
// ignored, so the reader may pass a longer list. Advance stops early when
// window of this Readahead's fills are still running or when a prefetch is
// dropped for want of a slot (the next Advance tries again). It never
// blocks, and returns the number of fills it started.
func (r *Readahead) Advance(next []Ref) int {
	started := 0
	for _, ref := range next[:min(r.window, len(next))] {
		// Counted before the fill starts, so its done cannot come first.
		if !r.reserve() {
			break
		}
		switch r.c.prefetch(ref.Key, ref.Fill, r.done) {
		case prefetchStarted:
			started++
		case prefetchSkipped:
			r.running.Add(-1)
		case prefetchDropped:
			r.running.Add(-1)
			return started
		}
	}
	return started
}

// InFlight returns the number of fills this Readahead started that are
// still running.
func (r *Readahead) InFlight() int { return int(r.running.Load()) }

// reserve counts one more running fill if fewer than window run.
func (r *Readahead) reserve() bool {
	for {
		n := r.running.Load()
		if n >= int64(r.window) {
			return false
		}
		if r.running.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (r *Readahead) done() { r.running.Add(-1) }
