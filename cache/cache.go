package cache

// cache.go owns the Cache: the ristretto store of entries, the table of
// fills in flight (single flight per key), the fill slots and the fill
// goroutines. Eviction is in evict.go.
//
// Locks, in the order they may be taken:
//   - mu guards flights and closed. Held only for map operations, a
//     ristretto lookup and a non-blocking slot send; never across a fill or
//     a wait.
//   - rmu guards the ristretto cache against Close: lookups hold it shared,
//     Close holds it exclusively to close ristretto, which is not safe to
//     use while it closes. rclosed is guarded by rmu.
//   - emu (evict.go) guards the eviction queue and serialises ristretto's
//     Sets and Dels. Fill goroutines take it alone to land a value, and use
//     ristretto under it without rmu: Close waits for them first.
//
// Invariant: a key has at most one flight in flights; the flight is removed
// only after its value was landed in ristretto (Set, then Wait), so a Get
// that finds neither a flight nor an entry may start a new fill: the
// previous one failed, or its entry was evicted or too large to cache.
// Invariant: every fill goroutine is counted in wg before it starts, under
// mu and only while closed is false; Close sets closed, waits for wg, then
// closes ristretto, so no Set or Wait ever races ristretto's Close.
// Invariant: a running fill holds one slot, from shared or reserved; a
// prefetch takes only a shared slot and never waits for one.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// Fill produces the bytes of one entry, typically with a ranged GET. It
// runs on a goroutine of the Cache with a context of its own (deadline
// Config.FillTimeout), never the caller's, so it completes and its result is
// cached even if every caller waiting for it went away. The returned slice
// is owned by the cache from then on: neither the fill nor anyone else may
// modify it.
type Fill func(ctx context.Context) ([]byte, error)

// Cache is a bounded, concurrency-safe read cache of immutable byte slices
// keyed by string. See the package doc.
type Cache struct {
	cfg Config

	rmu     sync.RWMutex
	rc      *ristretto.Cache[string, *entry] // guarded by rmu against Close; safe for concurrent use otherwise
	rclosed bool                             // guarded by rmu

	emu   sync.Mutex
	queue []*entry     // guarded by emu: the cached entries, oldest first (evict.go)
	bytes atomic.Int64 // written under emu: the sum of queue's costs

	mu      sync.Mutex
	flights map[string]*flight // guarded by mu
	closed  bool               // guarded by mu

	// Fill slots: a send takes one, a receive gives it back. shared has
	// MaxConcurrentFills-ReservedGetFills slots, reserved the rest.
	shared   chan struct{}
	reserved chan struct{}
	// closing is closed when Close begins; fills waiting for a slot give up.
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // one count per fill goroutine

	stats counters
}

// flight is one fill in progress. val and err are written once by the fill
// goroutine before it closes done, and only read after done is closed.
type flight struct {
	done chan struct{}
	val  []byte
	err  error
}

// New returns a Cache with cfg (zero fields take their defaults).
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	c := &Cache{
		cfg:      cfg,
		flights:  make(map[string]*flight),
		shared:   make(chan struct{}, cfg.MaxConcurrentFills-cfg.ReservedGetFills),
		reserved: make(chan struct{}, cfg.ReservedGetFills),
		closing:  make(chan struct{}),
	}
	rc, err := ristretto.NewCache(&ristretto.Config[string, *entry]{
		NumCounters: numCounters(cfg.MaxBytes),
		MaxCost:     cfg.MaxBytes,
		BufferItems: 64,
		// Costs are the data bytes alone, so MaxBytes bounds exactly them.
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cache: new ristretto cache: %w", err)
	}
	c.rc = rc
	return c, nil
}

// Rough size of an entry for sizing ristretto's frequency counters: chunks
// are ~4 MiB, but footers and short tails are smaller.
const (
	expectedEntryBytes = 64 << 10
	minExpectedEntries = 1 << 10
	maxNumCounters     = 1 << 24
)

// numCounters sizes ristretto's admission counters at ~10 per entry the
// cache is expected to hold when full, as ristretto recommends. (Its
// admission never has to choose, as evict.go makes room before each Set,
// but it keeps counting.)
func numCounters(maxBytes int64) int64 {
	entries := max(maxBytes/expectedEntryBytes, minExpectedEntries)
	return min(10*entries, maxNumCounters)
}

// Get returns the entry for key. A hit returns at once. On a miss, Get
// waits for the key's fill, starting it if none is in flight: at most one
// fill runs per key, and every concurrent Get of the key waits for that
// same one. The fill runs detached from ctx (see Fill), so ctx only bounds
// this caller's wait: a canceled Get returns ctx's error while the fill goes
// on and lands in the cache. A failed fill is not cached; every waiter gets
// its error, and the next Get tries again.
//
// The returned slice is shared with the cache and other readers: it must
// not be modified.
func (c *Cache) Get(ctx context.Context, key string, fill Fill) ([]byte, error) {
	val, ok, err := c.lookup(key)
	if err != nil {
		return nil, err
	}
	if ok {
		c.stats.hits.Add(1)
		return val, nil
	}
	c.stats.misses.Add(1)
	if err := ctx.Err(); err != nil {
		// Nobody would wait for a fill started now.
		return nil, fmt.Errorf("cache: get %q: %w", key, err)
	}
	f, val, err := c.joinOrStart(ctx, key, fill)
	if f == nil {
		return val, err
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("cache: get %q: %w", key, ctx.Err())
	}
}

