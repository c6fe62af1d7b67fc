package frames

// This file owns the broker's request memory (Kafka's
// queued.max.request.bytes) and how it is shared between tenants. The
// reading of frames against it is in reader.go.
//
// Reservation. Kafka reserves a frame's announced size from its pool as soon
// as the four size bytes arrive, so one client that announces 100 MiB and
// sends nothing holds the whole default pool. Here a frame reserves memory
// as its bytes arrive (reader.go): its buffer doubles, and each growth
// is reserved before it is allocated and only once the next byte is
// waiting. A frame therefore holds at most twice what it has sent.
//
// Shares. Every reservation is charged to a share: the tenant of the
// connection's principal, one share for connections that have not yet
// authenticated (before SASL completes, or after a SASL session expired),
// and one for the inter-broker listener (the caller names the share of
// each frame: package kafka's memShare). A share is active while
// it holds memory or waits for it; each active share is guaranteed an equal
// part of the capacity, capacity / active shares. A share may borrow memory
// that the others leave idle, but memory that comes free goes first to the
// waiters of shares that are under their guaranteed part (within a share,
// waiters are served in arrival order; across shares, the oldest grantable
// head first). So one tenant that floods the broker with half-sent frames
// borrows the capacity only until the others want their part, and a tenant
// that is waiting never holds back a frame of another share: a grant looks
// only at its own share's queue, at the free memory, and (when it would
// borrow) at whether an under-share waiter of another share comes first.
//
// Hold and wait. Growing while holding is hold-and-wait: the frames of one
// share that each hold part of the memory and wait for more could wait for
// each other forever, and memory borrowed by a share whose frames all wait
// would never come back. Each share therefore has one overdraft: a frame of
// the share that does not fit takes the share's overdraft if no frame of
// the share holds it, and then grows without waiting until its frame is
// read. The share's overdraft is free again when that frame's memory is
// released (after its reply is written). So, per share:
//
//   - a share with waiters always has a frame that is not waiting for memory
//     (the holder of its overdraft, or else its head takes the overdraft at
//     once): no set of shares deadlocks; each share completes its frames one
//     at a time at worst, whatever the other shares do;
//   - a share's borrowed memory comes back as its frames complete, and what
//     comes free goes first to a share under its guaranteed part.
//
// The cost is that a share waiting behind borrowers reads past the capacity
// by one frame. The shares are tenants the operator created, plus the
// unauthenticated share and the inter-broker one, so a client without
// credentials adds at most one frame. A frame that stalls while it holds an
// overdraft keeps it only until the minimum receive rate closes its
// connection (reader.go).
//
// Invariant: bytes granted without an overdraft keep the reserved total
// within the capacity; reserved ≤ capacity + one frame (≤ MaxRequestBytes)
// per share that holds its overdraft.
// Invariant: within a share waiters are served in arrival order.
// Invariant: a waiting head whose bytes fit in the free memory and in its
// share's guaranteed part is never left waiting once wake has run.
// Invariant: every share with waiters has its overdraft held by a frame
// that does not wait: it grows without waiting until it is read, and then
// waits only for its reply.
// Invariant: a frame's bytes stay reserved until its reply is written (or,
// without a reply, until the request is dropped), because produce batches
// are referenced, and stamped in place, until they are appended.
//
// Memory's state is guarded by its mu. A reservation belongs to the
// connection goroutine reading the frame, then to its writer.

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Memory is a budget of bytes shared by every connection.
type Memory struct {
	capacity int64
	gauge    prometheus.Gauge // the reserved bytes, exported; may be nil

	mu     sync.Mutex
	used   int64                 // guarded by mu
	shares map[string]*memShareQ // guarded by mu; only active shares
	seq    uint64                // guarded by mu; numbers waiters in arrival order
}

// memShareQ is one active share's state.
type memShareQ struct {
	used      int64        // bytes its reservations hold
	overdraft bool         // a reservation of the share holds its overdraft, until released
	waiters   []*memWaiter // in arrival order
}

type memWaiter struct {
	n     int64
	seq   uint64
	ready chan bool // receives once: whether the grant took the overdraft
}

// Reservation is what one frame holds.
type Reservation struct {
	share     string // charged to this share
	held      int64
	overdraft bool // growing without waiting until its frame is read
	ownsOD    bool // holds its share's overdraft until released
}

// NewMemory is a request memory of capacity bytes; gauge, if not nil,
// exports the bytes reserved.
func NewMemory(capacity int64, gauge prometheus.Gauge) *Memory {
	return &Memory{capacity: capacity, gauge: gauge, shares: make(map[string]*memShareQ)}
}

func (m *Memory) addLocked(s *memShareQ, n int64) {
	m.used += n
	s.used += n
	if m.gauge != nil {
		m.gauge.Set(float64(m.used))
	}
}

// Reserved reports the bytes reserved now.
func (m *Memory) Reserved() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// shareLocked returns the active share name, making it active.
func (m *Memory) shareLocked(name string) *memShareQ {
	s := m.shares[name]
	if s == nil {
		s = &memShareQ{}
		m.shares[name] = s
	}
	return s
}

