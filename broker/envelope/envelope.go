package envelope

// This file owns the checks themselves (see doc.go) and the per-record
// refusals a Kafka produce response carries (KIP-467 record_errors).
//
// Invariant: nothing here keeps state; a Check holds its batch's records
// only while it runs.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/records"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/wal"
)

// ClaimTimeout bounds the claims of one batch.
const ClaimTimeout = 10 * time.Second

// AppendWithin bounds the time from the start of a batch's claims to its
// append: past it, the partition refuses the batch (NotAfter) and the
// producer's retry claims again. The reference ledger relies on it: a
// claim's record is in the log by claimed_ms + settle or never, and
// AppendWithin is far below the settle time (tier.DefaultRefSettle).
const AppendWithin = 2 * time.Minute

// maxListed bounds the records one Refusal lists.
const maxListed = 64

// errNoObjectStore refuses every envelope of a broker without an object
// service.
var errNoObjectStore = errors.New("large payloads need an object store: this broker has none configured")

// UploadHint names the API a payload over max.inline.bytes should take.
const UploadHint = "upload the payload first (POST /v1/uploads, PUT its bytes, POST /v1/uploads/{id}:complete) " +
	"and publish its object reference instead (headers sluice.ref, sluice.size, sluice.sha256; or object_ref over HTTP)"

// RecordError is the refusal of one record, by its index in its batch.
type RecordError struct {
	Index int32
	Err   error
}

// Refusal is a batch refused for some of its records. Err carries the
// Kafka code (node.ErrMessageTooLarge or node.ErrInvalidRecord) and the
// first record's reason; Records lists at most maxListed refused records.
type Refusal struct {
	Err     error
	Records []RecordError
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// RecordErrors are err's refused records as a produce response lists them
// (v8+ record_errors); nil when err is not a Refusal.
func RecordErrors(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var r *Refusal
	if !errors.As(err, &r) {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, 0, len(r.Records))
	for _, re := range r.Records {
		e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		e.RelativeOffset = re.Index
		msg := re.Err.Error()
		e.ErrorMessage = &msg
		out = append(out, e)
	}
	return out
}

// Tenant is the tenant whose topic the internal name topic is.
func Tenant(topic string) string {
	t, _ := node.SplitName(topic)
	return t
}

// Inspect checks one record: its inline size against maxInline, and its
// envelope headers when it has any. ok reports an envelope, whose
// reference r is to be claimed. err wraps node.ErrMessageTooLarge or
// node.ErrInvalidRecord.
func Inspect(rec *kmsg.Record, maxInline int32) (r ref.Ref, ok bool, err error) {
	if size := len(rec.Value); size > int(maxInline) {
		return ref.Ref{}, false, fmt.Errorf("%w: a payload (record value) of %d bytes exceeds the topic's max.inline.bytes %d; %s",
			node.ErrMessageTooLarge, size, maxInline, UploadHint)
	}
	var hs [8]ref.Header
	headers := hs[:0]
	for _, h := range rec.Headers {
		headers = append(headers, ref.Header{Key: h.Key, Value: h.Value})
	}
	r, ok, err = ref.Parse(headers)
	if err != nil {
		return ref.Ref{}, true, fmt.Errorf("%w: %w", node.ErrInvalidRecord, err)
	}
	return r, ok, nil
}

// Claim claims refs (each once per site, in order) for tenant through c;
// sites[i] is the partition refs[i]'s record is about to be appended to.
// A refused reference is a Refusal naming the records (at indexes) that
// carry it; a failure of the claimer itself wraps node.ErrStorage.
func Claim(ctx context.Context, c node.RefClaimer, tenant string, refs []ref.Ref, indexes []int32, sites []node.RefSite) error {
	if len(refs) == 0 {
		return nil
	}
	if c == nil {
		return refuse(node.ErrInvalidRecord, errNoObjectStore, indexes)
	}
	ctx, cancel := context.WithTimeout(ctx, ClaimTimeout)
	defer cancel()
	type claim struct {
		r    ref.Ref
		site node.RefSite
	}
	done := make(map[claim]bool, len(refs))
	for i, r := range refs {
		if done[claim{r, sites[i]}] {
			continue
		}
		done[claim{r, sites[i]}] = true
		err := c.Claim(ctx, tenant, r, sites[i])
		switch {
		case err == nil:
		case errors.Is(err, ref.ErrUnknown), errors.Is(err, ref.ErrForeign), errors.Is(err, ref.ErrExpired),
			errors.Is(err, ref.ErrMismatch), errors.Is(err, ref.ErrMalformed):
			var at []int32
			for j := i; j < len(refs); j++ {
				if refs[j] == r {
					at = append(at, indexes[j])
				}
			}
			return refuse(node.ErrInvalidRecord, fmt.Errorf("object reference %s: %w", r.ID, err), at)
		case ctx.Err() != nil:
			return fmt.Errorf("claim object reference %s: %w", r.ID, ctx.Err())
		default:
			return fmt.Errorf("%w: claim object reference %s: %v", node.ErrStorage, r.ID, err) //nolint:errorlint // the claimer's failure is retriable storage, not the client's
		}
	}
	return nil
}

func refuse(code, err error, indexes []int32) *Refusal {
	r := &Refusal{Err: fmt.Errorf("%w: record %d: %w", code, indexes[0], err)}
	for _, i := range indexes[:min(len(indexes), maxListed)] {
		r.Records = append(r.Records, RecordError{Index: i, Err: err})
	}
	return r
}

// sluicePrefix starts every header name of the convention.
var sluicePrefix = []byte("sluice.")

// Check inspects every record of batch, a validated v2 batch (h its
// header) produced to partition site (site.Topic its internal name), and
// claims its envelopes' references there; see doc.go. claimed reports
// that the batch carries references, all claimed: it must then be
// appended within AppendWithin of Check's start.
func Check(ctx context.Context, c node.RefClaimer, site node.RefSite, batch []byte, h wal.BatchHeader, maxInline int32) (claimed bool, err error) {
	if h.Attributes&0x07 == 0 && len(batch) >= wal.BatchHeaderSize {
		body := batch[wal.BatchHeaderSize:]
		if len(body) <= int(maxInline) && !bytes.Contains(body, sluicePrefix) {
			return false, nil
		}
	}
	var (
		refs    []ref.Ref
		at      []int32
		refused *Refusal
		idx     int32
	)
	err = records.Each(batch, func(_, _ int64, rec *kmsg.Record) bool {
		i := idx
		idx++
		r, ok, err := Inspect(rec, maxInline)
		switch {
		case err != nil:
			if refused == nil { // err wraps its Kafka code
				refused = &Refusal{Err: fmt.Errorf("record %d: %w", i, err)}
			}
			if len(refused.Records) < maxListed {
				refused.Records = append(refused.Records, RecordError{Index: i, Err: err})
			}
		case ok:
			refs = append(refs, r)
			at = append(at, i)
		}
		return true
	})
	if err != nil {
		return false, fmt.Errorf("%w: %w", node.ErrCorruptMessage, err)
	}
	if refused != nil {
		return false, refused
	}
	sites := make([]node.RefSite, len(refs))
	for i := range sites {
		sites[i] = site
	}
	if err := Claim(ctx, c, Tenant(site.Topic), refs, at, sites); err != nil {
		return false, err
	}
	return len(refs) > 0, nil
}