// lookup reads key from ristretto and counts the hit for eviction.
func (c *Cache) lookup(key string) ([]byte, bool, error) {
	c.rmu.RLock()
	defer c.rmu.RUnlock()
	if c.rclosed {
		return nil, false, ErrClosed
	}
	e, ok := c.rc.Get(key)
	if !ok {
		return nil, false, nil
	}
	e.touch()
	return e.data, true, nil
}

// contains reports whether key is cached, without counting a hit
// (ristretto's GetTTL reads the store only).
func (c *Cache) contains(key string) bool {
	c.rmu.RLock()
	defer c.rmu.RUnlock()
	if c.rclosed {
		return false
	}
	_, ok := c.rc.GetTTL(key)
	return ok
}

// joinOrStart returns the flight of key to wait for, starting one for fill
// if none is in flight. If a fill finished since Get's lookup, it returns
// the cached value and a nil flight instead.
func (c *Cache) joinOrStart(ctx context.Context, key string, fill Fill) (*flight, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	if f, ok := c.flights[key]; ok {
		return f, nil, nil
	}
	// A fill may have landed between the lookup and mu (it removes its
	// flight only after its value is visible in ristretto).
	if val, ok, err := c.lookup(key); err != nil || ok {
		return nil, val, err
	}
	f := c.startLocked(key, fill)
	c.wg.Go(func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.FillTimeout)
		defer cancel()
		gone := func(int) {}
		if gate := c.cfg.FillGate; gate != nil {
			var err error
			gone, err = gate(fctx)
			if err != nil {
				c.finish(key, f, nil, fmt.Errorf("cache: fill %q: wait at the gate: %w", key, err))
				return
			}
			inner := fill
			fill = func(ctx context.Context) ([]byte, error) {
				val, err := inner(ctx)
				gone(len(val))
				return val, err
			}
		}
		release, err := c.acquire(fctx)
		if err != nil {
			gone(0)
			c.finish(key, f, nil, fmt.Errorf("cache: fill %q: wait for a slot: %w", key, err))
			return
		}
		c.run(fctx, key, f, fill, release, 1)
	})
	return f, nil, nil
}

// Prefetch starts filling key in the background, without waiting, if it is
// neither cached nor being filled. It only takes a free prefetch slot: when
// there is none the prefetch is dropped (counted in Stats), never queued.
// The prefetched entry is cached like any other; if it is evicted before it
// is read, the reader's Get fills it again.
func (c *Cache) Prefetch(key string, fill Fill) {
	c.prefetch(key, fill, nil)
}

// prefetchResult says what prefetch did.
type prefetchResult int

const (
	prefetchSkipped prefetchResult = iota // cached, in flight, or the cache is closed
	prefetchStarted
	prefetchDropped // no free slot
)

// prefetch is Prefetch; done, if not nil, is called once the started fill
// has finished (after its value landed or it failed).
func (c *Cache) prefetch(key string, fill Fill, done func()) prefetchResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.flights[key] != nil || c.contains(key) {
		return prefetchSkipped
	}
	select {
	case c.shared <- struct{}{}:
	default:
		c.stats.prefetchesDropped.Add(1)
		return prefetchDropped
	}
	c.stats.prefetchesStarted.Add(1)
	f := c.startLocked(key, fill)
	c.wg.Go(func() {
		if done != nil {
			defer done()
		}
		fctx, cancel := context.WithTimeout(context.Background(), c.cfg.FillTimeout)
		defer cancel()
		c.run(fctx, key, f, fill, func() { <-c.shared }, maxUses)
	})
	return prefetchStarted
}

// startLocked registers a new flight for key; its goroutine is started by
// the caller, still under mu (see the wg invariant).
func (c *Cache) startLocked(key string, fill Fill) *flight {
	if fill == nil {
		panic("cache: nil fill for " + key)
	}
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	c.stats.fills.Add(1)
	return f
}

// acquire takes a slot for a Get's fill, shared or reserved, waiting until
// one is free, ctx is done or Close begins. It returns the slot's release.
func (c *Cache) acquire(ctx context.Context) (func(), error) {
	select {
	case c.reserved <- struct{}{}:
		return func() { <-c.reserved }, nil
	case c.shared <- struct{}{}:
		return func() { <-c.shared }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closing:
		return nil, ErrClosed
	}
}

// run calls fill holding a slot, then lands its result with the initial
// use count uses (evict.go).
func (c *Cache) run(ctx context.Context, key string, f *flight, fill Fill, release func(), uses int32) {
	val, err := fill(ctx)
	release()
	if err != nil {
		err = fmt.Errorf("cache: fill %q: %w", key, err)
	} else {
		c.stats.fillBytes.Add(uint64(len(val)))
		c.land(key, val, uses)
	}
	c.finish(key, f, val, err)
}

// finish publishes the outcome of f to its waiters and removes it from
// flights.
func (c *Cache) finish(key string, f *flight, val []byte, err error) {
	if err != nil {
		c.stats.fillErrors.Add(1)
		val = nil
	}
	c.mu.Lock()
	delete(c.flights, key)
	c.mu.Unlock()
	f.val, f.err = val, err
	close(f.done)
}

// Close stops new fills, lets the fills in flight finish (each is bounded by
// its FillTimeout; fills still waiting for a slot give up with ErrClosed),
// then closes ristretto. Afterwards Get returns ErrClosed and Prefetch does
// nothing. Close may be called more than once; every call returns once the
// cache is closed.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.closing)
		c.mu.Unlock()
		c.wg.Wait()

		c.rmu.Lock()
		c.rclosed = true
		c.rc.Close()
		c.rmu.Unlock()

		c.emu.Lock()
		c.queue = nil
		c.bytes.Store(0)
		c.emu.Unlock()
	})
}
