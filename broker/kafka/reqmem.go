package kafka

// This file owns the broker-wide budget of request memory (Kafka's
// queued.max.request.bytes) and the reading of request frames against it.
//
// Design. Kafka reserves a frame's announced size from its pool as soon as
// the four size bytes arrive, so one client that announces 100 MiB and sends
// nothing holds the whole default pool and the broker stops reading every
// socket. Here a frame reserves memory as its bytes arrive instead: the
// buffer starts at frameChunk (or the frame size, if smaller) and doubles,
// and each growth is reserved before it is allocated and only once the next
// byte is waiting. A frame therefore holds at most twice what it has sent
// (and at least frameChunk), and a client that announces 100 MiB and stalls
// costs 64 KiB. Stalled partial frames are closed by the idle timeout
// (connlimit.go), which returns their memory.
//
// Growing while holding is hold-and-wait: frames that each hold part of the
// pool and wait for more could wait forever. One overdraft breaks the cycle:
// the first waiter that does not fit may take the overdraft, if no frame
// holds it and the pool is not already over capacity, and then grows without
// waiting until its frame is read. So some frame always completes, and
//
// Invariant: reserved bytes ≤ capacity + one frame (≤ MaxRequestBytes).
// Invariant: waiters are served in arrival order; none is passed over.
// Invariant: a frame's bytes stay reserved until its reply is written (or,
// without a reply, until the request is dropped), because produce batches
// are referenced, and stamped in place, until they are appended.
//
// requestMemory's state is guarded by its mu. A reservation belongs to the
// connection goroutine reading the frame, then to its writer.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// frameChunk is the first allocation of a frame larger than it.
const frameChunk = 64 << 10

// requestMemory is a budget of bytes shared by every connection.
type requestMemory struct {
	capacity int64
	gauge    prometheus.Gauge // the reserved bytes, exported; may be nil

	mu        sync.Mutex
	used      int64        // guarded by mu
	overdraft bool         // guarded by mu: a frame is being read past capacity
	waiters   []*memWaiter // guarded by mu; in arrival order
}

type memWaiter struct {
	n     int64
	ready chan bool // receives once: whether the grant took the overdraft
}

// reservation is what one frame holds.
type reservation struct {
	held      int64
	overdraft bool // this frame holds the overdraft until it is read
}

func newRequestMemory(capacity int64, gauge prometheus.Gauge) *requestMemory {
	return &requestMemory{capacity: capacity, gauge: gauge}
}

func (m *requestMemory) addLocked(n int64) {
	m.used += n
	if m.gauge != nil {
		m.gauge.Set(float64(m.used))
	}
}

// reserved reports the bytes reserved now.
func (m *requestMemory) reserved() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// grow reserves n more bytes for r, waiting (until ctx ends) if the budget is
// spent.
func (m *requestMemory) grow(ctx context.Context, r *reservation, n int64) error {
	m.mu.Lock()
	if r.overdraft {
		m.addLocked(n)
		m.mu.Unlock()
		r.held += n
		return nil
	}
	if len(m.waiters) == 0 {
		if ok, od := m.grantLocked(n); ok {
			m.mu.Unlock()
			r.held += n
			r.overdraft = od
			return nil
		}
	}
	w := &memWaiter{n: n, ready: make(chan bool, 1)}
	m.waiters = append(m.waiters, w)
	m.mu.Unlock()

	select {
	case od := <-w.ready:
		r.held += n
		r.overdraft = od
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.waiters {
		if x == w {
			m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
			m.wakeLocked()
			return fmt.Errorf("wait for request memory: %w", ctx.Err())
		}
	}
	// Granted while ctx ended: keep the grant so the caller's release
	// returns it.
	r.held += n
	r.overdraft = <-w.ready
	return fmt.Errorf("wait for request memory: %w", ctx.Err())
}

// grantLocked takes n bytes if they fit, or the overdraft if it is free.
func (m *requestMemory) grantLocked(n int64) (ok, overdraft bool) {
	switch {
	case m.used+n <= m.capacity:
		m.addLocked(n)
		return true, false
	case !m.overdraft && m.used <= m.capacity:
		m.overdraft = true
		m.addLocked(n)
		return true, true
	}
	return false, false
}

// wakeLocked grants waiters in order until one does not fit.
func (m *requestMemory) wakeLocked() {
	for len(m.waiters) > 0 {
		w := m.waiters[0]
		ok, od := m.grantLocked(w.n)
		if !ok {
			return
		}
		m.waiters = m.waiters[1:]
		w.ready <- od
	}
}

// read ends r's overdraft, if it holds it: its frame is complete. Its bytes
// stay reserved.
func (m *requestMemory) read(r *reservation) {
	if !r.overdraft {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r.overdraft = false
	m.overdraft = false
	m.wakeLocked()
}

// release returns everything r holds.
func (m *requestMemory) release(r *reservation) {
	if r.held == 0 && !r.overdraft {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addLocked(-r.held)
	if r.overdraft {
		m.overdraft = false
	}
	*r = reservation{}
	m.wakeLocked()
}

// readFrame reads one size-prefixed request, reserving its bytes as they
// arrive. On success the caller owns the reservation and releases it once
// the request is done with; on error nothing stays reserved.
func (m *requestMemory) readFrame(ctx context.Context, br *bufio.Reader, max int32) ([]byte, reservation, error) {
	var size [4]byte
	if _, err := io.ReadFull(br, size[:]); err != nil {
		return nil, reservation{}, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > max {
		return nil, reservation{}, fmt.Errorf("%w: request size %d outside [8, %d]", errFrame, n, max)
	}
	if int64(n) > m.capacity {
		return nil, reservation{}, fmt.Errorf("%w: request size %d exceeds the request memory of %d bytes (queued max request bytes)",
			errFrame, n, m.capacity)
	}
	var r reservation
	frame, err := m.readBody(ctx, br, int(n), &r)
	if err != nil {
		m.release(&r)
		return nil, reservation{}, err
	}
	m.read(&r)
	return frame, r, nil
}

// readBody reads n bytes into a buffer that doubles as they arrive,
// reserving each growth in r before allocating it.
func (m *requestMemory) readBody(ctx context.Context, br *bufio.Reader, n int, r *reservation) ([]byte, error) {
	size := min(n, frameChunk)
	if err := m.grow(ctx, r, int64(size)); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	got := 0
	for {
		k, err := io.ReadFull(br, buf[got:])
		got += k
		if err == nil && got < n {
			// Reserve the next growth only once a byte of it is here.
			_, err = br.Peek(1)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: truncated request (%d of %d bytes): %w", errFrame, got, n, err)
		}
		if got == n {
			return buf, nil
		}
		next := min(n, 2*len(buf))
		if err := m.grow(ctx, r, int64(next-len(buf))); err != nil {
			return nil, err
		}
		grown := make([]byte, next)
		copy(grown, buf)
		buf = grown
	}
}
