// Package cache is Sluice's read cache for ranges of remote objects: the
// ~4 MiB chunks and the footers that the tier reader fetches with ranged
// GETs when a consumer reads below the local log start (docs/architecture.md).
// It owns the cached bytes, bounded by Config.MaxBytes and stored in
// dgraph-io/ristretto, their eviction, the fills that produce them and the
// read-ahead of sequential readers. It imports nothing else of Sluice's:
// keys and fills come from the caller, which builds keys such as
// "<object key>#<chunk index>".
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
// # Eviction
//
// A filled value is landed before its fill's flight ends: room is made in
// the budget, then the entry is handed to ristretto (Set, then Wait, so the
// next Get sees it). The victims are chosen here, not by ristretto: a CLOCK
// with small use counts, in which entries read again outlast those read
// once, and a prefetched entry outlasts the entries read before it, so
// read-ahead never evicts its own chunks before the reader gets there.
// Ristretto's TinyLFU admission was tried and refuses a new key read less
// often than the residents, which in a sequential replay is every new
// chunk: it cost 4.5 fills per chunk for one reader with read-ahead and
// left lagging readers nothing to share (evict.go). Ristretto remains the
// concurrent store and the cost account. A value larger than MaxBytes is
// returned to its waiters but not cached; an evicted entry only costs a
// second fill when it is read again. MaxBytes bounds the data bytes alone
// (ristretto's IgnoreInternalCost, and an empty entry costs 1); the
// bookkeeping adds a few hundred bytes an entry, negligible for chunks.
//
// # Concurrency
//
// Every method is safe for concurrent use. Every fill goroutine is owned by
// the Cache: Close stops new fills, waits for those in flight (each bounded
// by its timeout if it honours its context), then closes ristretto. Lock
// order: Cache.mu (flights) → Cache.rmu (ristretto against Close);
// Cache.emu (eviction) is taken alone. See cache.go and evict.go.
//
// Invariant: at most one fill per key is in flight.
// Invariant: at most MaxConcurrentFills fills run at once, and at most
// MaxConcurrentFills-ReservedGetFills of them were started by Prefetch.
// Invariant: the data bytes cached never exceed MaxBytes.
// Invariant: no goroutine of the cache outlives Close.
package cache
