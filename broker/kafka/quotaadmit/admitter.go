package quotaadmit

// This file owns what a Kafka request is charged to its tenant's rate
// quotas (KIP-219), over the broker's quota.Meters:
//
//	produce   request bytes and records charged to producer_byte_rate and
//	          producer_record_rate before the handler
//	fetch     a tenant already in debt on consumer_byte_rate is answered
//	          at once with no records; otherwise max_bytes is capped at a
//	          tenth of a second of its rate (quota.FetchSlice; Kafka caps
//	          it at one window, KAFKA-9677), and the response's record
//	          bytes are charged once it is complete
//	every     the handler's time charged to request_percentage
//
// How a hold is applied to the connection (the response goes out at once,
// then the reader waits) is package kafka's (quota.go).
//
// One hold is capped at MaxHold, and so is the throttle_time_ms a client
// is told: a request far over its tenant's rate (one huge produce, or many
// connections of one tenant) runs the bucket into a debt of many seconds,
// and a client told to wait that long gives up its requests. The debt is
// kept whole: when a capped hold ends, the connection's reader asks Owed
// and is held again, MaxHold at a time, before it reads the next request,
// until the debt is paid. So a connection reads nothing while its tenant
// owes (the long-run rate is the quota, as without the cap), and a quota
// raised or removed meanwhile frees it within MaxHold.
//
// Invariant: nothing already received is refused by a rate quota: Admit
// holds, and answers at once only a fetch of a tenant already in debt.
// Invariant: record counts come from the v2 batch headers alone and are
// never negative, whatever bytes a client sent.
//
// An Admitter has no state of its own beyond the meters, which guard
// theirs; its methods are called from every connection's goroutines.

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/quota"
)

// MaxHold is the longest one hold (and throttle_time_ms) of a connection:
// ten burst windows (quota.DefaultBurst), as Kafka bounds a throttle by
// its quota window; below the request timeouts of the clients we test
// with, so a client that honours throttle_time_ms does not time out its
// requests while it waits.
const MaxHold = 10 * time.Second

// Admitter enforces the tenants' quotas of m: the kafka.Admitter of a
// broker with quotas.
type Admitter struct {
	m       *quota.Meters
	now     func() time.Time
	maxHold time.Duration // > 0
}

var _ kafka.Admitter = (*Admitter)(nil)

// New returns the admit stage of the meters m.
func New(m *quota.Meters) *Admitter {
	return &Admitter{m: m, now: time.Now, maxHold: MaxHold}
}

// capped is h held at most maxHold.
func (q *Admitter) capped(h kafka.Hold) kafka.Hold {
	h.Delay = min(h.Delay, q.maxHold)
	return h
}

// Owed is how much longer a connection of id must be held for the debt of
// reason (a quota key) once its hold ends, capped: 0 once it is paid.
func (q *Admitter) Owed(id auth.Identity, reason string) time.Duration {
	return min(q.m.Delay(id.Principal.Tenant, reason, q.now()), q.maxHold)
}

// Connected counts the connection in its tenant's connections.
func (q *Admitter) Connected(id auth.Identity) string {
	return q.m.OpenConn(id.Principal.Tenant, q.now())
}

// Disconnected uncounts it.
func (q *Admitter) Disconnected(id auth.Identity) { q.m.CloseConn(id.Principal.Tenant) }

// Inflight is the tenant's inflight_requests, 0 without one.
func (q *Admitter) Inflight(id auth.Identity) int {
	n, _ := q.m.Inflight(id.Principal.Tenant)
	return n
}

// Admit charges a produce and checks and caps a fetch.
func (q *Admitter) Admit(_ context.Context, id auth.Identity, req kmsg.Request) (kafka.Admission, error) {
	tenant := id.Principal.Tenant
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		now := q.now()
		bytes, records := produceSize(r)
		h := kafka.Hold{Delay: q.m.Record(tenant, quota.ProducerByteRate, float64(bytes), now), Reason: quota.ProducerByteRate}
		return kafka.Admission{Hold: q.capped(h.Max(kafka.Hold{Delay: q.m.Record(tenant, quota.ProducerRecordRate, float64(records), now), Reason: quota.ProducerRecordRate}))}, nil
	case *kmsg.FetchRequest:
		if d := q.m.Delay(tenant, quota.ConsumerByteRate, q.now()); d > 0 {
			return kafka.Admission{Hold: q.capped(kafka.Hold{Delay: d, Reason: quota.ConsumerByteRate}), Answer: emptyFetch(r)}, nil
		}
		if w, ok := q.m.FetchCap(tenant, quota.ConsumerByteRate); ok && float64(r.MaxBytes) > w {
			r.MaxBytes = int32(max(w, 1))
		}
	}
	return kafka.Admission{}, nil
}

// Handled charges the handler's time.
func (q *Admitter) Handled(id auth.Identity, _ kmsg.Request, took time.Duration) kafka.Hold {
	return q.capped(kafka.Hold{Delay: q.m.Record(id.Principal.Tenant, quota.RequestPercentage, took.Seconds(), q.now()), Reason: quota.RequestPercentage})
}

// Answered charges a fetch response's record bytes.
func (q *Admitter) Answered(id auth.Identity, _ kmsg.Request, resp kmsg.Response) kafka.Hold {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return kafka.Hold{}
	}
	bytes, records := fetchSize(f)
	if bytes == 0 {
		return kafka.Hold{}
	}
	q.m.Metrics().RecordsOut(id.Principal.Tenant, records)
	return q.capped(kafka.Hold{Delay: q.m.Record(id.Principal.Tenant, quota.ConsumerByteRate, float64(bytes), q.now()), Reason: quota.ConsumerByteRate})
}

// Held counts the time a connection was held.
func (q *Admitter) Held(id auth.Identity, reason string, d time.Duration) {
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
