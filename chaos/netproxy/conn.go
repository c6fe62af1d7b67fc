package netproxy

// This file owns one proxied connection: the pair of sockets, the reader and
// writer of each direction, and how the connection ends. The reader of a
// direction alone reads its source socket and draws from its generator; the
// writer alone writes its destination socket. They share only the bounded
// queue between them, the atomics below and conn.done.
//
// Invariant: no byte is written after a byte of the same direction was lost;
// a direction with lost bytes is cut, never resumed (conn.lost).
// Invariant: chunks are written in the order they were read.

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// chunkSize bounds one read, and so the unit of a drop decision.
	chunkSize = 32 << 10
	// queueLen bounds the chunks in flight per direction: with a delay d, a
	// direction carries at most queueLen*chunkSize bytes per d.
	queueLen = 64
)

type conn struct {
	p     *Proxy
	id    uint64
	socks [2]net.Conn // [idxToUpstream] is the client (the source of that direction), [idxToClient] the upstream

	queues [2]chan chunk // reader → writer of each direction

	done chan struct{} // closed by close
	once sync.Once

	lost     [2]atomic.Bool // a byte of this direction was discarded
	finished atomic.Int32   // directions whose end of stream was passed on
}

// chunk is bytes read from a source, waiting for their time.
type chunk struct {
	data   []byte
	readAt time.Time // monotonic
	jitter float64   // in [-1, 1): the fraction of the jitter in force to add
}

func newConn(p *Proxy, id uint64, client, upstream net.Conn) *conn {
	return &conn{
		p:      p,
		id:     id,
		socks:  [2]net.Conn{idxToUpstream: client, idxToClient: upstream},
		queues: [2]chan chunk{make(chan chunk, queueLen), make(chan chunk, queueLen)},
		done:   make(chan struct{}),
	}
}

// start runs the two directions' pumps.
func (c *conn) start() {
	for dir, q := range c.queues {
		c.p.wg.Add(2)
		go func() {
			defer c.p.wg.Done()
			c.read(dir, q)
		}()
		go func() {
			defer c.p.wg.Done()
			c.write(dir, q)
		}()
	}
}

// close ends the connection once: with a reset when reset is set, else with
// an ordinary close. It reports whether this call closed it.
func (c *conn) close(reset bool) bool { return c.closeAfter(reset, nil) }

// closeAfter is close, running first (when not nil) before the sockets
// close if this call closes them, so counters are up to date by the time a
// peer can see the end.
func (c *conn) closeAfter(reset bool, first func()) bool {
	closed := false
	c.once.Do(func() {
		closed = true
		if first != nil {
			first()
		}
		close(c.done)
		for _, s := range c.socks {
			if reset {
				resetClose(s)
			} else {
				_ = s.Close() // both ends already finished their streams
			}
		}
		c.p.forget(c)
	})
	return closed
}

// read pumps the source of direction dir into q, applying blackholes and
// drops, until end of stream (q is closed) or the connection ends.
func (c *conn) read(dir int, q chan<- chunk) {
	src := c.socks[dir]
	rng := rand.New(rand.NewPCG(c.p.cfg.Seed, c.id<<1|uint64(dir)))
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// Draw for every chunk, whatever the faults, so decisions depend
			// only on the seed, the connection and the chunk's position.
			dropDraw, jitterDraw := rng.Float64(), 2*rng.Float64()-1
			f := c.p.state.Load().dirs[dir]
			switch {
			case f.Blackhole:
				c.p.stats.dropped[dir].Add(int64(n))
				c.lose(dir)
			case f.DropRate > 0 && dropDraw < f.DropRate:
				c.p.stats.dropped[dir].Add(int64(n))
				c.closeAfter(true, func() {
					c.p.stats.dropCuts[dir].Add(1)
					c.p.stats.cut.Add(1)
					c.p.log.Debug().Uint64("conn", c.id).Str("direction", dirNames[dir]).
						Int("bytes", n).Msg("chunk dropped: connection cut")
				})
				return
			default:
				ch := chunk{data: append([]byte(nil), buf[:n]...), readAt: time.Now(), jitter: jitterDraw}
				if !c.enqueue(dir, q, ch) {
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				close(q)
			} else {
				// A reset from the peer, or our own close: pass a reset on.
				c.close(true)
			}
			return
		}
	}
}

// enqueue hands ch to the writer, waiting while the queue is full (the
// destination is slow or stalled). A blackhole set meanwhile discards ch, so
// a sender is never held up by a link that now loses everything. It reports
// whether the connection goes on.
func (c *conn) enqueue(dir int, q chan<- chunk, ch chunk) bool {
	for {
		st := c.p.state.Load()
		if st.dirs[dir].Blackhole {
			c.p.stats.dropped[dir].Add(int64(len(ch.data)))
			c.lose(dir)
			return true
		}
		select {
		case q <- ch:
			return true
		case <-st.changed:
		case <-c.done:
			return false
		}
	}
}

// write delivers the chunks of q to the destination of direction dir in
// order, each when its delay is over, then passes the end of stream on.
func (c *conn) write(dir int, q <-chan chunk) {
	var last time.Time // release time of the previous chunk
	for {
		select {
		case ch, ok := <-q:
			if !ok {
				c.finish(dir)
				return
			}
			if !c.deliver(dir, ch, &last) {
				return
			}
		case <-c.done:
			return
		}
	}
}

// deliver writes one chunk when the faults in force allow, and reports
// whether the connection goes on.
func (c *conn) deliver(dir int, ch chunk, last *time.Time) bool {
	dst := c.socks[1-dir]
	for {
		st := c.p.state.Load()
		f := st.dirs[dir]
		if f.Blackhole {
			c.p.stats.dropped[dir].Add(int64(len(ch.data)))
			c.lose(dir)
			return true
		}
		if c.lost[dir].Load() {
			c.p.cutConn(c, "blackhole lifted over lost bytes")
			return false
		}
		if f.Stall {
			select {
			case <-st.changed:
				continue
			case <-c.done:
				return false
			}
		}
		release := ch.readAt.Add(f.Delay + time.Duration(ch.jitter*float64(f.Jitter)))
		if release.Before(*last) {
			release = *last
		}
		if wait := time.Until(release); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-st.changed:
				t.Stop()
				continue // the delay may have changed: recompute
			case <-c.done:
				t.Stop()
				return false
			}
		}
		if _, err := dst.Write(ch.data); err != nil {
			c.close(true)
			return false
		}
		c.p.stats.forwarded[dir].Add(int64(len(ch.data)))
		*last = release
		return true
	}
}

// finish passes the end of stream of direction dir on, unless a blackhole
// swallows it, and closes the connection when both directions have ended.
func (c *conn) finish(dir int) {
	if c.p.state.Load().dirs[dir].Blackhole {
		c.lose(dir) // the FIN vanished with the rest
		return
	}
	if c.lost[dir].Load() {
		c.p.cutConn(c, "blackhole lifted over lost bytes")
		return
	}
	dst := c.socks[1-dir]
	if hc, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := hc.CloseWrite(); err != nil {
			c.close(true)
			return
		}
	}
	if c.finished.Add(1) == 2 {
		c.close(false)
	}
}

// lose records that bytes of direction dir were discarded. If the blackhole
// lifted meanwhile (Proxy.update may have swept before lost was set), the
// connection is cut here instead.
func (c *conn) lose(dir int) {
	c.lost[dir].Store(true)
	if !c.p.state.Load().dirs[dir].Blackhole {
		c.p.cutConn(c, "blackhole lifted over lost bytes")
	}
}
