package netconn

// This file owns the bounds on Kafka connections: how many may be open in
// all and per client IP (Kafka's max.connections and
// max.connections.per.ip), and when an idle one is closed (Kafka's
// connections.max.idle.ms).
//
// Invariant: a connection over a limit is closed at accept, before a byte is
// read from it, and counted in sluice_connections_refused_total{reason}
// (by the caller, under the name Reasons gives).
// Invariant: a connection is idle only when no request is in flight on it
// (read but not yet answered: a long-poll fetch or a parked JoinGroup is not
// idle) and none of its bytes arrived for ConnectionsMaxIdle. A half-sent
// request is idle: its sender has gone quiet, and closing it returns the
// request memory it holds (package frames).
//
// Limiter's counts are guarded by its mu; the accept loop admits and the
// connection goroutines leave. Activity is shared by one connection's
// reader and writer through atomics.

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrIdle ends a connection that stayed idle too long.
var ErrIdle = errors.New("connection idle")

// Reasons names Admit's refusals as the caller labels them (in
// sluice_connections_refused_total); the caller passes its own names so
// this package needs none of the broker's.
type Reasons struct {
	MaxConnections string // over max in all
	MaxPerIP       string // over maxPerIP from one IP
}

// Limiter counts open connections, in all and per client IP.
type Limiter struct {
	max, maxPerIP int // maxPerIP 0: no per-IP bound
	reasons       Reasons

	mu    sync.Mutex
	total int            // guarded by mu
	perIP map[string]int // guarded by mu; only IPs with open connections
}

// NewLimiter admits at most max connections, and at most maxPerIP (0: no
// bound) from one IP; Admit refuses under reasons' names.
func NewLimiter(max, maxPerIP int, reasons Reasons) *Limiter {
	return &Limiter{max: max, maxPerIP: maxPerIP, reasons: reasons, perIP: make(map[string]int)}
}

// Admit counts a new connection from ip, or returns why it is refused.
func (l *Limiter) Admit(ip string) (refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return l.reasons.MaxConnections
	case l.maxPerIP > 0 && l.perIP[ip] >= l.maxPerIP:
		return l.reasons.MaxPerIP
	}
	l.total++
	l.perIP[ip]++
	return ""
}

// Leave uncounts a connection Admit counted.
func (l *Limiter) Leave(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// RemoteIP is the host part of a connection's remote address.
func RemoteIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// Activity is what decides whether a connection is idle.
type Activity struct {
	inflight  atomic.Int32 // requests read and not yet answered or dropped
	lastReply atomic.Int64 // unix nanoseconds of the last answer (or of accept)
}

// NewActivity starts a connection's activity at now (its accept).
func NewActivity(now time.Time) *Activity {
	a := &Activity{}
	a.lastReply.Store(now.UnixNano())
	return a
}

// Started counts a request read.
func (a *Activity) Started() { a.inflight.Add(1) }

// Finished counts a request answered or dropped.
func (a *Activity) Finished(now time.Time) {
	a.lastReply.Store(now.UnixNano())
	a.inflight.Add(-1)
}

// idleUntil is called when a read has waited idle: it returns when the
// connection becomes idle, which is not before now if it already is.
func (a *Activity) idleUntil(now time.Time, idle time.Duration) time.Time {
	if a.inflight.Load() > 0 {
		return now.Add(idle)
	}
	return time.Unix(0, a.lastReply.Load()).Add(idle)
}

// IdleReader is a connection as its reader goroutine reads it: a read that
// waits longer than idle fails with ErrIdle, unless a request was in flight
// or answered meanwhile, in which case it keeps waiting.
type IdleReader struct {
	nc   net.Conn
	idle time.Duration
	act  *Activity
}

// NewIdleReader reads nc, idle after idle without activity act counts.
func NewIdleReader(nc net.Conn, idle time.Duration, act *Activity) *IdleReader {
	return &IdleReader{nc: nc, idle: idle, act: act}
}

func (r *IdleReader) Read(p []byte) (int, error) {
	deadline := time.Now().Add(r.idle)
	for {
		if err := r.nc.SetReadDeadline(deadline); err != nil {
			return 0, fmt.Errorf("set read deadline: %w", err)
		}
		n, err := r.nc.Read(p)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return n, err
		}
		if n > 0 {
			return n, nil // bytes arrived: not idle; the next read waits anew
		}
		now := time.Now()
		if deadline = r.act.idleUntil(now, r.idle); !deadline.After(now) {
			return 0, fmt.Errorf("%w: no request for %v", ErrIdle, r.idle)
		}
	}
}
