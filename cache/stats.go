package cache

// stats.go owns the cache's counters and their snapshot, Stats.
//
// Invariant: every counter only grows. Counters are atomics: any goroutine
// updates them without a lock.

import "sync/atomic"

// Stats is a snapshot of a Cache's counters, for export as metrics. The
// counters only grow; Bytes is a gauge.
type Stats struct {
	// Hits counts Gets answered from the cache.
	Hits uint64
	// Misses counts Gets that did not find their entry, whether they
	// started a fill, joined one or returned early.
	Misses uint64
	// Fills counts fills started, by Get or by Prefetch.
	Fills uint64
	// FillErrors counts fills that ended in an error (their own, a timeout,
	// or Close while they waited for a slot). Their results were not cached.
	FillErrors uint64
	// FillBytes counts the bytes returned by successful fills.
	FillBytes uint64
	// PrefetchesStarted counts prefetches that started a fill.
	PrefetchesStarted uint64
	// PrefetchesDropped counts prefetches dropped for want of a free slot.
	PrefetchesDropped uint64
	// Rejected counts successful fills whose value was not cached: larger
	// than MaxBytes, or (never seen in tests) refused by ristretto. A later
	// Get of the key fills again.
	Rejected uint64
	// Evicted counts entries evicted to make room for others.
	Evicted uint64
	// Bytes is the sum of the lengths of the entries cached now, at most
	// MaxBytes. Zero after Close.
	Bytes int64
	// MaxBytes is the configured budget.
	MaxBytes int64
}

// counters are the atomics behind Stats.
type counters struct {
	hits, misses                         atomic.Uint64
	fills, fillErrors, fillBytes         atomic.Uint64
	prefetchesStarted, prefetchesDropped atomic.Uint64
	rejected, evicted                    atomic.Uint64
}

// Stats returns a snapshot of the counters. The fields are read one by one,
// so a snapshot taken while the cache is busy need not be consistent across
// fields.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits:              c.stats.hits.Load(),
		Misses:            c.stats.misses.Load(),
		Fills:             c.stats.fills.Load(),
		FillErrors:        c.stats.fillErrors.Load(),
		FillBytes:         c.stats.fillBytes.Load(),
		PrefetchesStarted: c.stats.prefetchesStarted.Load(),
		PrefetchesDropped: c.stats.prefetchesDropped.Load(),
		Rejected:          c.stats.rejected.Load(),
		Evicted:           c.stats.evicted.Load(),
		Bytes:             c.bytes.Load(),
		MaxBytes:          c.cfg.MaxBytes,
	}
}
