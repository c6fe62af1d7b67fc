package frames

// This file owns the reading of request frames: each frame's bytes are
// reserved in the request memory (memory.go) as they arrive, charged to the
// connection's share, and a frame that stops making progress closes its
// connection (Kafka's slow-loris defence, a minimum receive rate).
//
// Minimum receive rate. While a frame is partly read and the reader is
// waiting on the socket for the rest, the connection must deliver the
// broker's minimum receive rate (node.Config.MinReceiveRate) in bytes per
// second, measured over windows of MinReceiveWindow; a window that ends
// with fewer bytes (and the frame still incomplete) calls the reader's
// onSlow, which closes the connection and so returns the frame's memory.
// Time spent waiting for request memory does not count: then it is the
// broker that is not reading. A connection between frames is left to the
// idle timeout of package netconn, which keeps Kafka's connections.max.idle.ms
// semantics.
//
// Invariant: a frame's bytes are reserved before its buffer grows to hold
// them, and only once at least one of them has arrived; so a frame holds at
// most twice what it has sent, and at least frameChunk.
// Invariant: onSlow runs only while a frame is incomplete and the reader
// waits on the socket, at most once per reader, and before the read that
// it ends returns ErrSlowReceive (so the caller can count the close in
// onSlow before anyone sees it).
//
// A Reader belongs to its connection's reader goroutine; its recvMeter's
// state is guarded by the meter's mu, as its timer fires on another
// goroutine.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// frameChunk is the first allocation of a frame larger than it.
const frameChunk = 64 << 10

// ErrFrame marks a frame that is malformed or too large: the connection
// cannot be read further.
var ErrFrame = errors.New("bad frame")

// ErrSlowReceive ends a connection whose partial frame arrived below the
// minimum receive rate.
var ErrSlowReceive = errors.New("request below the minimum receive rate")

// Reader reads one connection's request frames.
type Reader struct {
	mem   *Memory
	br    *bufio.Reader
	max   int32
	meter *recvMeter // nil: no minimum receive rate
}

// NewReader reads request frames of at most maxBytes from src, reserving
// them in mem. With minRate > 0 a frame must arrive at minRate bytes per
// second over windows of window, and onSlow is called (once) when one does
// not; it should close the connection under src.
func NewReader(src io.Reader, mem *Memory, maxBytes int32, minRate int64, window time.Duration, onSlow func()) *Reader {
	f := &Reader{mem: mem, max: maxBytes}
	if minRate > 0 {
		f.meter = newRecvMeter(minRate, window, time.Now, onSlow)
		src = &countingReader{r: src, n: &f.meter.bytes}
	}
	f.br = bufio.NewReaderSize(src, 64<<10)
	return f
}

// Close stops the meter's timer.
func (f *Reader) Close() {
	if f.meter != nil {
		f.meter.stop()
	}
}

