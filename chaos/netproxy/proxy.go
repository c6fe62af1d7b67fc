package netproxy

// This file owns a Proxy's lifetime: its configuration, the listener and its
// accept loop, the dial to the upstream, the set of live connections and the
// counters. Proxy.mu guards upstream, conns, nextID, cut and closed; the
// counters are atomics; the faults are in faults.go.
//
// Invariant: a connection is in Proxy.conns from the moment its pumps may
// start until its close; once closed is set, no connection is added.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config configures one Proxy.
type Config struct {
	// Listen is the address the proxy listens on; default 127.0.0.1:0.
	Listen string
	// Upstream is the address every accepted connection is forwarded to.
	Upstream string
	// Name labels the proxy in logs (for example "b1->b2-inter").
	Name string
	// Seed seeds drop and jitter decisions.
	Seed uint64
	// DialTimeout bounds the dial to the upstream; default 5 s.
	DialTimeout time.Duration
	// Logger receives connection and fault events; the zero value is a no-op.
	Logger zerolog.Logger
}

const defaultDialTimeout = 5 * time.Second

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
}

// Validate reports a configuration New cannot use.
func (c Config) Validate() error {
	if c.Upstream == "" {
		return errors.New("netproxy: no upstream address")
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("netproxy: negative dial timeout %v", c.DialTimeout)
	}
	return nil
}

// Proxy forwards the TCP connections it accepts to an upstream, through the
// faults set on it.
type Proxy struct {
	cfg    Config
	log    zerolog.Logger
	ln     net.Listener
	cancel context.CancelFunc // stops dials in flight; called by Close
	wg     sync.WaitGroup     // every goroutine of the proxy

	state atomic.Pointer[faultState] // replaced under mu, read without it

	mu       sync.Mutex
	upstream string             // guarded by mu
	conns    map[*conn]struct{} // guarded by mu
	nextID   uint64             // guarded by mu: accept number of the next connection
	cut      bool               // guarded by mu: reset new connections at accept
	closed   bool               // guarded by mu

	stats counters
}

// counters are the Proxy's statistics; see Stats.
type counters struct {
	forwarded  [2]atomic.Int64
	dropped    [2]atomic.Int64
	dropCuts   [2]atomic.Int64
	accepted   atomic.Int64
	refused    atomic.Int64
	dialFailed atomic.Int64
	cut        atomic.Int64
}

// DirectionStats counts the bytes of one direction.
type DirectionStats struct {
	// Forwarded is the number of bytes written to the far side.
	Forwarded int64
	// Dropped is the number of bytes read and never delivered: discarded by a
	// blackhole, or in a chunk whose drop cut its connection.
	Dropped int64
	// DropCuts is the number of connections cut by a drop in this direction.
	DropCuts int64
}

// Stats is a snapshot of a Proxy's counters, for the chaos report.
type Stats struct {
	ToUpstream, ToClient DirectionStats
	// Accepted counts connections accepted by the listener, Refused those of
	// them reset at once because the proxy was cut or closing, DialFailed
	// those reset because the upstream could not be dialed.
	Accepted, Refused, DialFailed int64
	// Cut counts established connections cut by the proxy: by Cut, by a drop
	// or by a blackhole lifting over lost bytes.
	Cut int64
	// Active is the number of connections open now.
	Active int64
}

// New listens on cfg.Listen and starts forwarding to cfg.Upstream.
func New(cfg Config) (*Proxy, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("netproxy: listen %s: %w", cfg.Listen, err)
	}
	p := &Proxy{
		cfg:      cfg,
		log:      cfg.Logger.With().Str("component", "netproxy").Str("proxy", cfg.Name).Logger(),
		ln:       ln,
		upstream: cfg.Upstream,
		conns:    make(map[*conn]struct{}),
	}
	p.state.Store(&faultState{changed: make(chan struct{})})
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.acceptLoop(ctx)
	}()
	return p, nil
}

// Addr is the address clients dial to reach the upstream through the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Name is the proxy's name from its Config.
func (p *Proxy) Name() string { return p.cfg.Name }

// Upstream is the address new connections are forwarded to.
func (p *Proxy) Upstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream
}

// SetUpstream forwards connections accepted from now on to addr; existing
// ones keep their upstream.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
}

// Stats returns the counters now.
func (p *Proxy) Stats() Stats {
	s := &p.stats
	dir := func(i int) DirectionStats {
		return DirectionStats{
			Forwarded: s.forwarded[i].Load(),
			Dropped:   s.dropped[i].Load(),
			DropCuts:  s.dropCuts[i].Load(),
		}
	}
	p.mu.Lock()
	active := int64(len(p.conns))
	p.mu.Unlock()
	return Stats{
		ToUpstream: dir(idxToUpstream),
		ToClient:   dir(idxToClient),
		Accepted:   s.accepted.Load(),
		Refused:    s.refused.Load(),
		DialFailed: s.dialFailed.Load(),
		Cut:        s.cut.Load(),
		Active:     active,
	}
}

// Close stops the listener, resets every connection and waits for every
// goroutine of the proxy to return. Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.connList()
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	for _, c := range conns {
		c.close(true)
	}
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("netproxy: close %s: %w", p.cfg.Name, err)
	}
	return nil
}

// connList copies the connection set; p.mu must be held.
func (p *Proxy) connList() []*conn {
	out := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

const acceptBackoff = 10 * time.Millisecond

func (p *Proxy) acceptLoop(ctx context.Context) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Out of descriptors or similar: wait a little rather than spin.
			p.log.Warn().Err(err).Msg("accept")
			t := time.NewTimer(acceptBackoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		p.stats.accepted.Add(1)
		p.mu.Lock()
		refuse := p.cut || p.closed
		upstream := p.upstream
		p.nextID++
		id := p.nextID
		p.mu.Unlock()
		if refuse {
			p.stats.refused.Add(1)
			resetClose(client)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(ctx, id, client, upstream)
		}()
	}
}

// handle dials the upstream for one accepted connection and starts its pumps.
func (p *Proxy) handle(ctx context.Context, id uint64, client net.Conn, upstream string) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	up, err := d.DialContext(ctx, "tcp", upstream)
	if err != nil {
		if ctx.Err() != nil { // closing, not a failed upstream
			p.stats.refused.Add(1)
			resetClose(client)
			return
		}
		p.stats.dialFailed.Add(1)
		p.log.Debug().Err(err).Str("upstream", upstream).Msg("dial upstream")
		resetClose(client)
		return
	}
	c := newConn(p, id, client, up)
	p.mu.Lock()
	refuse := p.cut || p.closed
	if !refuse {
		p.conns[c] = struct{}{}
	}
	p.mu.Unlock()
	if refuse {
		p.stats.refused.Add(1)
		resetClose(client)
		resetClose(up)
		return
	}
	p.log.Debug().Uint64("conn", id).Str("client", client.RemoteAddr().String()).
		Str("upstream", upstream).Msg("connected")
	c.start()
}

// cutConn resets c on the proxy's initiative and counts it.
func (p *Proxy) cutConn(c *conn, why string) {
	c.closeAfter(true, func() {
		p.stats.cut.Add(1)
		p.log.Debug().Uint64("conn", c.id).Str("why", why).Msg("connection cut")
	})
}

// forget removes a closed connection from the set.
func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// resetClose closes a connection with a reset (SO_LINGER 0) rather than a
// FIN, so the peer sees the abrupt end of a failed link, not a clean close.
func resetClose(c net.Conn) {
	if l, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0) // best effort: a plain close still ends the connection
	}
	_ = c.Close() // the connection is being abandoned; nothing to report to
}
