package kafka

// This file owns the enforcement of tenants' rate quotas and per-connection
// counts on Kafka connections (KIP-219): connQuota, one connection's share
// of the Admitter (package quotaadmit holds the one over the broker's
// quota.Meters, and what it charges for each request).
//
// The response always goes out at once, with throttle_time_ms set to the
// longest hold; then the connection's reader does not read it until the
// hold has passed, so a client that ignores throttle_time_ms is held all
// the same. Nothing already received is refused or dropped by a rate
// quota: it is charged and served, and the client waits afterwards.
//
// Invariant: a connection is counted in its tenant's connections once its
// identity is known (its first request past authentication) and uncounted
// when it ends; a connection over connections or connection_creation_rate
// is closed before any request of it is served.
// Invariant: the reader reads no frame while the connection is held, owes
// its last hold's debt (Owed) or has inflight_requests requests unanswered.
//
// connQuota's until and reason are guarded by its mu (the reader extends it after the
// handler, the writer after the response); inflight is atomic; id, known
// and limit are the reader's, set before the first admitted request is
// sent to the writer, which reads id only for admitted requests.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/quota"
)

// errQuotaClosed marks a connection closed by a count quota.
var errQuotaClosed = errors.New("closed by a quota")

// connQuota is one connection's state of the admit stage.
type connQuota struct {
	adm      Admitter
	answered chan struct{} // a request was answered; holds one signal
	inflight atomic.Int32  // requests read and not yet answered

	mu     sync.Mutex
	until  time.Time // guarded by mu: the reader reads nothing before it
	reason string    // guarded by mu: the last hold's, until the reader checks its debt

	known bool          // reader's: Connected has admitted id
	id    auth.Identity // reader's until known; then fixed
	limit int32         // reader's: inflight_requests of id, 0 none
}

func newConnQuota(adm Admitter) *connQuota {
	return &connQuota{adm: adm, answered: make(chan struct{}, 1)}
}

// reqQuota is a request's state of the admit stage.
type reqQuota struct {
	conn     *connQuota
	admitted bool      // charged to the connection's tenant (Admit ran)
	hold     Hold      // the hold known before the response
	at       time.Time // when hold was known: it runs from then
}

// admitAndHandle is the admit stage around the handler of a client
// request.
func (b *Server) admitAndHandle(ctx context.Context, a api, id auth.Identity, req *request) (reply, error) {
	cq := req.quota.conn
	if _, none := b.admitter.(AdmitAll); none || cq == nil || preAuthAPI(req.key) {
		return b.handleFair(ctx, a, id, req)
	}
	if !cq.known {
		if reason := b.admitter.Connected(id); reason != "" {
			b.M.ConnsRefused.WithLabelValues(reason).Inc()
			return nil, fmt.Errorf("%w: tenant %q: %s", errQuotaClosed, id.Principal.Tenant, reason)
		}
		cq.known, cq.id, cq.limit = true, id, int32(b.admitter.Inflight(id))
	}
	adm, err := b.admitter.Admit(ctx, id, req.body)
	if err != nil {
		return nil, fmt.Errorf("%s not admitted: %w", apiName(req.key), err)
	}
	req.quota.admitted = true
	if adm.Answer != nil {
		req.quota.hold, req.quota.at = adm.Hold, time.Now()
		cq.hold(adm.Hold, req.quota.at)
		return done(adm.Answer), nil
	}
	start := time.Now()
	rep, err := b.handleFair(ctx, a, id, req)
	end := time.Now()
	req.quota.hold, req.quota.at = adm.Max(b.admitter.Handled(id, req.body, end.Sub(start))), end
	// Held from now: the response still goes out at once.
	cq.hold(req.quota.hold, end)
	return rep, err
}

// hold keeps the reader from reading before now + h.Delay, and counts the
// time added.
func (c *connQuota) hold(h Hold, now time.Time) {
	if h.Delay <= 0 {
		return
	}
	until := now.Add(h.Delay)
	c.mu.Lock()
	from := c.until
	if until.After(from) {
		c.until, c.reason = until, h.Reason
	}
	c.mu.Unlock()
	if from.Before(now) {
		from = now
	}
	if added := until.Sub(from); added > 0 && c.known {
		c.adm.Held(c.id, h.Reason, added)
	}
}

// wait returns once the reader may read the next frame: the connection is
// not held and has fewer than its limit of requests unanswered.
func (c *connQuota) wait(ctx context.Context) error {
	for {
		// A connection never held reads no clock here.
		c.mu.Lock()
		d, reason := holdLeft(c.until), ""
		if d <= 0 { // the hold is over: its debt is checked once
			reason, c.reason = c.reason, ""
		}
		c.mu.Unlock()
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		if reason != "" { // held again while the debt is owed
			c.hold(Hold{Delay: c.adm.Owed(c.id, reason), Reason: reason}, time.Now())
			continue
		}
		if c.limit <= 0 || c.inflight.Load() < c.limit {
			return nil
		}
		from := time.Now() // at inflight_requests: the time is counted as held
		select {
		case <-c.answered:
			c.adm.Held(c.id, quota.InflightRequests, time.Since(from))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holdLeft is the time until until, 0 for the zero time.
func holdLeft(until time.Time) time.Duration {
	if until.IsZero() {
		return 0
	}
	return time.Until(until)
}

// sent counts a request handed to the writer.
func (c *connQuota) sent() { c.inflight.Add(1) }

// answer is the writer's part before it encodes o's response: the tenant's
// charge of the response, and throttle_time_ms set to what is left of the
// request's hold (which ran from when it was known, so a slow fsync does
// not lengthen it).
func (c *connQuota) answer(o *outbound, resp kmsg.Response) Hold {
	q := &o.req.quota
	if !q.admitted || resp == nil {
		return Hold{}
	}
	h := q.hold
	h.Delay -= time.Since(q.at)
	h = h.Max(c.adm.Answered(c.id, o.req.body, resp))
	if h.Delay > 0 {
		if t, ok := resp.(kmsg.SetThrottleResponse); ok {
			t.SetThrottle(int32(min(math.Ceil(h.Delay.Seconds()*1000), math.MaxInt32)))
		}
	}
	return h
}

// answeredOne is the writer's part once o's response is written: the hold
// from now, and one fewer request in flight.
func (c *connQuota) answeredOne(h Hold) {
	c.hold(h, time.Now())
	c.inflight.Add(-1)
	select {
	case c.answered <- struct{}{}:
	default:
	}
}
