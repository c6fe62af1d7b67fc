package httpapi

// This file owns object references over HTTP (issue 21): a publish's
// object_ref becomes an envelope record (the header convention of
// payload/ref), every published record is checked against the topic's
// max.inline.bytes and its envelope claimed (broker/envelope), and a
// fetched envelope is answered with its object_ref beside its headers.
//
// Invariant: a publish appends nothing until every message's record passed
// envelope.Inspect and every reference in it was claimed for the topic's
// tenant; a refusal answers the whole request (400 INVALID_RECORD, 413
// MESSAGE_TOO_LARGE, 503 when the object service failed). The copies the
// broker writes itself (retry and dead-letter copies, redrives:
// produceCopy) are claimed the same way, at the partition they go to,
// whether this broker leads it or forwards them; a copy whose reference
// cannot be claimed is not written, so the ledger (tier/doc.go, "Large
// objects") holds every record naming an object, copies included.

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/broker/httpapi/wire"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/envelope"
	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/payload/ref"
)

// MaxPreviewBytes bounds the preview an object_ref message may carry as
// its record's value.
const MaxPreviewBytes = 1024

// ObjectRef is a reference to a large payload as the HTTP API shows it.
type ObjectRef = wire.ObjectRef

// envelopeRecord fills rec, the record of messages[i], as the envelope of
// m's object_ref: its headers, and its preview as the value.
func envelopeRecord(i int, m publishMessage, rec *kmsg.Record) error {
	if m.Payload != nil || m.PayloadBase64 != nil {
		return BadRequest("messages[%d]: give object_ref or a payload, not both", i)
	}
	r := m.ObjectRef.AsRef()
	if err := r.Validate(); err != nil {
		return &APIError{Status: http.StatusBadRequest, Code: kerr.InvalidRecord.Message, Message: fmt.Sprintf("messages[%d]: object_ref: %v", i, err)}
	}
	if m.Preview != nil {
		if len(*m.Preview) > MaxPreviewBytes {
			return BadRequest("messages[%d]: preview of %d bytes, at most %d", i, len(*m.Preview), MaxPreviewBytes)
		}
		rec.Value = []byte(*m.Preview)
	}
	for _, h := range r.Headers() {
		rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	return nil
}

// inspectPublished checks every record of a publish (envelope.Inspect) and
// returns the references to claim with the messages carrying them.
func inspectPublished(t *node.Topic, records []kmsg.Record) ([]ref.Ref, []int32, error) {
	var refs []ref.Ref
	var at []int32
	for i := range records {
		r, ok, err := envelope.Inspect(&records[i], t.Settings.MaxInlineBytes)
		if err != nil {
			ae := httpStatusFor(err)
			return nil, nil, &APIError{Status: ae.Status, Code: ae.Code, Message: fmt.Sprintf("messages[%d]: %s", i, ae.Message)}
		}
		if ok {
			refs = append(refs, r)
			at = append(at, int32(i))
		}
	}
	return refs, at, nil
}

// claimPublished claims the references of a publish for the topic's
// tenant, each at the partition its message's batch goes to.
func (b *Server) claimPublished(ctx context.Context, t *node.Topic, refs []ref.Ref, at []int32, batches []*publishBatch) error {
	partOf := make(map[int]int32)
	for _, pb := range batches {
		for _, i := range pb.msgs {
			partOf[i] = pb.partition
		}
	}
	sites := make([]node.RefSite, len(refs))
	for k, i := range at {
		sites[k] = node.RefSite{TopicID: t.Meta.ID, Topic: t.Meta.Name, Partition: partOf[int(i)]}
	}
	start := b.Now()
	err := envelope.Claim(ctx, b.Cfg.Refs, envelope.Tenant(t.Meta.Name), refs, at, sites)
	if err == nil {
		for _, pb := range batches { // appended within the bound, or never
			if len(refs) > 0 {
				pb.notAfter = start.Add(envelope.AppendWithin)
			}
		}
		return nil
	}
	ae := httpStatusFor(err)
	if re := envelope.RecordErrors(err); len(re) > 0 {
		return &APIError{Status: ae.Status, Code: ae.Code, Message: fmt.Sprintf("messages[%d]: %s", re[0].RelativeOffset, *re[0].ErrorMessage)}
	}
	return err
}

// produceCopy appends rec, a copy the broker writes itself (a retry or
// dead-letter copy, a redrive), to partition p of topic, acknowledged like
// a publish, and returns its offset. Its references are claimed there
// first, as a publish's are; a refusal is an *APIError naming the copy
// (4xx: refused for good; 5xx: retriable) and nothing is written.
func (b *Server) produceCopy(ctx context.Context, topic string, p int32, rec queueapi.Record) (int64, error) {
	t := b.LookupTopic(topic)
	if t == nil {
		return 0, fmt.Errorf("%w: %s", node.ErrUnknownTopic, topic)
	}
	recs := []kmsg.Record{rec.Kafka()}
	pb := &publishBatch{partition: p, msgs: []int{0}, recs: recs, raw: node.EncodeBatch(recs, []int{0}, -1, -1, -1)}
	var err error
	if len(pb.raw) > int(t.Settings.MaxMessageBytes) {
		err = fmt.Errorf("%w: %d bytes, over max.message.bytes %d", node.ErrMessageTooLarge, len(pb.raw), t.Settings.MaxMessageBytes)
	}
	var refs []ref.Ref
	var at []int32
	if err == nil {
		refs, at, err = inspectPublished(t, recs)
	}
	if err == nil {
		err = b.PrecheckAppend(topic)
	}
	if err == nil {
		err = b.claimPublished(ctx, t, refs, at, []*publishBatch{pb})
	}
	if err != nil {
		ae := httpStatusFor(err)
		return 0, &APIError{Status: ae.Status, Code: ae.Code,
			Message: fmt.Sprintf("the copy to %s-%d is not written: %s", topic, p, strings.TrimPrefix(ae.Message, "messages[0]: "))}
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	res := b.appendPublished(ctx, t, []*publishBatch{pb}, 1, false)[0]
	if res.Status != "ok" && res.Status != "duplicate" {
		return 0, fmt.Errorf("write to %s-%d: %s: %s", topic, p, res.Status, res.Error)
	}
	return res.Offset, nil
}
