package fair

// This file owns Lane, one DRR-scheduled resource.
//
// Invariant: busy ≤ slots, and a tenant holds at most PerTenant grants when
// PerTenant > 0.
// Invariant: a slot is never left free while a waiter that may take it
// (its tenant under PerTenant) waits: every change that frees a slot or adds
// a waiter runs dispatchLocked before it unlocks.
// Invariant: each tenant's waiters are granted in their arrival order.
// Invariant: an idle tenant (no waiters, no grants) has a deficit of 0: its
// debt or credit is forgotten (DRR banks nothing across idle periods).
//
// All state is guarded by mu; waiters block on their own channel, never
// holding mu.

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// LaneConfig is a lane's fixed configuration.
type LaneConfig struct {
	Name  string
	Slots int // concurrent grants; at least 1
	// PerTenant bounds one tenant's concurrent grants (0: only Slots).
	PerTenant int
	// Quantum is the cost a tenant of weight 1 is credited per round.
	// Pick it near a typical grant's cost: smaller is fairer over short
	// spans, larger takes fewer rounds.
	Quantum float64
	// Now is the clock of queue delays (default time.Now).
	Now func() time.Time
	// Waited, if set, is told every queued grant's delay, outside the lock.
	Waited func(tenant string, d time.Duration)
}

// Lane is one resource with Slots concurrent grants, shared by tenants in
// proportion to their weights while it is contended.
type Lane struct {
	cfg LaneConfig

	mu      sync.Mutex
	busy    int              // guarded by mu: grants held
	waiting int              // guarded by mu: waiters in all queues
	flows   map[string]*flow // guarded by mu: tenants with waiters or grants
	ring    []*flow          // guarded by mu: flows with waiters, in round-robin order
	next    int              // guarded by mu: the ring position visited next
}

type flow struct {
	tenant  string
	weight  float64
	deficit float64
	visited bool    // this visit's quantum was credited
	avgCost float64 // estimate of a grant's cost, charged at grant
	running int
	queue   []*waiter
	inRing  bool
}

type waiter struct {
	ready   chan struct{}
	since   time.Time
	granted bool
	est     float64
}

// Grant is one slot held; Done returns it. The zero Grant holds nothing.
type Grant struct {
	l      *Lane
	f      *flow
	est    float64 // the cost charged at grant (0: granted uncontended)
	Waited time.Duration
	done   bool
}

// errBadSlots refuses a lane that could grant nothing.
var errBadSlots = errors.New("fair: a lane needs at least one slot")

// NewLane returns a lane.
func NewLane(cfg LaneConfig) (*Lane, error) {
	if cfg.Slots < 1 {
		return nil, errBadSlots
	}
	if cfg.Quantum <= 0 {
		cfg.Quantum = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Lane{cfg: cfg, flows: make(map[string]*flow)}, nil
}

// Name is the lane's name.
func (l *Lane) Name() string { return l.cfg.Name }

func (l *Lane) flowLocked(tenant string, weight float64) *flow {
	if !(weight > 0) || math.IsInf(weight, 0) {
		weight = 1
	}
	f := l.flows[tenant]
	if f == nil {
		f = &flow{tenant: tenant, avgCost: l.cfg.Quantum}
		l.flows[tenant] = f
	}
	f.weight = weight
	return f
}

func (l *Lane) mayRun(f *flow) bool {
	return l.cfg.PerTenant <= 0 || f.running < l.cfg.PerTenant
}

// Acquire waits for a slot for tenant (of weight, > 0; anything else counts
// as 1) and returns it; the caller must call Done on it. It fails only
// when ctx ends first.
func (l *Lane) Acquire(ctx context.Context, tenant string, weight float64) (Grant, error) {
	l.mu.Lock()
	f := l.flowLocked(tenant, weight)
	if l.waiting == 0 && l.busy < l.cfg.Slots && l.mayRun(f) {
		// Uncontended: granted at once and not charged.
		l.busy++
		f.running++
		l.mu.Unlock()
		return Grant{l: l, f: f}, nil
	}
	w := &waiter{ready: make(chan struct{}), since: l.cfg.Now()}
	f.queue = append(f.queue, w)
	l.waiting++
	if !f.inRing {
		f.inRing = true
		l.ring = append(l.ring, f)
	}
	l.dispatchLocked()
	l.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		l.mu.Lock()
		if !w.granted {
			l.removeWaiterLocked(f, w)
			l.dropIfIdleLocked(f)
			l.mu.Unlock()
			return Grant{}, ctx.Err()
		}
		l.mu.Unlock()
		// Granted as ctx ended: keep the grant; the caller returns it.
	}
	g := Grant{l: l, f: f, est: w.est, Waited: l.cfg.Now().Sub(w.since)}
	if l.cfg.Waited != nil {
		l.cfg.Waited(tenant, g.Waited)
	}
	return g, nil
}

