package httpapi

// This file owns POST /v1/groups/{group}/messages:fetch: a group member
// reads one of its assigned partitions, from its group's committed offset
// (or the log start when nothing is committed) or from an explicit offset,
// long-polling on the high watermark for up to wait_ms. A fetch by a valid
// member of the current generation also counts as a heartbeat.
//
// Invariant: a fetch reads at most fetchBytes(max_bytes) bytes of batches:
// min(max_bytes, Config.FetchMaxBytes) and the tenant's fetch slice under a
// consumer_byte_rate (the first batch whole even if larger), and decodes
// them within the process-wide decompression slots (records.go).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/wire"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
)

type fetchRequest struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
	Topic      string `json:"topic"`
	Partition  *int32 `json:"partition"`
	Offset     *int64 `json:"offset"`
	MaxBytes   int    `json:"max_bytes"`
	WaitMs     int64  `json:"wait_ms"`
}

// fetchedMessage is one record as the API answers it (wire.Message).
type fetchedMessage = wire.Message

type fetchResponse struct {
	Messages      []fetchedMessage `json:"messages"`
	HighWatermark int64            `json:"high_watermark"`
	NextOffset    int64            `json:"next_offset"`
}

func (b *Server) httpFetch(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req fetchRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil && req.Topic == "" && req.Partition == nil && req.Offset == nil {
		b.queueFetch(w, r, groupID, req) // every assigned partition and due retries (queue.go)
		return
	}
	var resp fetchResponse
	if err == nil {
		resp, err = b.fetchHTTP(r.Context(), groupID, req)
	}
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (b *Server) fetchHTTP(ctx context.Context, groupID string, req fetchRequest) (fetchResponse, error) {
	switch {
	case req.MemberID == "" || req.Generation == nil:
		return fetchResponse{}, BadRequest("member_id and generation are required")
	case req.Partition == nil:
		return fetchResponse{}, BadRequest("partition is required")
	case req.MaxBytes < 0 || req.WaitMs < 0:
		return fetchResponse{}, BadRequest("max_bytes and wait_ms must not be negative")
	}
	t := b.LookupTopic(req.Topic)
	if t == nil || *req.Partition < 0 || int(*req.Partition) >= len(t.States) {
		return fetchResponse{}, fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, req.Topic, *req.Partition)
	}
	if err := b.coord.Heartbeat(groupID, req.MemberID, "", group.Generation(*req.Generation)); err != nil {
		return fetchResponse{}, err
	}
	if err := b.checkAssigned(groupID, req.MemberID, req.Topic, *req.Partition); err != nil {
		return fetchResponse{}, err
	}
	var from int64
	if req.Offset != nil {
		from = *req.Offset
	} else {
		tp := group.TopicPartition{Topic: req.Topic, Partition: *req.Partition}
		committed, err := b.coord.FetchOffsets(groupID, []group.TopicPartition{tp})
		if err != nil {
			return fetchResponse{}, err
		}
		o, ok := committed[tp]
		if !ok {
			start, err := b.partitionOffsetsOf(ctx, t, *req.Partition, internalOffsetsRequest{To: "earliest"})
			if err != nil {
				return fetchResponse{}, err
			}
			o.Offset = start.Offset
		}
		from = o.Offset
	}
	maxBytes := b.fetchBytes(ctx, req.MaxBytes)
	wait := min(time.Duration(req.WaitMs)*time.Millisecond, httpMaxFetchWait)
	resp, err := b.readAtLeader(ctx, t, *req.Partition, from, maxBytes, wait)
	if isCode(err, kerr.OffsetOutOfRange) {
		err = b.outOfRange(ctx, groupID, t, *req.Partition, from, err)
	}
	return resp, err
}

// fetchCapper is an admit stage that caps a fetch's bytes (QuotaAdmitter).
type fetchCapper interface {
	FetchCap(id auth.Identity) (int, bool)
}

// fetchBytes is how many bytes of batches a fetch asking for requested
// (0: the default) may read: at most httpMaxFetchBytes and FetchMaxBytes,
// and at most its tenant's fetch slice when the admit stage caps fetches.
func (b *Server) fetchBytes(ctx context.Context, requested int) int {
	n := requested
	if n == 0 {
		n = httpDefaultFetchBytes
	}
	n = min(n, httpMaxFetchBytes, int(b.Cfg.FetchMaxBytes))
	if c, ok := b.admit.(fetchCapper); ok {
		if id, ok := auth.IdentityFrom(ctx); ok {
			if limit, ok := c.FetchCap(id); ok {
				n = min(n, limit)
			}
		}
	}
	return n
}

