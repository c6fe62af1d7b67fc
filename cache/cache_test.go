package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// gate is a fill that counts its calls and returns val, err once release is
// closed (or its context ends).
type gate struct {
	calls   atomic.Int64
	release chan struct{}
	val     []byte
	err     error
}

func newGate(val []byte, err error) *gate {
	return &gate{release: make(chan struct{}), val: val, err: err}
}

func (g *gate) fill(ctx context.Context) ([]byte, error) {
	g.calls.Add(1)
	select {
	case <-g.release:
		return g.val, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// constFill returns a fill that counts its calls in *calls and returns val.
func constFill(val []byte, calls *atomic.Int64) Fill {
	return func(context.Context) ([]byte, error) {
		calls.Add(1)
		return val, nil
	}
}

// noFill is for Gets that must hit.
func noFill(t *testing.T) Fill {
	return func(context.Context) ([]byte, error) {
		t.Error("fill called for an entry that should be cached")
		return nil, errors.New("unexpected fill")
	}
}

func newTestCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(c.Close)
	return c
}

type getResult struct {
	val []byte
	err error
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero means defaults", Config{}, true},
		{"all set", Config{MaxBytes: 1 << 20, MaxConcurrentFills: 4, ReservedGetFills: 4, FillTimeout: time.Second}, true},
		{"negative max bytes", Config{MaxBytes: -1}, false},
		{"negative fills", Config{MaxConcurrentFills: -1}, false},
		{"negative reserved", Config{ReservedGetFills: -1}, false},
		{"reserved above fills", Config{MaxConcurrentFills: 2, ReservedGetFills: 3}, false},
		{"reserved above default fills", Config{ReservedGetFills: DefaultMaxConcurrentFills + 1}, false},
		{"negative timeout", Config{FillTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			c, err := New(tt.cfg)
			if !tt.ok {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("New() = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(): %v", err)
			}
			c.Close()
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{MaxBytes: DefaultMaxBytes, MaxConcurrentFills: DefaultMaxConcurrentFills,
		ReservedGetFills: DefaultReservedGetFills, FillTimeout: DefaultFillTimeout}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WithDefaults() = %+v, want %+v", got, want)
	}
	if got := (Config{MaxConcurrentFills: 1}).WithDefaults().ReservedGetFills; got != 1 {
		t.Fatalf("reserved with one fill slot = %d, want 1", got)
	}
}

func TestNumCounters(t *testing.T) {
	tests := []struct {
		maxBytes int64
		want     int64
	}{
		{1 << 20, 10 * minExpectedEntries},
		{1 << 30, 10 * (1 << 30) / expectedEntryBytes},
		{1 << 50, maxNumCounters},
	}
	for _, tt := range tests {
		if got := numCounters(tt.maxBytes); got != tt.want {
			t.Errorf("numCounters(%d) = %d, want %d", tt.maxBytes, got, tt.want)
		}
	}
}

func TestGetMissThenHit(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20})
	var calls atomic.Int64
	val := []byte("chunk 0")
	got, err := c.Get(t.Context(), "obj#0", constFill(val, &calls))
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("first Get = %q, %v; want %q", got, err, val)
	}
	got, err = c.Get(t.Context(), "obj#0", noFill(t))
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("second Get = %q, %v; want %q", got, err, val)
	}
	if calls.Load() != 1 {
		t.Fatalf("fill called %d times, want 1", calls.Load())
	}
	want := Stats{Hits: 1, Misses: 1, Fills: 1, FillBytes: uint64(len(val)),
		Bytes: int64(len(val)), MaxBytes: 1 << 20}
	if s := c.Stats(); s != want {
		t.Fatalf("Stats() = %+v, want %+v", s, want)
	}
}

func TestGetCanceledBeforeMissStartsNoFill(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var calls atomic.Int64
	if _, err := c.Get(ctx, "k", constFill([]byte("v"), &calls)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v, want context.Canceled", err)
	}
	if calls.Load() != 0 || c.Stats().Fills != 0 {
		t.Fatalf("a fill started for a caller already gone")
	}
}

func TestSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		const callers = 50
		g := newGate([]byte("shared chunk"), nil)
		results := make(chan getResult, callers)
		for range callers {
			go func() {
				val, err := c.Get(t.Context(), "obj#7", g.fill)
				results <- getResult{val, err}
			}()
		}
		synctest.Wait() // every caller waits for the one fill
		if n := g.calls.Load(); n != 1 {
			t.Fatalf("%d fills running for %d callers, want 1", n, callers)
		}
		close(g.release)
		for range callers {
			r := <-results
			if r.err != nil || !bytes.Equal(r.val, g.val) {
				t.Fatalf("Get = %q, %v; want %q", r.val, r.err, g.val)
			}
		}
		s := c.Stats()
		if s.Misses != callers || s.Fills != 1 || g.calls.Load() != 1 {
			t.Fatalf("stats %+v, fill calls %d; want %d misses and 1 fill", s, g.calls.Load(), callers)
		}
	})
}

func TestCallerGoneFillLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		g := newGate([]byte("chunk"), nil)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := c.Get(ctx, "obj#1", g.fill)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Get = %v, want context.Canceled", err)
		}
		close(g.release)
		synctest.Wait() // the fill lands
		got, err := c.Get(t.Context(), "obj#1", noFill(t))
		if err != nil || !bytes.Equal(got, g.val) {
			t.Fatalf("Get after the fill landed = %q, %v; want %q", got, err, g.val)
		}
		if s := c.Stats(); s.Fills != 1 || s.Hits != 1 || g.calls.Load() != 1 {
			t.Fatalf("stats %+v, fill calls %d; want 1 fill and 1 hit", s, g.calls.Load())
		}
	})
}

func TestFailedFillNotCached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		errBoom := errors.New("boom: 503 slow down")
		g := newGate(nil, errBoom)
		const callers = 10
		results := make(chan getResult, callers)
		for range callers {
			go func() {
				val, err := c.Get(t.Context(), "obj#2", g.fill)
				results <- getResult{val, err}
			}()
		}
		synctest.Wait()
		close(g.release)
		for range callers {
			if r := <-results; !errors.Is(r.err, errBoom) || r.val != nil {
				t.Fatalf("Get = %q, %v; want nil and %v", r.val, r.err, errBoom)
			}
		}
		var calls atomic.Int64
		got, err := c.Get(t.Context(), "obj#2", constFill([]byte("ok"), &calls))
		if err != nil || string(got) != "ok" || calls.Load() != 1 {
			t.Fatalf("Get after a failed fill = %q, %v (%d fills); want a new fill", got, err, calls.Load())
		}
		if s := c.Stats(); s.Fills != 2 || s.FillErrors != 1 {
			t.Fatalf("stats %+v, want 2 fills and 1 fill error", s)
		}
	})
}

func TestFillTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20, FillTimeout: 5 * time.Second})
		g := newGate([]byte("never"), nil) // never released: the fill ends by its deadline
		start := time.Now()
		_, err := c.Get(t.Context(), "obj#3", g.fill)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("fill ended after %v, want the 5s fill timeout", d)
		}
		if s := c.Stats(); s.FillErrors != 1 {
			t.Fatalf("stats %+v, want 1 fill error", s)
		}
	})
}