// Next reads one size-prefixed request charged to share, reserving its
// bytes as they arrive. On success the caller owns the reservation and
// releases it once the request is done with; on error nothing stays
// reserved.
func (f *Reader) Next(ctx context.Context, share string) ([]byte, Reservation, error) {
	var size [4]byte
	if _, err := io.ReadFull(f.br, size[:]); err != nil {
		return nil, Reservation{}, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > f.max {
		return nil, Reservation{}, fmt.Errorf("%w: request size %d outside [8, %d]", ErrFrame, n, f.max)
	}
	if int64(n) > f.mem.capacity {
		return nil, Reservation{}, fmt.Errorf("%w: request size %d exceeds the request memory of %d bytes (queued max request bytes)",
			ErrFrame, n, f.mem.capacity)
	}
	if f.meter != nil && f.br.Buffered() < int(n) {
		f.meter.start()
		defer f.meter.end()
	}
	r := Reservation{share: share}
	frame, err := f.readBody(ctx, int(n), &r)
	if err != nil {
		f.mem.Release(&r)
		if f.meter != nil && f.meter.wasSlow() {
			err = fmt.Errorf("%w (%d bytes/s over %v): %w", ErrSlowReceive, f.meter.rate, f.meter.window, err)
		}
		return nil, Reservation{}, err
	}
	f.mem.read(&r)
	return frame, r, nil
}

// readBody reads n bytes into a buffer that doubles as they arrive,
// reserving each growth in r before allocating it.
func (f *Reader) readBody(ctx context.Context, n int, r *Reservation) ([]byte, error) {
	size := min(n, frameChunk)
	if err := f.grow(ctx, r, int64(size)); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	got := 0
	for {
		k, err := io.ReadFull(f.br, buf[got:])
		got += k
		if err == nil && got < n {
			// Reserve the next growth only once a byte of it is here.
			_, err = f.br.Peek(1)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: truncated request (%d of %d bytes): %w", ErrFrame, got, n, err)
		}
		if got == n {
			return buf, nil
		}
		next := min(n, 2*len(buf))
		if err := f.grow(ctx, r, int64(next-len(buf))); err != nil {
			return nil, err
		}
		grown := make([]byte, next)
		copy(grown, buf)
		buf = grown
	}
}

// grow reserves n more bytes for r; the receive rate is not measured while
// it waits.
func (f *Reader) grow(ctx context.Context, r *Reservation, n int64) error {
	w := f.mem.tryGrow(r, n)
	if w == nil {
		return nil
	}
	if f.meter != nil {
		f.meter.pause()
		defer f.meter.resume()
	}
	return f.mem.await(ctx, r, w)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// recvMeter measures a connection's receive rate while a frame is
// incomplete and the reader waits on the socket ("running"), in windows of
// running time, and calls onSlow once when a window ends short.
type recvMeter struct {
	rate   int64 // bytes per second
	window time.Duration
	now    func() time.Time
	onSlow func()
	bytes  atomic.Int64 // bytes read from the connection so far

	mu      sync.Mutex
	running bool          // guarded by mu
	spent   time.Duration // guarded by mu: running time of this window before since
	since   time.Time     // guarded by mu: when running last began
	base    int64         // guarded by mu: bytes when this window began
	slow    bool          // guarded by mu: onSlow was called
	timer   *time.Timer   // guarded by mu; nil until the first frame that waits
}

func newRecvMeter(rate int64, window time.Duration, now func() time.Time, onSlow func()) *recvMeter {
	return &recvMeter{rate: rate, window: window, now: now, onSlow: onSlow}
}

// start begins a frame's first window.
func (m *recvMeter) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent, m.base = 0, m.bytes.Load()
	m.runLocked()
}

// runLocked starts the clock and arms the timer for the window's end.
func (m *recvMeter) runLocked() {
	m.running, m.since = true, m.now()
	left := m.window - m.spent
	if m.timer == nil {
		m.timer = time.AfterFunc(left, m.fire)
		return
	}
	m.timer.Reset(left)
}

// pause stops the clock (the reader waits for request memory).
func (m *recvMeter) pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		return
	}
	m.spent += m.now().Sub(m.since)
	m.running = false
	m.timer.Stop()
}

// resume restarts the clock after pause.
func (m *recvMeter) resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running && !m.slow {
		m.runLocked()
	}
}

// end stops measuring: the frame is read (or failed).
func (m *recvMeter) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = false
	if m.timer != nil {
		m.timer.Stop()
	}
}

// stop is end for a connection that closes.
func (m *recvMeter) stop() { m.end() }

func (m *recvMeter) wasSlow() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slow
}

// fire is the timer: it checks the window and either calls onSlow or arms
// the timer again.
func (m *recvMeter) fire() {
	m.mu.Lock()
	if !m.running || m.slow {
		m.mu.Unlock()
		return
	}
	slow, next := m.checkLocked(m.now())
	if !slow {
		m.timer.Reset(next)
		m.mu.Unlock()
		return
	}
	m.slow, m.running = true, false
	m.mu.Unlock()
	m.onSlow()
}

// checkLocked is the pure rule: at now, is the running window over with
// fewer than rate × window bytes? If it is over with enough, a new window
// begins. next is the running time left in the window.
func (m *recvMeter) checkLocked(now time.Time) (slow bool, next time.Duration) {
	elapsed := m.spent + now.Sub(m.since)
	if elapsed < m.window {
		return false, m.window - elapsed
	}
	if got := m.bytes.Load() - m.base; float64(got) < float64(m.rate)*m.window.Seconds() {
		return true, 0
	}
	m.spent, m.since, m.base = 0, now, m.bytes.Load()
	return false, m.window
}