// outOfRange rewrites an out-of-range read as a 410 that names the valid
// range and the call that moves the group's offset into it.
func (b *Server) outOfRange(ctx context.Context, groupID string, t *node.Topic, index int32, from int64, err error) error {
	rng, rerr := b.partitionOffsetsOf(ctx, t, index, internalOffsetsRequest{To: "earliest"})
	if rerr != nil {
		return err
	}
	return &APIError{Status: http.StatusGone, Code: kerr.OffsetOutOfRange.Message, Message: fmt.Sprintf(
		"offset %d of %s-%d is outside the readable range [%d, %d]; move the group there with "+
			`POST /v1/groups/%s/offsets:reset {"topic": %q, "partition": %d, "to": "earliest"} (or "latest")`,
		from, t.Meta.Name, index, rng.LogStart, rng.HighWatermark, groupID, t.Meta.Name, index)}
}

// isCode reports whether err carries the Kafka error code of ke, as an
// internal error or as another broker's answer.
func isCode(err error, ke *kerr.Error) bool {
	if err == nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code == ke.Message
	}
	return node.ErrorCode(err) == ke.Code
}

// checkAssigned fails unless the member's current assignment holds the
// partition.
func (b *Server) checkAssigned(groupID, memberID, topic string, partition int32) error {
	d, err := b.coord.DescribeGroup(groupID)
	if err != nil {
		return err
	}
	for _, m := range d.Members {
		if m.ID != memberID {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if len(m.Assignment) > 0 {
			if err := a.ReadFrom(m.Assignment); err != nil {
				return fmt.Errorf("decode assignment of %s: %w", memberID, err)
			}
		}
		for _, t := range a.Topics {
			if memberTopic(groupID, t.Topic) == topic && slices.Contains(t.Partitions, partition) {
				return nil
			}
		}
	}
	return &APIError{Status: http.StatusConflict, Code: "NOT_ASSIGNED",
		Message: fmt.Sprintf("%s-%d is not assigned to member %s in this generation; join again", topic, partition, memberID)}
}

// readMessages reads records from offset from, waiting up to wait for the
// high watermark to pass it.
func (b *Server) readMessages(ctx context.Context, p *partition.Partition, from int64, maxBytes int, wait time.Duration) (fetchResponse, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		hw, changed, err := b.Position(ctx, p, wal.Offset(from))
		if err != nil {
			return fetchResponse{}, err
		}
		if changed == nil || wait <= 0 {
			return b.decodeMessages(ctx, p, from, hw, maxBytes)
		}
		select {
		case <-changed:
		case <-timer.C:
			wait = 0
		case <-ctx.Done():
			return fetchResponse{}, ctx.Err()
		}
	}
}

func (b *Server) decodeMessages(ctx context.Context, p *partition.Partition, from int64, hw wal.Offset, maxBytes int) (fetchResponse, error) {
	resp := fetchResponse{Messages: []fetchedMessage{}, HighWatermark: int64(hw), NextOffset: from}
	data, _, err := b.Read(ctx, p, wal.Offset(from), maxBytes)
	if err != nil {
		return resp, err
	}
	b.M.BytesOut(p.Topic(), len(data))
	b.M.RecordsOutN(p.Topic(), node.CountRecords(data))
	return resp, appendMessages(&resp, p.Index(), data, from, hw)
}

// appendMessages decodes the stored batches in data into resp's messages
// (those at or above from and below hw, at most httpMaxMessagesPerPoll),
// skipping control batches, and moves resp.NextOffset past what it used.
func appendMessages(resp *fetchResponse, partition int32, data []byte, from int64, hw wal.Offset) error {
	for len(data) > 0 && len(resp.Messages) < httpMaxMessagesPerPoll {
		h, err := wal.ParseBatchHeader(data)
		if err != nil || h.Size() > len(data) {
			// err stays text: wrapping wal.ErrInvalidBatch would turn this
			// storage fault into the client's CorruptMessage (HTTP 400).
			return fmt.Errorf("%w: stored batch at %d: %v", node.ErrStorage, resp.NextOffset, err) //nolint:errorlint // see above
		}
		if h.Attributes&node.AttrControl != 0 {
			// A control batch (a new leader's epoch-start record) is no
			// message: skipped, as Kafka clients skip it, and passed.
			if next := int64(h.LastOffset()) + 1; next > resp.NextOffset && next <= int64(hw) {
				resp.NextOffset = next
			}
			data = data[h.Size():]
			continue
		}
		err = node.EachRecord(data[:h.Size()], func(off, ts int64, rec *kmsg.Record) bool {
			if off < from {
				return true
			}
			if off >= int64(hw) || len(resp.Messages) == httpMaxMessagesPerPoll {
				return false
			}
			resp.Messages = append(resp.Messages, toFetchedMessage(partition, off, ts, rec))
			resp.NextOffset = off + 1
			return true
		})
		if err != nil {
			return fmt.Errorf("%w: %w", node.ErrStorage, err)
		}
		data = data[h.Size():]
	}
	return nil
}

func toFetchedMessage(partition int32, off, ts int64, rec *kmsg.Record) fetchedMessage {
	hs := make([]wire.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = wire.Header{Key: h.Key, Value: h.Value}
	}
	return wire.NewMessage(partition, off, ts, rec.Key, rec.Value, hs)
}
