package httpapi

// This file owns HTTP publishing: POST /v1/topics (create a topic),
// POST /v1/producers (an idempotent producer id) and
// POST /v1/topics/{topic}/messages:publish.
//
// Keys choose partitions with Kafka's murmur2 partitioner (franz-go's
// implementation), so a key lands on the same partition whichever protocol
// published it. A message_id travels in the record header "message_id".
// Publishes are acknowledged after the fsync, like acks=all.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/wire"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
)

// MessageIDHeader is the record header that carries an HTTP message_id.
const MessageIDHeader = wire.MessageIDHeader

type createTopicRequest struct {
	Name              string            `json:"name"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

func (b *Server) httpCreateTopic(w http.ResponseWriter, r *http.Request) {
	var req createTopicRequest
	if err := decodeJSON(w, r, &req); err != nil {
		b.writeError(w, r, err)
		return
	}
	if req.Partitions == 0 {
		req.Partitions = -1
	}
	if req.ReplicationFactor == 0 {
		req.ReplicationFactor = -1
	}
	t, err := b.CreateTopic(r.Context(), req.Name, req.Partitions, req.ReplicationFactor, req.Configs, false)
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"name": scopeFrom(r.Context()).name(t.Name), "topic_id": node.UUIDString(t.ID), "partitions": t.Partitions,
		"replication_factor": t.ReplicationFactor, "configs": t.Configs,
	})
}

func (b *Server) httpInitProducer(w http.ResponseWriter, r *http.Request) {
	id, err := b.NextProducerID(r.Context())
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"producer_id": id, "producer_epoch": 0})
}

type PublishRequest struct {
	Messages      []publishMessage `json:"messages"`
	ProducerID    *int64           `json:"producer_id"`
	ProducerEpoch *int16           `json:"producer_epoch"`
}

type publishMessage struct {
	MessageKey    *string           `json:"message_key"`
	MessageID     string            `json:"message_id"`
	Headers       map[string]string `json:"headers"`
	Payload       *string           `json:"payload"`
	PayloadBase64 *string           `json:"payload_base64"`
	Partition     *int32            `json:"partition"`
	Sequence      *int32            `json:"sequence"`
	TimestampMs   *int64            `json:"timestamp_ms"`
	// ObjectRef publishes an envelope of an uploaded object instead of a
	// payload, with Preview (at most 1 KiB) as its value (http_objref.go).
	ObjectRef *ObjectRef `json:"object_ref"`
	Preview   *string    `json:"preview"`
}

type publishResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Status    string `json:"status"` // "ok", "duplicate", or an error code
	Error     string `json:"error,omitempty"`
}

// publishBatch is one record batch headed for one partition, and the
// indexes of the request's messages in it.
type publishBatch struct {
	partition int32
	msgs      []int
	recs      []kmsg.Record // the request's records, by message index
	raw       []byte
	count     int       // records in raw when msgs is not set (a forwarded batch)
	notAfter  time.Time // its references' claims bound its append (claimPublished)
}

// records is the number of records in the batch.
func (pb *publishBatch) records() int { return max(len(pb.msgs), pb.count) }

func (b *Server) httpPublish(w http.ResponseWriter, r *http.Request) {
	var req PublishRequest
	if err := decodeJSON(w, r, &req); err != nil {
		b.writeError(w, r, err)
		return
	}
	topicName := r.PathValue("topic")
	t := b.LookupTopic(topicName)
	if t == nil {
		b.writeError(w, r, fmt.Errorf("%w: %s", node.ErrUnknownTopic, topicName))
		return
	}
	batches, err := b.buildPublishBatches(t, &req)
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	refs, at, err := inspectPublished(t, batches[0].recs)
	if err != nil {
		b.writeError(w, r, err) // the whole request: 413 or 400 (http_objref.go)
		return
	}
	if err := b.PrecheckAppend(topicName); err != nil {
		b.writeError(w, r, err) // the whole request: 507 (quota_status.go)
		return
	}
	if err := b.claimPublished(r.Context(), t, refs, at, batches); err != nil {
		b.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), publishTimeout)
	defer cancel()
	results := b.appendPublished(ctx, t, batches, len(req.Messages), req.ProducerID != nil)
	status := http.StatusOK
	s := scopeFrom(r.Context())
	for i, res := range results {
		if res.Status != "ok" && res.Status != "duplicate" {
			status = http.StatusMultiStatus
		}
		results[i].Error = s.message(res.Error)
	}
	writeJSON(w, status, map[string]any{"results": results})
}

// buildPublishBatches validates the messages, picks their partitions and
// encodes the record batches: one per partition, or one per message when
// the publisher is an idempotent producer (each carries its own sequence).
func (b *Server) buildPublishBatches(t *node.Topic, req *PublishRequest) ([]*publishBatch, error) {
	if len(req.Messages) == 0 {
		return nil, BadRequest("messages must not be empty")
	}
	idempotent := req.ProducerID != nil
	if idempotent && (req.ProducerEpoch == nil || *req.ProducerID < 0 || *req.ProducerEpoch < 0) {
		return nil, BadRequest("producer_id needs a non-negative producer_epoch")
	}
	n := int32(len(t.States))
	part := kgo.StickyKeyPartitioner(nil).ForTopic(t.Meta.Name)
	now := time.Now().UnixMilli()
	byPartition := map[int32]*publishBatch{}
	var out []*publishBatch
	records := make([]kmsg.Record, len(req.Messages))
	for i, m := range req.Messages {
		rec, err := recordFromMessage(i, m, now)
		if err != nil {
			return nil, err
		}
		records[i] = rec
		p := int32(0)
		switch {
		case m.Partition != nil:
			if *m.Partition < 0 || *m.Partition >= n {
				return nil, fmt.Errorf("%w: messages[%d]: partition %d of %d", node.ErrUnknownTopic, i, *m.Partition, n)
			}
			p = *m.Partition
		case m.MessageKey != nil:
			p = int32(part.Partition(&kgo.Record{Key: []byte(*m.MessageKey)}, int(n)))
		default:
			p = int32(b.rrPublish.Add(1) % uint64(n))
		}
		if idempotent {
			if m.Sequence == nil || *m.Sequence < 0 {
				return nil, BadRequest("messages[%d]: an idempotent publish needs a non-negative sequence per message", i)
			}
			out = append(out, &publishBatch{partition: p, msgs: []int{i}})
			continue
		}
		pb := byPartition[p]
		if pb == nil {
			pb = &publishBatch{partition: p}
			byPartition[p] = pb
			out = append(out, pb)
		}
		pb.msgs = append(pb.msgs, i)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].partition < out[j].partition })
	for _, pb := range out {
		pid, epoch, seq := int64(-1), int16(-1), int32(-1)
		if idempotent {
			pid, epoch, seq = *req.ProducerID, *req.ProducerEpoch, *req.Messages[pb.msgs[0]].Sequence
		}
		pb.raw = node.EncodeBatch(records, pb.msgs, pid, epoch, seq)
		pb.recs = records
		if len(pb.raw) > int(t.Settings.MaxMessageBytes) {
			return nil, fmt.Errorf("%w: %d bytes for partition %d exceed max.message.bytes %d; payloads over the limit need object references",
				node.ErrMessageTooLarge, len(pb.raw), pb.partition, t.Settings.MaxMessageBytes)
		}
	}
	return out, nil
}

func recordFromMessage(i int, m publishMessage, now int64) (rec kmsg.Record, err error) {
	switch {
	case m.Payload != nil && m.PayloadBase64 != nil:
		return rec, BadRequest("messages[%d]: give payload or payload_base64, not both", i)
	case m.Payload != nil:
		rec.Value = []byte(*m.Payload)
	case m.PayloadBase64 != nil:
		v, err := base64.StdEncoding.DecodeString(*m.PayloadBase64)
		if err != nil {
			return rec, BadRequest("messages[%d]: payload_base64 is not base64: %v", i, err)
		}
		rec.Value = v
	}
	switch {
	case m.ObjectRef != nil:
		defer func() { // the envelope's headers after the message's own
			if err == nil {
				err = envelopeRecord(i, m, &rec)
			}
		}()
	case m.Preview != nil:
		return rec, BadRequest("messages[%d]: preview goes with object_ref", i)
	}
	if m.MessageKey != nil {
		rec.Key = []byte(*m.MessageKey)
	}
	ts := now
	if m.TimestampMs != nil {
		if *m.TimestampMs < 0 {
			return rec, BadRequest("messages[%d]: timestamp_ms must not be negative", i)
		}
		ts = *m.TimestampMs
	}
	rec.TimestampDelta64 = ts // made relative to the batch in node.EncodeBatch
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rec.Headers = append(rec.Headers, kmsg.Header{Key: k, Value: []byte(m.Headers[k])})
	}
	if m.MessageID != "" {
		rec.Headers = append(rec.Headers, kmsg.Header{Key: MessageIDHeader, Value: []byte(m.MessageID)})
	}
	return rec, nil
}

// appendPublished appends or forwards each partition's batches, the
// partitions concurrently and one partition's batches in order, and
// collects per-message results once every batch is acknowledged or failed.
func (b *Server) appendPublished(ctx context.Context, t *node.Topic, batches []*publishBatch, n int, idempotent bool) []publishResult {
	results := make([]publishResult, n)
	var parts [][]*publishBatch
	at := map[int32]int{}
	for _, pb := range batches {
		i, ok := at[pb.partition]
		if !ok {
			i = len(parts)
			at[pb.partition] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], pb)
	}
	var wg sync.WaitGroup
	for _, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.publishPart(ctx, t, part, idempotent, results)
		}()
	}
	wg.Wait()
	return results
}

// publishPart appends one partition's batches here when this broker leads
// the partition, and otherwise forwards them to its leader. When the
// leadership moves between the check and the append, the batches refused
// before they reached the log (the last ones of the part, refusedMoved)
// are forwarded to the new leader within ctx; one that reached the log is
// never forwarded, since a non-idempotent copy could not be told apart.
func (b *Server) publishPart(ctx context.Context, t *node.Topic, part []*publishBatch, idempotent bool, results []publishResult) {
	if b.Leads(t, part[0].partition) {
		outs := b.appendLocal(ctx, t, part)
		kept := len(part)
		for kept > 0 && refusedMoved(outs[kept-1].Err) && ctx.Err() == nil {
			kept--
		}
		for j := range kept {
			b.fillPublish(part[j], outs[j], results)
		}
		if part = part[kept:]; len(part) == 0 {
			return
		}
	}
	if idempotent {
		for j, out := range b.forwardBatches(ctx, t, part) {
			b.fillPublish(part[j], out, results)
		}
		return
	}
	for _, pb := range part {
		b.forwardRecords(ctx, t, pb, results)
	}
}

// refusedMoved reports whether a local append was refused because this
// broker no longer leads the partition, before anything reached the log.
func refusedMoved(err error) bool {
	return errors.Is(err, partition.ErrNotAppended) && errors.Is(err, partition.ErrNotLeader)
}

// appendLocal enqueues the batches of one partition in order on the local
// replica and waits for each to be acknowledged or to fail.
func (b *Server) appendLocal(ctx context.Context, t *node.Topic, pbs []*publishBatch) []partition.AppendResult {
	out := make([]partition.AppendResult, len(pbs))
	waits := make([]<-chan partition.AppendResult, len(pbs))
	for j, pb := range pbs {
		h, err := node.ValidateBatch(pb.raw, t.Settings.MaxMessageBytes)
		if err == nil {
			err = b.CheckAppend(t.Meta.Name)
		}
		var p *partition.Partition
		if err == nil {
			p, err = t.Local(pb.partition)
		}
		if err == nil {
			ar := partition.NewAppendRequest(pb.raw, h, true).NotAfter(pb.notAfter)
			if err = p.Enqueue(ar); err == nil {
				b.M.RecordsIn(t.Meta.Name, len(pb.raw), pb.records())
				waits[j] = ar.Result()
				continue
			}
		}
		out[j].Err = partition.NotAppended(err) // never enqueued
	}
	for j, w := range waits {
		if w == nil {
			continue
		}
		select {
		case out[j] = <-w:
		case <-ctx.Done():
			out[j].Err = ctx.Err()
		}
	}
	return out
}

// fillPublish writes one batch's outcome into its messages' results.
func (b *Server) fillPublish(pb *publishBatch, res partition.AppendResult, results []publishResult) {
	if res.Err != nil {
		b.failPublish(pb, res.Err, results)
		return
	}
	status := "ok"
	if res.Dup {
		status = "duplicate"
	}
	for j, i := range pb.msgs {
		results[i] = publishResult{Partition: pb.partition, Offset: int64(res.Base) + int64(j), Status: status}
	}
}

// failPublish marks every message of pb failed with err.
func (b *Server) failPublish(pb *publishBatch, err error, results []publishResult) {
	code := httpStatusFor(err).Code
	for _, i := range pb.msgs {
		results[i] = publishResult{Partition: pb.partition, Offset: -1, Status: code, Error: err.Error()}
	}
}