// forgetLocked drops a share that holds and waits for nothing.
func (m *Memory) forgetLocked(name string, s *memShareQ) {
	if s.used == 0 && len(s.waiters) == 0 && !s.overdraft {
		delete(m.shares, name)
	}
}

// guaranteedLocked is what each active share is guaranteed.
func (m *Memory) guaranteedLocked() int64 {
	return m.capacity / int64(max(1, len(m.shares)))
}

// grow reserves n more bytes for r, waiting (until ctx ends) if its share
// cannot have them now.
func (m *Memory) grow(ctx context.Context, r *Reservation, n int64) error {
	if w := m.tryGrow(r, n); w != nil {
		return m.await(ctx, r, w)
	}
	return nil
}

// tryGrow grants r n more bytes if it can, and otherwise queues a waiter
// whose ready channel receives the grant; await collects it.
func (m *Memory) tryGrow(r *Reservation, n int64) *memWaiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.shareLocked(r.share)
	if r.overdraft {
		m.addLocked(s, n)
		r.held += n
		return nil
	}
	if len(s.waiters) == 0 {
		if ok, od := m.canGrantLocked(s, n); ok {
			m.grantLocked(s, n, od)
			r.held += n
			r.overdraft, r.ownsOD = od || r.overdraft, od || r.ownsOD
			return nil
		}
	}
	m.seq++
	w := &memWaiter{n: n, seq: m.seq, ready: make(chan bool, 1)}
	s.waiters = append(s.waiters, w)
	return w
}

// await waits for w's grant, or leaves the queue when ctx ends.
func (m *Memory) await(ctx context.Context, r *Reservation, w *memWaiter) error {
	select {
	case od := <-w.ready:
		m.granted(r, w.n, od)
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	s := m.shares[r.share]
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			m.forgetLocked(r.share, s)
			m.wakeLocked()
			m.mu.Unlock()
			return fmt.Errorf("wait for request memory: %w", ctx.Err())
		}
	}
	m.mu.Unlock()
	// Granted while ctx ended: keep the grant so the caller's release
	// returns it.
	m.granted(r, w.n, <-w.ready)
	return fmt.Errorf("wait for request memory: %w", ctx.Err())
}

func (m *Memory) granted(r *Reservation, n int64, od bool) {
	r.held += n
	r.overdraft, r.ownsOD = od || r.overdraft, od || r.ownsOD
}

// canGrantLocked decides whether s may have n more bytes now, and whether
// by its overdraft: without it when they fit in the free memory and either
// in s's guaranteed part or ahead of no under-share waiter of another share
// (borrowing idle memory); else by the overdraft if s's is free.
func (m *Memory) canGrantLocked(s *memShareQ, n int64) (ok, overdraft bool) {
	if m.used+n <= m.capacity && (s.used+n <= m.guaranteedLocked() || !m.underShareWaitingLocked(s)) {
		return true, false
	}
	if !s.overdraft {
		return true, true
	}
	return false, false
}

// underShareWaitingLocked reports whether a share other than except has a
// head waiter that fits in its guaranteed part.
func (m *Memory) underShareWaitingLocked(except *memShareQ) bool {
	g := m.guaranteedLocked()
	for _, s := range m.shares {
		if s != except && len(s.waiters) > 0 && s.used+s.waiters[0].n <= g {
			return true
		}
	}
	return false
}

func (m *Memory) grantLocked(s *memShareQ, n int64, overdraft bool) {
	m.addLocked(s, n)
	if overdraft {
		s.overdraft = true
	}
}

// wakeLocked grants head waiters, oldest grantable first, until none can
// be granted.
func (m *Memory) wakeLocked() {
	for {
		var best *memShareQ
		var bestOD bool
		for _, s := range m.shares {
			if len(s.waiters) == 0 || (best != nil && s.waiters[0].seq > best.waiters[0].seq) {
				continue
			}
			if ok, od := m.canGrantLocked(s, s.waiters[0].n); ok {
				best, bestOD = s, od
			}
		}
		if best == nil {
			return
		}
		w := best.waiters[0]
		best.waiters = best.waiters[1:]
		m.grantLocked(best, w.n, bestOD)
		w.ready <- bestOD
	}
}

// read ends r's growing without waiting: its frame is complete. Its bytes,
// and its share's overdraft if it holds it, stay reserved until release.
func (m *Memory) read(r *Reservation) { r.overdraft = false }

// Release returns everything r holds.
func (m *Memory) Release(r *Reservation) {
	if r.held == 0 && !r.ownsOD {
		*r = Reservation{share: r.share}
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.shareLocked(r.share)
	m.addLocked(s, -r.held)
	if r.ownsOD {
		s.overdraft = false
	}
	*r = Reservation{share: r.share}
	m.forgetLocked(r.share, s)
	m.wakeLocked()
}
