package kafka

// This file owns the bounds on Kafka connections: how many may be open in
// all and per client IP (Kafka's max.connections and
// max.connections.per.ip), and when an idle one is closed (Kafka's
// connections.max.idle.ms).
//
// Invariant: a connection over a limit is closed at accept, before a byte is
// read from it, and counted in sluice_connections_refused_total{reason}.
// Invariant: a connection is idle only when no request is in flight on it
// (read but not yet answered: a long-poll fetch or a parked JoinGroup is not
// idle) and none of its bytes arrived for ConnectionsMaxIdle. A half-sent
// request is idle: its sender has gone quiet, and closing it returns the
// request memory it holds (package frames).
//
// connLimiter's counts are guarded by its mu; the accept loop admits and the
// connection goroutines leave. connActivity is shared by one connection's
// reader and writer through atomics.

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
)

// errIdle ends a connection that stayed idle too long.
var errIdle = errors.New("connection idle")

// Refusal reasons, as labelled in sluice_connections_refused_total.
const (
	refusedMaxConnections = node.RefusedMaxConnections
	refusedMaxPerIP       = node.RefusedMaxPerIP
)

// connLimiter counts open connections, in all and per client IP.
type connLimiter struct {
	max, maxPerIP int // maxPerIP 0: no per-IP bound

	mu    sync.Mutex
	total int            // guarded by mu
	perIP map[string]int // guarded by mu; only IPs with open connections
}

func newConnLimiter(max, maxPerIP int) *connLimiter {
	return &connLimiter{max: max, maxPerIP: maxPerIP, perIP: make(map[string]int)}
}

// admit counts a new connection from ip, or returns why it is refused.
func (l *connLimiter) admit(ip string) (refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return refusedMaxConnections
	case l.maxPerIP > 0 && l.perIP[ip] >= l.maxPerIP:
		return refusedMaxPerIP
	}
	l.total++
	l.perIP[ip]++
	return ""
}

// leave uncounts a connection admit counted.
func (l *connLimiter) leave(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// remoteIP is the host part of a connection's remote address.
func remoteIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// connActivity is what decides whether a connection is idle.
type connActivity struct {
	inflight  atomic.Int32 // requests read and not yet answered or dropped
	lastReply atomic.Int64 // unix nanoseconds of the last answer (or of accept)
}

func newConnActivity(now time.Time) *connActivity {
	a := &connActivity{}
	a.lastReply.Store(now.UnixNano())
	return a
}

// started counts a request read.
func (a *connActivity) started() { a.inflight.Add(1) }

// finished counts a request answered or dropped.
func (a *connActivity) finished(now time.Time) {
	a.lastReply.Store(now.UnixNano())
	a.inflight.Add(-1)
}

// idleUntil is called when a read has waited idle: it returns when the
// connection becomes idle, which is not before now if it already is.
func (a *connActivity) idleUntil(now time.Time, idle time.Duration) time.Time {
	if a.inflight.Load() > 0 {
		return now.Add(idle)
	}
	return time.Unix(0, a.lastReply.Load()).Add(idle)
}

// idleReader is a connection as its reader goroutine reads it: a read that
// waits longer than idle fails with errIdle, unless a request was in flight
// or answered meanwhile, in which case it keeps waiting.
type idleReader struct {
	nc   net.Conn
	idle time.Duration
	act  *connActivity
}

func (r *idleReader) Read(p []byte) (int, error) {
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
			return 0, fmt.Errorf("%w: no request for %v", errIdle, r.idle)
		}
	}
}
