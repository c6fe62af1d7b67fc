package kafka

// This file owns the enforcement of tenants' rate quotas and per-connection
// counts on Kafka connections (KIP-219): QuotaAdmitter, the Admitter over
// the broker's quota.Meters, and connQuota, one connection's share of it.
//
//	produce   request bytes and records charged to producer_byte_rate and
//	          producer_record_rate before the handler
//	fetch     a tenant already in debt on consumer_byte_rate is answered
//	          at once with no records; otherwise max_bytes is capped at one
//	          window of its rate (KAFKA-9677), and the response's record
//	          bytes are charged once it is complete
//	every     the handler's time charged to request_percentage
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
// Invariant: the reader reads no frame while the connection is held or
// while it has inflight_requests requests unanswered.
//
// connQuota's until is guarded by its mu (the reader extends it after the
// handler, the writer after the response); inflight is atomic; id, known
// and limit are the reader's, set before the first admitted request is
// sent to the writer, which reads id only for admitted requests.

import (
	"context"
	"encoding/binary"
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

// QuotaAdmitter enforces the tenants' quotas of m.
type QuotaAdmitter struct {
	m   *quota.Meters
	now func() time.Time
}

// NewQuotaAdmitter returns the admit stage of the meters m.
func NewQuotaAdmitter(m *quota.Meters) *QuotaAdmitter {
	return &QuotaAdmitter{m: m, now: time.Now}
}

// Connected counts the connection in its tenant's connections.
func (q *QuotaAdmitter) Connected(id auth.Identity) string {
	return q.m.OpenConn(id.Principal.Tenant, q.now())
}

// Disconnected uncounts it.
func (q *QuotaAdmitter) Disconnected(id auth.Identity) { q.m.CloseConn(id.Principal.Tenant) }

// Inflight is the tenant's inflight_requests, 0 without one.
func (q *QuotaAdmitter) Inflight(id auth.Identity) int {
	n, _ := q.m.Inflight(id.Principal.Tenant)
	return n
}

// Admit charges a produce and checks and caps a fetch.
func (q *QuotaAdmitter) Admit(_ context.Context, id auth.Identity, req kmsg.Request) (Admission, error) {
	tenant := id.Principal.Tenant
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		now := q.now()
		bytes, records := produceSize(r)
		h := Hold{q.m.Record(tenant, quota.ProducerByteRate, float64(bytes), now), quota.ProducerByteRate}
		return Admission{Hold: h.Max(Hold{q.m.Record(tenant, quota.ProducerRecordRate, float64(records), now), quota.ProducerRecordRate})}, nil
	case *kmsg.FetchRequest:
		if d := q.m.Delay(tenant, quota.ConsumerByteRate, q.now()); d > 0 {
			return Admission{Hold: Hold{d, quota.ConsumerByteRate}, Answer: emptyFetch(r)}, nil
		}
		if w, ok := q.m.Window(tenant, quota.ConsumerByteRate); ok && float64(r.MaxBytes) > w {
			r.MaxBytes = int32(max(w, 1))
		}
	}
	return Admission{}, nil
}

// Handled charges the handler's time.
func (q *QuotaAdmitter) Handled(id auth.Identity, _ kmsg.Request, took time.Duration) Hold {
	return Hold{q.m.Record(id.Principal.Tenant, quota.RequestPercentage, took.Seconds(), q.now()), quota.RequestPercentage}
}

// Answered charges a fetch response's record bytes.
func (q *QuotaAdmitter) Answered(id auth.Identity, _ kmsg.Request, resp kmsg.Response) Hold {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return Hold{}
	}
	bytes, records := fetchSize(f)
	if bytes == 0 {
		return Hold{}
	}
	q.m.Metrics().RecordsOut(id.Principal.Tenant, records)
	return Hold{q.m.Record(id.Principal.Tenant, quota.ConsumerByteRate, float64(bytes), q.now()), quota.ConsumerByteRate}
}

// Held counts the time a connection was held.
func (q *QuotaAdmitter) Held(id auth.Identity, reason string, d time.Duration) {
	q.m.Metrics().Throttled(id.Principal.Tenant, reason, d)
}

// emptyFetch is the answer to a fetch of a tenant over its consumer quota:
// no records, no partitions, as Kafka's throttled fetch response.
func emptyFetch(r *kmsg.FetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(r.Version)
	return resp
}

// produceSize is the record bytes and records of a produce request (the
// record counts from the v2 batch headers; a batch too short to have one
// counts as none, and the handler refuses it).
func produceSize(r *kmsg.ProduceRequest) (bytes, records int) {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			raw := r.Topics[i].Partitions[j].Records
			bytes += len(raw)
			records += batchRecords(raw)
		}
	}
	return bytes, records
}

// fetchSize is the record bytes and records of a fetch response.
func fetchSize(f *kmsg.FetchResponse) (bytes, records int) {
	for i := range f.Topics {
		for j := range f.Topics[i].Partitions {
			raw := f.Topics[i].Partitions[j].RecordBatches
			bytes += len(raw)
			records += batchRecords(raw)
		}
	}
	return bytes, records
}

// batchRecords counts the records of the v2 batches in raw from their
// headers: the batch length at byte 8 and the record count at byte 57.
func batchRecords(raw []byte) int {
	const lengthAt, countAt, headerLen = 8, 57, 61
	n := 0
	for len(raw) >= headerLen {
		length := int64(int32(binary.BigEndian.Uint32(raw[lengthAt:])))
		if c := int32(binary.BigEndian.Uint32(raw[countAt:])); c > 0 {
			n += int(c)
		}
		next := 12 + length
		if length <= 0 || next > int64(len(raw)) {
			break
		}
		raw = raw[next:]
	}
	return n
}

// connQuota is one connection's state of the admit stage.
type connQuota struct {
	adm      Admitter
	answered chan struct{} // a request was answered; holds one signal
	inflight atomic.Int32  // requests read and not yet answered

	mu    sync.Mutex
	until time.Time // guarded by mu: the reader reads nothing before it

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
		c.until = until
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
		c.mu.Lock()
		until := c.until
		c.mu.Unlock()
		// A connection never held reads no clock here.
		if d := holdLeft(until); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		if c.limit <= 0 || c.inflight.Load() < c.limit {
			return nil
		}
		select {
		case <-c.answered:
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
