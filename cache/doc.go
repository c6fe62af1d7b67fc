// Package cache is Sluice's read cache for ranges of remote objects: the
// ~4 MiB chunks and the footers that the tier reader fetches with ranged
// GETs when a consumer reads below the local log start (DESIGN.md §3, §5).
// It owns the cached bytes, bounded by Config.MaxBytes over
// dgraph-io/ristretto (TinyLFU admission, sampled-LFU eviction), the fills
// that produce them and the read-ahead of sequential readers. It imports
// nothing else of Sluice's: keys and fills come from the caller, which
// builds keys such as "<object key>#<chunk index>".
//
// # Entries
//
// An entry is an immutable byte slice under a string key; its cost is its
// length. Objects are immutable and never rewritten under the same key, so
// an entry is never updated or invalidated: it stays until ristretto evicts
// it. Returned slices are shared by every reader and must not be modified.
//
// # Fills
//
// Get on a miss waits for the key's fill, starting it if none is running:
// one fill per key at a time (single flight), whatever the number of
// consumers replaying the same partition. A fill runs on a goroutine of the
// cache with its own context (deadline Config.FillTimeout), detached from
// every caller: a caller whose context ends stops waiting, while the fill
// completes and lands in the cache for the next reader. A failed fill is not
// cached: each of its waiters gets the error, and the next Get fills again.
//
// Fills hold one of Config.MaxConcurrentFills slots while they run.
// Config.ReservedGetFills of them serve only Get, which waits for a slot;
// Prefetch (and so Readahead) takes one of the others only if it is free at
// once, and is otherwise dropped and counted, so read-ahead is bounded and
// cannot starve readers.
//
// # Admission
//
// A filled value is handed to ristretto (Set, then Wait, so that the next
// Get sees it) before its fill's flight ends. Ristretto may still decline
// it: a value larger than MaxBytes, a full set buffer, or, once the cache
// is full, an admission policy that prefers the entries it has (a key read
// less often than the eviction candidates it samples). Declined values are
// still returned to the fill's waiters; the cost is only a second fill when
// the key is read again, and the Rejected counter shows how often. MaxBytes
// bounds the data bytes alone (ristretto's IgnoreInternalCost); ristretto's
// bookkeeping adds ~100 bytes an entry, negligible for chunks.
//
// # Concurrency
//
// Every method is safe for concurrent use. Every fill goroutine is owned by
// the Cache: Close stops new fills, waits for those in flight (each bounded
// by its timeout if it honours its context), then closes ristretto. Lock
// order: Cache.mu (flights) → Cache.rmu (ristretto against Close); see
// cache.go.
//
// Invariant: at most one fill per key is in flight.
// Invariant: at most MaxConcurrentFills fills run at once, and at most
// MaxConcurrentFills-ReservedGetFills of them were started by Prefetch.
// Invariant: the data bytes cached never exceed MaxBytes.
// Invariant: no goroutine of the cache outlives Close.
package cache
