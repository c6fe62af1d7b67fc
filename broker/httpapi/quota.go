package httpapi

// This file owns the enforcement of tenants' rate quotas on the public HTTP
// API: QuotaAdmitter, the admit stage over the broker's quota.Meters, the
// same meters (same tenant, same share of the cluster-wide rate) the Kafka
// front end charges.
//
//	publish   the bytes of the records it writes (keys, values after
//	          base64, headers and the message_id header) charged to
//	          producer_byte_rate, as a Kafka producer is charged its
//	          records and not its framing, and its messages to
//	          producer_record_rate (publishCharge)
//	fetch     the response body's bytes charged to consumer_byte_rate;
//	          its records capped at quota.FetchSlice of that rate
//	          (FetchCap), as a Kafka fetch's max_bytes is, so a held
//	          consumer reads a slice of its rate at a time rather than a
//	          burst it then waits out
//	upload    a PUT of an upload session's bytes: its Content-Length charged
//	          to object_upload_byte_rate (objapi)
//	download  GET /v1/objects/{ref}: at most object_downloads at once per
//	          tenant on this broker, one more refused 429; the bytes sent
//	          charged to consumer_byte_rate, as a fetch's are
//
// HTTP has no connection to stop reading, so a request of a tenant already
// in debt on the key is refused before it is read, answered 429 with
// Retry-After (whole seconds, rounded up) and the JSON error code
// "throttled"; a request that is admitted is served whole and charged, even
// when that takes its tenant into debt, so nothing received is dropped.
//
// Invariant: only a publish, a fetch, an upload PUT or a download is
// refused, and only before its handler runs; a download admitted is
// uncounted by Served, which the pipeline calls once the handler returned.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
)

// The routes the quotas apply to.
const (
	publishRoute = "POST /v1/topics/{topic}/messages:publish"
	fetchRoute   = "POST /v1/groups/{group}/messages:fetch"
	uploadRoute  = "PUT /v1/uploads/{id}"
	objectRoute  = "GET /v1/objects/{ref}"
)

// Throttled is a refusal by a rate quota: the client may retry after
// Delay.
type Throttled struct {
	Key   string
	Delay time.Duration
}

func (e *Throttled) Error() string {
	return fmt.Sprintf("over the tenant's %s quota; retry in %.1fs", e.Key, e.Delay.Seconds())
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// setRetryAfter sets Retry-After for a *Throttled err.
func setRetryAfter(w http.ResponseWriter, err error) {
	var t *Throttled
	if errors.As(err, &t) {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(t.Delay), 10))
	} else if ms := node.ThrottleMillis(err); ms > 0 {
		// An admin mutation over controller_mutation_rate (broker/node).
		w.Header().Set("Retry-After", strconv.Itoa(int((ms+999)/1000)))
	}
}

// QuotaAdmitter charges HTTP publishes and fetches to the meters m.
type QuotaAdmitter struct {
	m   *quota.Meters
	now func() time.Time

	mu        sync.Mutex
	downloads map[string]int // guarded by mu: downloads under way per tenant
}

// NewQuotaAdmitter returns the admit stage of the meters m.
func NewQuotaAdmitter(m *quota.Meters) *QuotaAdmitter {
	return &QuotaAdmitter{m: m, now: time.Now}
}