// Charged reports whether the grant queued, and so is charged its cost; an
// uncontended grant is not, and Done ignores its cost.
func (g *Grant) Charged() bool { return g.est > 0 }

// Done returns the grant's slot and charges its tenant cost (bytes, or
// nanoseconds: the lane's unit). Calling it twice is a no-op.
func (g *Grant) Done(cost float64) {
	if g == nil || g.l == nil || g.done {
		return
	}
	g.done = true
	l, f := g.l, g.f
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy--
	f.running--
	if cost < 0 || math.IsNaN(cost) {
		cost = 0
	}
	if g.est > 0 {
		// Charged at grant with the estimate: correct it.
		f.deficit -= cost - g.est
	}
	f.avgCost = 0.8*f.avgCost + 0.2*max(cost, 1)
	l.dropIfIdleLocked(f)
	l.dispatchLocked()
}

func (l *Lane) removeWaiterLocked(f *flow, w *waiter) {
	for i, q := range f.queue {
		if q == w {
			f.queue = append(f.queue[:i], f.queue[i+1:]...)
			l.waiting--
			break
		}
	}
	if len(f.queue) == 0 {
		l.leaveRingLocked(f)
	}
}

func (l *Lane) leaveRingLocked(f *flow) {
	if !f.inRing {
		return
	}
	for i, r := range l.ring {
		if r == f {
			l.ring = append(l.ring[:i], l.ring[i+1:]...)
			if i < l.next {
				l.next--
			}
			break
		}
	}
	if l.next >= len(l.ring) {
		l.next = 0
	}
	f.inRing = false
	f.visited = false
}

// maxIdleFlows is how many idle tenants' flows a lane keeps for reuse (an
// idle flow costs ~100 bytes; reusing it saves an allocation per request).
const maxIdleFlows = 256

func (l *Lane) dropIfIdleLocked(f *flow) {
	if f.running != 0 || len(f.queue) != 0 {
		return
	}
	// Idle: DRR forgets its debt or credit.
	f.deficit, f.visited = 0, false
	if len(l.flows) > maxIdleFlows && l.flows[f.tenant] == f {
		delete(l.flows, f.tenant)
	}
}

// dispatchLocked grants free slots to waiters in DRR order.
func (l *Lane) dispatchLocked() {
	idle := 0 // flows visited in a row without a grant
	for l.busy < l.cfg.Slots && len(l.ring) > 0 {
		if idle >= len(l.ring) {
			// A whole round without a grant: every flow is in debt or at
			// its PerTenant bound. Credit the rounds needed at once
			// instead of spinning through them.
			if !l.fastForwardLocked() {
				return // every waiting flow is at its PerTenant bound
			}
			idle = 0
		}
		f := l.ring[l.next]
		if !l.mayRun(f) {
			f.visited = false
			l.advanceLocked()
			idle++
			continue
		}
		if !f.visited {
			f.deficit += l.cfg.Quantum * f.weight
			f.visited = true
		}
		if f.deficit <= 0 {
			f.visited = false
			l.advanceLocked()
			idle++
			continue
		}
		w := f.queue[0]
		f.queue = f.queue[1:]
		l.waiting--
		w.est = f.avgCost
		f.deficit -= w.est
		w.granted = true
		l.busy++
		f.running++
		close(w.ready)
		idle = 0
		if len(f.queue) == 0 {
			l.leaveRingLocked(f)
		}
	}
}

func (l *Lane) advanceLocked() {
	l.next++
	if l.next >= len(l.ring) {
		l.next = 0
	}
}

// fastForwardLocked credits every runnable flow of the ring the rounds
// the least indebted of them needs to reach a positive deficit. It reports
// false when no flow may run.
func (l *Lane) fastForwardLocked() bool {
	rounds := math.Inf(1)
	for _, f := range l.ring {
		if l.mayRun(f) {
			need := math.Floor(-f.deficit/(l.cfg.Quantum*f.weight)) + 1
			rounds = min(rounds, max(need-1, 0))
		}
	}
	if math.IsInf(rounds, 1) {
		return false
	}
	for _, f := range l.ring {
		if l.mayRun(f) {
			f.deficit += rounds * l.cfg.Quantum * f.weight
		}
		f.visited = false
	}
	return true
}

// Stats is a lane's state for metrics and tests: grants held, waiters,
// and tenants with either.
type Stats struct {
	Busy, Waiting, Tenants int
}

// Queued reports how many of tenant's requests wait in the lane now.
func (l *Lane) Queued(tenant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.flows[tenant]; f != nil {
		return len(f.queue)
	}
	return 0
}

// Stats returns the lane's state now.
func (l *Lane) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	active := 0
	for _, f := range l.flows {
		if f.running > 0 || len(f.queue) > 0 {
			active++
		}
	}
	return Stats{Busy: l.busy, Waiting: l.waiting, Tenants: active}
}
