package queueapi

// This file owns GET /v1/topics/{topic}/messages: the records of one
// partition of a topic (a dead-letter topic, typically) from an offset on,
// each with its sluice.retry.* history parsed (queue.Parse).
//
//	GET /v1/topics/{dlq}/messages?partition=0&offset=<from>&limit=100
//	→ 200 {topic, partition, log_start, log_end, next_offset,
//	       messages: [{offset, timestamp_ms, message_key | key_base64,
//	                   message_id, headers, payload_base64,
//	                   history?: {source_topic, source_partition, source_offset,
//	                              group, attempts, error_class, last_error,
//	                              first_seen_ms, dead_reason, due_ms,
//	                              failures: [{at_ms, error_class, error}]},
//	                   history_error?}]}
//
// offset defaults to the partition's log start (and an offset below it
// reads from it); a page ends at limit records (1..1000, default 100) or
// at the log end; next_offset is where the next page starts (log_end when
// this one reached it). A record without retry headers has no history; a
// malformed set is reported in history_error, never a failure of the page.
//
// Invariant: the handler only reads (READ on the topic, routes.go), and a
// page's records are consecutive in the partition's log from its start.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// Dead-letter listing limits.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	listReadBytes    = 1 << 20
)

// Failure is one failed delivery of a listed record.
type Failure struct {
	AtMs       int64  `json:"at_ms"`
	ErrorClass string `json:"error_class"`
	Error      string `json:"error"`
}

// History is a listed record's parsed sluice.retry.* headers.
type History struct {
	SourceTopic     string    `json:"source_topic"`
	SourcePartition int32     `json:"source_partition"`
	SourceOffset    int64     `json:"source_offset"`
	Group           string    `json:"group"`
	Attempts        int       `json:"attempts"`
	ErrorClass      string    `json:"error_class"`
	LastError       string    `json:"last_error"`
	FirstSeenMs     int64     `json:"first_seen_ms"`
	DeadReason      string    `json:"dead_reason,omitempty"`
	DueMs           int64     `json:"due_ms"`
	Failures        []Failure `json:"failures"`
}

// Listed is one listed record.
type Listed struct {
	Offset        int64             `json:"offset"`
	TimestampMs   int64             `json:"timestamp_ms"`
	MessageKey    *string           `json:"message_key,omitempty"`
	KeyBase64     *string           `json:"key_base64,omitempty"`
	MessageID     string            `json:"message_id,omitempty"`
	Headers       map[string]string `json:"headers"`
	PayloadBase64 string            `json:"payload_base64"`
	History       *History          `json:"history,omitempty"`
	HistoryError  string            `json:"history_error,omitempty"`
}

// Listing is the answer of GET /v1/topics/{topic}/messages.
type Listing struct {
	Topic      string   `json:"topic"`
	Partition  int32    `json:"partition"`
	LogStart   int64    `json:"log_start"`
	LogEnd     int64    `json:"log_end"`
	NextOffset int64    `json:"next_offset"`
	Messages   []Listed `json:"messages"`
}

// HandleList serves GET /v1/topics/{topic}/messages.
func (a *API) HandleList(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	num := func(key string, def, lo, hi int64) (int64, error) {
		s := q.Get(key)
		if s == "" {
			return def, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lo || v > hi {
			return 0, badRequest("%s=%q: want a whole number from %d to %d", key, s, lo, hi)
		}
		return v, nil
	}
	partition, err := num("partition", 0, 0, 1<<31-1)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	limit, err := num("limit", defaultListLimit, 1, maxListLimit)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	from, err := num("offset", -1, 0, 1<<62)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	_, parts, ok := a.be.Topic(topic)
	if !ok {
		a.be.WriteError(w, r, fmt.Errorf("%w: %s", node.ErrUnknownTopic, a.be.Show(r, topic)))
		return
	}
	if int32(partition) >= parts {
		a.be.WriteError(w, r, badRequest("partition %d: %s has %d partitions", partition, a.be.Show(r, topic), parts))
		return
	}
	tp := TP{topic, int32(partition)}
	out, err := a.list(r.Context(), tp, from, int(limit))
	if err != nil {
		a.log.Warn().Err(err).Str("topic", topic).Int64("partition", partition).Msg("list messages failed")
		a.be.WriteError(w, r, err)
		return
	}
	out.Topic = a.be.Show(r, topic)
	a.be.WriteJSON(w, http.StatusOK, out)
}

// list reads up to limit records of tp from from on (-1: the log start).
func (a *API) list(ctx context.Context, tp TP, from int64, limit int) (Listing, error) {
	start, end, err := a.be.Bounds(ctx, tp)
	if err != nil {
		return Listing{}, err
	}
	out := Listing{Partition: tp.Partition, LogStart: start, LogEnd: end, Messages: []Listed{}}
	next := max(from, start)
	for len(out.Messages) < limit && next < end {
		recs, err := a.be.Read(ctx, tp, next, listReadBytes)
		if err != nil {
			return Listing{}, err
		}
		progressed := false
		for _, rec := range recs {
			if rec.Offset < next || len(out.Messages) >= limit {
				continue
			}
			out.Messages = append(out.Messages, listed(rec))
			next, progressed = rec.Offset+1, true
		}
		if !progressed {
			break // nothing readable below end (aborted or compacted away)
		}
	}
	out.NextOffset = next
	return out, nil
}

func listed(rec Record) Listed {
	l := Listed{Offset: rec.Offset, TimestampMs: rec.TimestampMs, MessageID: rec.MessageID, Headers: map[string]string{},
		PayloadBase64: base64.StdEncoding.EncodeToString(rec.Value)}
	if rec.Key != nil {
		k := string(rec.Key)
		if utf8.ValidString(k) {
			l.MessageKey = &k
		} else {
			k = base64.StdEncoding.EncodeToString(rec.Key)
			l.KeyBase64 = &k
		}
	}
	for _, h := range rec.Headers {
		l.Headers[h.Key] = string(h.Value)
	}
	m, ok, err := queue.Parse(rec.Headers)
	switch {
	case err != nil:
		l.HistoryError = err.Error()
	case ok:
		last := m.Last()
		h := &History{SourceTopic: m.SourceTopic, SourcePartition: m.SourcePartition, SourceOffset: m.SourceOffset,
			Group: m.Group, Attempts: m.Attempt, ErrorClass: last.Class, LastError: last.Error,
			FirstSeenMs: m.FirstSeen.UnixMilli(), DeadReason: m.DeadReason, DueMs: m.Due.UnixMilli(), Failures: []Failure{}}
		for _, f := range m.History {
			h.Failures = append(h.Failures, Failure{AtMs: f.At.UnixMilli(), ErrorClass: f.Class, Error: f.Error})
		}
		l.History = h
	}
	return l
}
