package fair

// This file owns Set, the broker's lanes and the weights they share by.
//
// Invariant: a nil *Set schedules nothing: Run calls its function at once,
// Gate admits at once, so a broker built without one behaves as before. A
// Set missing a lane (the zero Set has none) schedules nothing in that lane
// the same way: what the overhead benchmark compares against.

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

// Lane names, as metrics label them.
const (
	LaneHandler  = "handler"
	LaneTail     = "tail"
	LaneBackfill = "backfill"
)

// SetConfig configures a Set; zero fields take the defaults.
type SetConfig struct {
	// HandlerSlots and TailSlots default to GOMAXPROCS × 2: enough to keep
	// the cores busy, few enough that a backlog forms where DRR orders it.
	HandlerSlots, TailSlots int
	// BackfillSlots is the object-store GETs in flight for readers
	// (default 16); BackfillPerTenant bounds one tenant's (default half).
	BackfillSlots, BackfillPerTenant int
	// Weight is a tenant's weight (default: 1 for everyone).
	Weight func(tenant string) float64
	// Waited is told every queued grant's delay (metrics), if set.
	Waited func(lane, tenant string, d time.Duration)
	Now    func() time.Time
}

// Set is the broker's lanes.
type Set struct {
	Handler  *Lane // handler time of produce requests and fetch passes, in ns
	Tail     *Lane // bytes a fetch pass reads from the local log
	Backfill *Lane // bytes GET from object storage for readers
	weightFn atomic.Pointer[func(string) float64]
}

// SetWeight replaces the source of tenants' weights (the quota table's
// scheduling attributes, once it is watched); safe while lanes run.
func (s *Set) SetWeight(fn func(tenant string) float64) {
	if s != nil && fn != nil {
		s.weightFn.Store(&fn)
	}
}

func (s *Set) weight(tenant string) float64 { return (*s.weightFn.Load())(tenant) }

// NewSet builds the lanes.
func NewSet(cfg SetConfig) (*Set, error) {
	procs := runtime.GOMAXPROCS(0)
	if cfg.HandlerSlots <= 0 {
		cfg.HandlerSlots = 2 * procs
	}
	if cfg.TailSlots <= 0 {
		cfg.TailSlots = 2 * procs
	}
	if cfg.BackfillSlots <= 0 {
		cfg.BackfillSlots = 16
	}
	if cfg.BackfillPerTenant <= 0 {
		cfg.BackfillPerTenant = max(1, cfg.BackfillSlots/2)
	}
	if cfg.Weight == nil {
		cfg.Weight = func(string) float64 { return 1 }
	}
	lane := func(name string, slots, per int, quantum float64) (*Lane, error) {
		lc := LaneConfig{Name: name, Slots: slots, PerTenant: per, Quantum: quantum, Now: cfg.Now}
		if cfg.Waited != nil {
			lc.Waited = func(tenant string, d time.Duration) { cfg.Waited(name, tenant, d) }
		}
		return NewLane(lc)
	}
	s := &Set{}
	s.SetWeight(cfg.Weight)
	var err error
	// Quanta near a typical grant: 100 µs of handler time, 64 KiB of a
	// fetch pass, one 1 MiB chunk of an object.
	if s.Handler, err = lane(LaneHandler, cfg.HandlerSlots, 0, float64(100*time.Microsecond)); err != nil {
		return nil, err
	}
	if s.Tail, err = lane(LaneTail, cfg.TailSlots, 0, 64<<10); err != nil {
		return nil, err
	}
	if s.Backfill, err = lane(LaneBackfill, cfg.BackfillSlots, cfg.BackfillPerTenant, 1<<20); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs fn holding a slot of lane for tenant and charges what fn
// returns (the lane's unit). It returns ctx's error, without running fn,
// if ctx ends while it waits.
func (s *Set) Run(ctx context.Context, lane *Lane, tenant string, fn func() float64) error {
	if s == nil || lane == nil {
		fn()
		return nil
	}
	g, err := lane.Acquire(ctx, tenant, s.weight(tenant))
	if err != nil {
		return err
	}
	cost := 0.0
	defer func() { g.Done(cost) }()
	cost = fn()
	return nil
}

// RunTimed is Run for the handler lane: fn is charged its wall time. A
// grant that did not queue is not charged, so it is not timed either
// (reading the clock costs ~400 ns on some virtual machines).
func (s *Set) RunTimed(ctx context.Context, tenant string, fn func()) error {
	if s == nil || s.Handler == nil {
		fn()
		return nil
	}
	g, err := s.Handler.Acquire(ctx, tenant, s.weight(tenant))
	if err != nil {
		return err
	}
	if !g.Charged() {
		defer g.Done(0)
		fn()
		return nil
	}
	start := time.Now()
	defer func() { g.Done(float64(time.Since(start))) }()
	fn()
	return nil
}

// Gate takes a backfill slot for tenant and returns the function that
// gives it back, charged the bytes read.
func (s *Set) Gate(ctx context.Context, tenant string) (func(bytes int), error) {
	if s == nil || s.Backfill == nil {
		return func(int) {}, nil
	}
	g, err := s.Backfill.Acquire(ctx, tenant, s.weight(tenant))
	if err != nil {
		return nil, err
	}
	return func(n int) { g.Done(float64(n)) }, nil
}
