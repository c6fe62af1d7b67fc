package fair

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newLane(t *testing.T, cfg LaneConfig) *Lane {
	t.Helper()
	l, err := NewLane(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ctxWithin(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestUncontendedGrantsAtOnceAndUncharged(t *testing.T) {
	l := newLane(t, LaneConfig{Slots: 2, Quantum: 100})
	ctx := ctxWithin(t, 5*time.Second)
	g1, err := l.Acquire(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := l.Acquire(ctx, "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	if g1.est != 0 || g2.est != 0 {
		t.Errorf("uncontended grants charged %v and %v", g1.est, g2.est)
	}
	if s := l.Stats(); s.Busy != 2 || s.Waiting != 0 {
		t.Errorf("stats %+v", s)
	}
	g1.Done(1e9)
	g1.Done(1e9) // a second Done is a no-op
	g2.Done(5)
	if s := l.Stats(); s.Busy != 0 || s.Tenants != 0 {
		t.Errorf("after Done: %+v, want an empty lane", s)
	}
	if _, err := NewLane(LaneConfig{Slots: 0}); err == nil {
		t.Error("a lane of no slots was made")
	}
}

// backlogged runs workers goroutines per tenant, each looping Acquire /
// Done(cost) until total cost served reaches budget, and returns the cost
// each tenant was served.
func backlogged(t *testing.T, l *Lane, workers int, budget float64, tenants map[string]struct {
	weight, cost float64
}) map[string]float64 {
	t.Helper()
	ctx := ctxWithin(t, 20*time.Second)
	var mu sync.Mutex
	served := map[string]float64{}
	var total atomic.Int64
	// Every worker queues behind a held slot before any is served, so a
	// slow start of one tenant's goroutines cannot leave the lane to the
	// others.
	hold, err := l.Acquire(ctx, "holder", 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for name, tc := range tenants {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for total.Load() < int64(budget) {
					g, err := l.Acquire(ctx, name, tc.weight)
					if err != nil {
						return
					}
					mu.Lock()
					served[name] += tc.cost
					mu.Unlock()
					total.Add(int64(tc.cost))
					g.Done(tc.cost)
				}
			}()
		}
	}
	for deadline := time.Now().Add(10 * time.Second); l.Stats().Waiting < workers*len(tenants); {
		if time.Now().After(deadline) {
			t.Fatalf("workers did not queue: %+v", l.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	hold.Done(0)
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(25 * time.Second):
		t.Fatal("workers did not finish: a lane stalled")
	}
	if ctx.Err() != nil {
		t.Fatal("a worker's Acquire ran out of time: a lane stalled")
	}
	return served
}

// TestSharesFollowWeightsNotRequestSizes: under contention each tenant is
// served cost in proportion to its weight, whether it sends few large
// requests or many small ones.
func TestSharesFollowWeightsNotRequestSizes(t *testing.T) {
	l := newLane(t, LaneConfig{Slots: 1, Quantum: 500})
	served := backlogged(t, l, 4, 4e6, map[string]struct{ weight, cost float64 }{
		"large": {1, 5000},
		"small": {1, 50},
		"heavy": {2, 700},
	})
	sum := served["large"] + served["small"] + served["heavy"]
	want := map[string]float64{"large": 0.25, "small": 0.25, "heavy": 0.5}
	for name, share := range want {
		got := served[name] / sum
		if got < share*0.9 || got > share*1.1 {
			t.Errorf("%s served %.3f of the lane, want %.3f ±10%% (served %v)", name, got, share, served)
		}
	}
}

// TestFloodOfSmallRequestsDoesNotDelayAnotherTenant: a tenant with one
// request at a time waits behind at most about one round of a flooding
// tenant, not behind its whole queue (FIFO would put it behind all 16).
func TestFloodOfSmallRequestsDoesNotDelayAnotherTenant(t *testing.T) {
	l := newLane(t, LaneConfig{Slots: 1, Quantum: 100})
	ctx := ctxWithin(t, 20*time.Second)
	var seq atomic.Int64 // flood grants so far
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, err := l.Acquire(ctx, "flood", 1)
				if err != nil {
					return
				}
				seq.Add(1)
				time.Sleep(50 * time.Microsecond)
				g.Done(100)
			}
		}()
	}
	// Let the flood build its queue.
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Waiting < 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	worst := int64(0)
	for range 50 {
		before := seq.Load()
		g, err := l.Acquire(ctx, "quiet", 1)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, seq.Load()-before)
		g.Done(100)
	}
	close(stop)
	wg.Wait()
	if worst > 3 {
		t.Errorf("the quiet tenant waited behind %d flood grants at worst, want ≤ 3", worst)
	}
}

func TestPerTenantBound(t *testing.T) {
	l := newLane(t, LaneConfig{Slots: 4, PerTenant: 2, Quantum: 1})
	ctx := ctxWithin(t, 5*time.Second)
	a1, _ := l.Acquire(ctx, "a", 1)
	a2, _ := l.Acquire(ctx, "a", 1)
	got := make(chan Grant, 1)
	go func() {
		g, err := l.Acquire(ctx, "a", 1)
		if err == nil {
			got <- g
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Waiting != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// b passes a's waiter: slots are free and b is under its bound.
	b1, err := l.Acquire(ctxWithin(t, time.Second), "b", 1)
	if err != nil {
		t.Fatalf("b waited behind a tenant at its bound: %v", err)
	}
	select {
	case <-got:
		t.Fatal("a got a third grant with PerTenant 2")
	case <-time.After(20 * time.Millisecond):
	}
	a1.Done(1)
	select {
	case g := <-got:
		g.Done(1)
	case <-time.After(5 * time.Second):
		t.Fatal("a's waiter was not granted when its grant returned")
	}
	a2.Done(1)
	b1.Done(1)
	if s := l.Stats(); s != (Stats{}) {
		t.Errorf("after all Done: %+v", s)
	}
}

func TestCancelledWaiterLeavesNoTrace(t *testing.T) {
	l := newLane(t, LaneConfig{Slots: 1, Quantum: 1})
	g, _ := l.Acquire(ctxWithin(t, 5*time.Second), "a", 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := l.Acquire(ctx, "b", 1)
		errc <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Waiting != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a cancelled Acquire succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled Acquire did not return")
	}
	g.Done(1)
	if s := l.Stats(); s != (Stats{}) {
		t.Errorf("after cancel and Done: %+v, want empty", s)
	}
}

// TestRandomLoadsNeverStall: random tenants, weights, bounds, costs and
// cancellations; every Acquire that is not cancelled completes and the
// bounds hold throughout.
func TestRandomLoadsNeverStall(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		slots := 1 + r.IntN(4)
		per := r.IntN(3)
		l := newLane(t, LaneConfig{Slots: slots, PerTenant: per, Quantum: float64(1 + r.IntN(1000))})
		ctx := ctxWithin(t, 20*time.Second)
		var running sync.Map // tenant -> *atomic.Int32
		var busy atomic.Int32
		var wg sync.WaitGroup
		var bad atomic.Value
		for w := range 12 {
			tenant := string(rune('a' + w%5))
			weight := float64(1 + w%3)
			cost := float64(r.IntN(5000))
			cancelSome := w%4 == 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, _ := running.LoadOrStore(tenant, new(atomic.Int32))
				n := c.(*atomic.Int32)
				for i := range 200 {
					actx := ctx
					var cancel context.CancelFunc = func() {}
					if cancelSome && i%3 == 0 {
						actx, cancel = context.WithTimeout(ctx, 50*time.Microsecond)
					}
					g, err := l.Acquire(actx, tenant, weight)
					cancel()
					if err != nil {
						if ctx.Err() != nil {
							bad.Store("an Acquire ran out of the test's time")
							return
						}
						continue
					}
					if b := busy.Add(1); int(b) > slots {
						bad.Store("more grants than slots")
					}
					if k := n.Add(1); per > 0 && int(k) > per {
						bad.Store("more grants than PerTenant")
					}
					n.Add(-1)
					busy.Add(-1)
					g.Done(cost)
				}
			}()
		}
		wg.Wait()
		if v := bad.Load(); v != nil {
			t.Fatalf("seed %d: %v", seed, v)
		}
		if s := l.Stats(); s != (Stats{}) {
			t.Fatalf("seed %d: lane not empty at the end: %+v", seed, s)
		}
	}
}
