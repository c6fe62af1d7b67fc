package s3fault

// proxy.go owns a Proxy's lifetime and its request path: the configuration,
// the HTTP server and its listener, the transport to the upstream, the
// counters, and ServeHTTP, which classifies a request, draws its faults and
// carries them out (the forwarding itself is in forward.go).
//
// Invariant: a request is counted in handlers (under mu) before it does
// anything, and none is admitted once closed is set, so Close's wait covers
// every handler.
// Proxy.mu guards faults, rng and closed; the counters are atomics.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Config configures one Proxy.
type Config struct {
	// Upstream is the base URL of the S3 server, http://host:port (https
	// works too); it has no path.
	Upstream string
	// Listen is the address the proxy listens on; default 127.0.0.1:0.
	Listen string
	// Seed seeds every random decision (see decide).
	Seed uint64
	// Logger receives fault changes (info) and each injected fault (debug);
	// the zero value discards.
	Logger zerolog.Logger
}

const (
	dialTimeout       = 10 * time.Second
	readHeaderTimeout = time.Minute
	maxIdlePerHost    = 64
)

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
}

// Validate reports a configuration New cannot use.
func (c Config) Validate() error {
	if c.Upstream == "" {
		return errors.New("s3fault: no upstream URL")
	}
	u, err := url.Parse(c.Upstream)
	if err != nil {
		return fmt.Errorf("s3fault: upstream %q: %w", c.Upstream, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("s3fault: upstream %q is not http://host:port", c.Upstream)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("s3fault: upstream %q has a path, query or user; only scheme and host are used", c.Upstream)
	}
	return nil
}

// Proxy is an HTTP reverse proxy in front of an S3 server that injects S3
// protocol faults into the requests passing through it.
type Proxy struct {
	upstream  *url.URL // scheme and host only
	log       zerolog.Logger
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	closing   chan struct{} // closed by Close: ends injected delays
	served    chan struct{} // closed when srv.Serve has returned
	reqSeq    atomic.Uint64 // numbers the request IDs of injected errors

	mu       sync.Mutex
	faults   Faults         // guarded by mu
	rng      *rand.Rand     // guarded by mu
	closed   bool           // guarded by mu
	handlers sync.WaitGroup // Add under mu while !closed

	stats counters
}

// counters are the Proxy's statistics; see Stats.
type counters struct {
	requests       [numOps]atomic.Int64
	injected       [numKinds]atomic.Int64
	forwarded      atomic.Int64
	upstreamErrors atomic.Int64
}

// Stats is a snapshot of a Proxy's counters, for the chaos report.
type Stats struct {
	// Requests counts the requests received, by operation (zeros left out).
	Requests map[Op]int64
	// Injected counts the faults injected, by kind (zeros left out). A
	// request held by a delay and then failed counts under both kinds.
	Injected map[Kind]int64
	// Forwarded counts requests sent upstream, including those whose
	// response was then lost or truncated.
	Forwarded int64
	// UpstreamErrors counts forwarded requests that got no response from the
	// upstream (answered 502 BadGateway), and responses whose body broke off
	// on the way from it.
	UpstreamErrors int64
}

// New listens on cfg.Listen and starts forwarding to cfg.Upstream, with no
// faults.
func New(cfg Config) (*Proxy, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Upstream) // Validate parsed it
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("s3fault: listen %s: %w", cfg.Listen, err)
	}
	p := &Proxy{
		upstream: &url.URL{Scheme: u.Scheme, Host: u.Host},
		log:      cfg.Logger.With().Str("component", "s3fault").Str("upstream", u.Host).Logger(),
		ln:       ln,
		closing:  make(chan struct{}),
		served:   make(chan struct{}),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		transport: &http.Transport{
			Proxy:               nil, // never an $HTTP_PROXY: the upstream is dialed directly
			DialContext:         (&net.Dialer{Timeout: dialTimeout}).DialContext,
			DisableCompression:  true, // bodies and Content-Length pass as the upstream sent them
			MaxIdleConnsPerHost: maxIdlePerHost,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          log.New(p.log.With().Str("source", "http.Server").Logger(), "", 0),
	}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return p, nil
}

// Addr is the host:port clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the endpoint clients use: http://Addr().
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Close stops the listener, closes every client connection, ends injected
// delays and waits for every request handler and the server to return.
// Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.closing)
	err := p.srv.Close() // cancels the contexts of requests in flight, ending their upstream calls
	p.handlers.Wait()
	<-p.served
	p.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("s3fault: close: %w", err)
	}
	return nil
}

// Stats returns the counters now.
func (p *Proxy) Stats() Stats {
	s := Stats{
		Requests:       make(map[Op]int64),
		Injected:       make(map[Kind]int64),
		Forwarded:      p.stats.forwarded.Load(),
		UpstreamErrors: p.stats.upstreamErrors.Load(),
	}
	for op := range numOps {
		if n := p.stats.requests[op].Load(); n > 0 {
			s.Requests[op] = n
		}
	}
	for k := range numKinds {
		if n := p.stats.injected[k].Load(); n > 0 {
			s.Injected[k] = n
		}
	}
	return s
}

// admit counts a handler in, or reports that the proxy is closing.
func (p *Proxy) admit() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// ServeHTTP carries one request through the faults it draws.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.admit() {
		abort(w, false)
		return
	}
	defer p.handlers.Done()
	op := classify(r)
	p.stats.requests[op].Add(1)
	pl := p.decide(op)
	ev := func(k Kind) *zerolog.Event {
		p.stats.injected[k].Add(1)
		return p.log.Debug().Stringer("kind", k).Stringer("op", op).Str("method", r.Method).Str("path", r.URL.Path)
	}

	if pl.wait > 0 {
		ev(KindLatency).Dur("delay_ms", pl.wait).Msg("injected fault")
		if !p.sleep(r.Context(), pl.wait) {
			abort(w, false) // the client left or the proxy is closing
			return
		}
	}
	if pl.errKind >= 0 {
		ev(pl.errKind).Msg("injected fault")
		p.writeError(w, r, pl.errKind)
		return
	}

	resp, err := p.roundTrip(r)
	if err != nil && r.Context().Err() != nil {
		abort(w, false) // the client left or the proxy is closing: no one to answer
		return
	}
	if err != nil {
		p.stats.upstreamErrors.Add(1)
		p.log.Warn().Err(err).Stringer("op", op).Str("path", r.URL.Path).Msg("upstream failed")
		p.writeBadGateway(w, r)
		return
	}
	defer func() { _ = resp.Body.Close() }()

	switch {
	case pl.reply == replyLost:
		// Let the upstream finish: its whole response is read and thrown away.
		_, _ = io.Copy(io.Discard, resp.Body)
		ev(KindLostResponse).Int("status", resp.StatusCode).Msg("injected fault")
		abort(w, false)
	case pl.reply == replyTruncate && truncatable(resp):
		ev(KindTruncate).Int64("length_bytes", resp.ContentLength).Int64("sent_bytes", resp.ContentLength/2).Msg("injected fault")
		if !p.copyResponse(w, resp, resp.ContentLength/2) {
			abort(w, true)
		}
	default:
		_ = p.copyResponse(w, resp, -1)
	}
}

// sleep waits d, and reports false if the request's context or the proxy
// ended first.
func (p *Proxy) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-p.closing:
		return false
	}
}

// truncatable reports whether a response has a body that truncation can
// cut short: a success with a known, non-empty length.
func truncatable(resp *http.Response) bool {
	return resp.StatusCode/100 == 2 && resp.ContentLength > 0
}