func TestByteBudget(t *testing.T) {
	const (
		maxBytes  = 1 << 20
		entrySize = 16 << 10
	)
	c := newTestCache(t, Config{MaxBytes: maxBytes})
	cached := func() (sum int64) {
		c.rc.IterValues(func(e *entry) bool {
			sum += int64(len(e.data))
			return false
		})
		return sum
	}
	var calls atomic.Int64
	for i := range 3 * maxBytes / entrySize {
		key := fmt.Sprintf("obj#%d", i)
		if _, err := c.Get(t.Context(), key, constFill(make([]byte, entrySize), &calls)); err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		// Get returns once its fill's value is applied (or declined).
		sum, used, s := cached(), c.rc.MaxCost()-c.rc.RemainingCost(), c.Stats()
		if sum > maxBytes || used != sum || s.Bytes != sum {
			t.Fatalf("after %d entries: %d bytes cached, ristretto counts %d, Stats %d; budget %d",
				i+1, sum, used, s.Bytes, maxBytes)
		}
	}
	s := c.Stats()
	if s.Bytes < maxBytes/2 {
		t.Errorf("only %d of %d bytes used", s.Bytes, maxBytes)
	}
	if s.Evicted+s.Rejected == 0 {
		t.Errorf("3x the budget inserted, nothing evicted or rejected: %+v", s)
	}
	if s.FillBytes != 3*maxBytes {
		t.Errorf("FillBytes = %d, want %d", s.FillBytes, 3*maxBytes)
	}
}

func TestEntryLargerThanBudget(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 10})
	var calls atomic.Int64
	big := make([]byte, 2<<10)
	for range 2 {
		got, err := c.Get(t.Context(), "footer", constFill(big, &calls))
		if err != nil || len(got) != len(big) {
			t.Fatalf("Get = %d bytes, %v; want %d bytes", len(got), err, len(big))
		}
	}
	if s := c.Stats(); calls.Load() != 2 || s.Rejected != 2 || s.Bytes != 0 {
		t.Fatalf("stats %+v, %d fills; want the entry returned, never cached", s, calls.Load())
	}
}

func TestPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One prefetch slot, one reserved for Get.
		c := newTestCache(t, Config{MaxBytes: 1 << 20, MaxConcurrentFills: 2, ReservedGetFills: 1})
		a, b, g := newGate([]byte("a"), nil), newGate([]byte("b"), nil), newGate([]byte("g"), nil)

		c.Prefetch("a", a.fill)
		synctest.Wait()
		c.Prefetch("b", b.fill) // the prefetch slot is taken: dropped
		c.Prefetch("a", a.fill) // in flight: nothing to do
		if s := c.Stats(); s.PrefetchesStarted != 1 || s.PrefetchesDropped != 1 || a.calls.Load() != 1 || b.calls.Load() != 0 {
			t.Fatalf("stats %+v, fills a %d b %d; want a started, b dropped", s, a.calls.Load(), b.calls.Load())
		}

		// A reader's Get is not starved by the running prefetch.
		done := make(chan getResult, 1)
		go func() {
			val, err := c.Get(t.Context(), "g", g.fill)
			done <- getResult{val, err}
		}()
		synctest.Wait()
		if g.calls.Load() != 1 {
			t.Fatalf("Get's fill waits behind a prefetch")
		}
		close(g.release)
		if r := <-done; r.err != nil || string(r.val) != "g" {
			t.Fatalf("Get = %q, %v", r.val, r.err)
		}

		close(a.release)
		synctest.Wait()
		if got, err := c.Get(t.Context(), "a", noFill(t)); err != nil || string(got) != "a" {
			t.Fatalf("Get of the prefetched key = %q, %v", got, err)
		}
		c.Prefetch("a", a.fill) // cached: nothing to do
		if s := c.Stats(); s.PrefetchesStarted != 1 || s.PrefetchesDropped != 1 || a.calls.Load() != 1 {
			t.Fatalf("stats %+v: prefetch of a cached key did something", s)
		}
	})
}

func TestGetJoinsPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		p := newGate([]byte("prefetched"), nil)
		c.Prefetch("k", p.fill)
		done := make(chan getResult, 1)
		go func() {
			val, err := c.Get(t.Context(), "k", noFill(t))
			done <- getResult{val, err}
		}()
		synctest.Wait()
		close(p.release)
		if r := <-done; r.err != nil || string(r.val) != "prefetched" {
			t.Fatalf("Get = %q, %v; want the prefetch's value", r.val, r.err)
		}
		if s := c.Stats(); s.Fills != 1 || p.calls.Load() != 1 {
			t.Fatalf("stats %+v: the reader's Get did not wait for the prefetch", s)
		}
	})
}