// Admit refuses a publish or fetch of a tenant in debt, and charges an
// admitted publish.
func (q *QuotaAdmitter) Admit(r *http.Request, id auth.Identity) error {
	tenant := id.Principal.Tenant
	now := q.now()
	switch r.Pattern {
	case publishRoute:
		if err := q.refuse(tenant, now, quota.ProducerByteRate, quota.ProducerRecordRate); err != nil {
			return err
		}
		raw, err := bufferBody(nil, r)
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) {
				return BadRequest("reading the body: %v", err)
			}
			return err // too large: answered as the handler would
		}
		bytes, records := publishCharge(raw)
		q.m.Record(tenant, quota.ProducerByteRate, float64(bytes), now)
		q.m.Record(tenant, quota.ProducerRecordRate, float64(records), now)
	case fetchRoute:
		return q.refuse(tenant, now, quota.ConsumerByteRate)
	case uploadRoute:
		if err := q.refuse(tenant, now, quota.ObjectUploadByteRate); err != nil {
			return err
		}
		if r.ContentLength > 0 {
			q.m.Record(tenant, quota.ObjectUploadByteRate, float64(r.ContentLength), now)
		}
	case objectRoute:
		if err := q.refuse(tenant, now, quota.ConsumerByteRate); err != nil {
			return err
		}
		limit, ok := q.m.Limit(tenant, quota.ObjectDownloads)
		q.mu.Lock()
		defer q.mu.Unlock()
		if ok && float64(q.downloads[tenant]) >= limit {
			q.m.Metrics().Throttled(tenant, quota.ObjectDownloads, time.Second)
			return &Throttled{Key: quota.ObjectDownloads, Delay: time.Second}
		}
		if q.downloads == nil {
			q.downloads = make(map[string]int)
		}
		q.downloads[tenant]++
	}
	return nil
}

// FetchCap is the most bytes of records one fetch of id's tenant reads at
// this broker (quota.Meters.FetchCap of consumer_byte_rate, at least 1:
// the first batch is returned whole anyway), and whether its tenant has a
// consumer_byte_rate.
func (q *QuotaAdmitter) FetchCap(id auth.Identity) (int, bool) {
	w, ok := q.m.FetchCap(id.Principal.Tenant, quota.ConsumerByteRate)
	return max(int(w), 1), ok
}

// publishCharge is what a publish body costs its tenant: the bytes of the
// records the handler writes from it (recordFromMessage's keys, values,
// header keys and values), so a payload costs the same over HTTP as over
// Kafka whatever its JSON or base64 framing, and its message count. A
// bad body is the handler's to answer, but is not free: a body that is no
// publish costs its length, and a message the handler refuses its JSON.
func publishCharge(raw []byte) (bytes, records int) {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return len(raw), 0
	}
	for i, m := range req.Messages {
		var pm publishMessage
		if json.Unmarshal(m, &pm) != nil {
			bytes += len(m)
			continue
		}
		rec, err := recordFromMessage(i, pm, 0)
		if err != nil {
			bytes += len(m)
			continue
		}
		bytes += len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			bytes += len(h.Key) + len(h.Value)
		}
	}
	return bytes, len(req.Messages)
}

// refuse is a *Throttled when the tenant is in debt on any of keys.
func (q *QuotaAdmitter) refuse(tenant string, now time.Time, keys ...string) error {
	var worst *Throttled
	for _, k := range keys {
		if d := q.m.Delay(tenant, k, now); d > 0 && (worst == nil || d > worst.Delay) {
			worst = &Throttled{Key: k, Delay: d}
		}
	}
	if worst == nil {
		return nil
	}
	q.m.Metrics().Throttled(tenant, worst.Key, worst.Delay)
	q.m.Metrics().Rejected(tenant, quota.RejectHTTPThrottled)
	return worst
}

// Served charges a fetch's or a download's response bytes.
func (q *QuotaAdmitter) Served(r *http.Request, id auth.Identity, written int64) {
	if r.Pattern == objectRoute {
		q.mu.Lock()
		if q.downloads[id.Principal.Tenant]--; q.downloads[id.Principal.Tenant] <= 0 {
			delete(q.downloads, id.Principal.Tenant)
		}
		q.mu.Unlock()
	}
	if (r.Pattern == fetchRoute || r.Pattern == objectRoute) && written > 0 {
		q.m.Record(id.Principal.Tenant, quota.ConsumerByteRate, float64(written), q.now())
	}
}

// countingWriter counts the body bytes written through it.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