func TestPrefetchOff(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 1 << 20, MaxConcurrentFills: 1})
	var calls atomic.Int64
	c.Prefetch("a", constFill([]byte("a"), &calls))
	if s := c.Stats(); s.PrefetchesDropped != 1 || s.Fills != 0 {
		t.Fatalf("stats %+v: with every slot reserved for Get, prefetch must drop", s)
	}
}

func TestCloseWaitsForFills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20})
		g := newGate([]byte("chunk"), nil)
		p := newGate([]byte("prefetched"), nil)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := c.Get(ctx, "k", g.fill)
			errc <- err
		}()
		c.Prefetch("p", p.fill)
		synctest.Wait()
		cancel()
		<-errc

		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while fills were running")
		default:
		}
		if _, err := c.Get(t.Context(), "other", noFill(t)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get while closing = %v, want ErrClosed", err)
		}
		c.Prefetch("other", noFill(t))

		close(g.release)
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while the prefetch was running")
		default:
		}
		close(p.release)
		<-closed
		c.Close() // again: returns at once
		if _, err := c.Get(t.Context(), "k", noFill(t)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close = %v, want ErrClosed", err)
		}
		if s := c.Stats(); s.Fills != 2 || s.FillErrors != 0 || s.Bytes != 0 {
			t.Fatalf("stats after Close %+v, want 2 fills, no error, no bytes", s)
		}
	})
}

func TestCloseAbandonsFillsWaitingForSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestCache(t, Config{MaxBytes: 1 << 20, MaxConcurrentFills: 1})
		running, waiting := newGate([]byte("r"), nil), newGate([]byte("w"), nil)
		results := make(chan getResult, 2)
		for _, g := range []*gate{running, waiting} {
			go func() {
				val, err := c.Get(t.Context(), string(g.val), g.fill)
				results <- getResult{val, err}
			}()
			synctest.Wait() // "r" takes the only slot before "w" asks
		}
		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		if r := <-results; !errors.Is(r.err, ErrClosed) {
			t.Fatalf("Get waiting for a slot at Close = %v, want ErrClosed", r.err)
		}
		close(running.release)
		if r := <-results; r.err != nil || string(r.val) != "r" {
			t.Fatalf("running fill's Get = %q, %v", r.val, r.err)
		}
		<-closed
		if waiting.calls.Load() != 0 {
			t.Fatal("a fill ran after Close began")
		}
	})
}

// TestConcurrentUse runs Gets, Prefetches and Close together for the race
// detector, checking each key always yields its own bytes.
func TestConcurrentUse(t *testing.T) {
	c := newTestCache(t, Config{MaxBytes: 64 << 10, MaxConcurrentFills: 4})
	fillFor := func(key string) Fill {
		return func(context.Context) ([]byte, error) {
			if key[len(key)-1] == '3' {
				return nil, errors.New("every tenth key fails")
			}
			return bytes.Repeat([]byte(key), 512), nil
		}
	}
	var (
		wg       sync.WaitGroup
		halfway  = make(chan struct{})
		halfOnce sync.Once
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if i == 250 {
					halfOnce.Do(func() { close(halfway) })
				}
				key := fmt.Sprintf("obj#%d", (i*7+w)%40)
				if i%5 == 0 {
					c.Prefetch(key, fillFor(key))
					continue
				}
				val, err := c.Get(t.Context(), key, fillFor(key))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err == nil && !bytes.Equal(val, bytes.Repeat([]byte(key), 512)) {
					t.Errorf("Get(%s) returned another key's bytes", key)
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-halfway
		c.Close()
	})
	// Real goroutines, not a synctest bubble: a Get or Close that hangs
	// fails here in seconds, not at the package timeout.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out after 20s waiting for the readers and Close to return")
	}
}
