package queueapi

// This file owns the queue fetch: every assigned partition and the due
// records of its retry tiers, from the trackers' delivered positions,
// long-polling up to wait_ms.
//
// Invariant: a tier's record is handed out only when its due time has
// passed; the read of a tier stops at the first record not yet due.

import (
	"context"
	"net/http"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/wire"

	"github.com/sluice-mq/sluice/queue"
)

// Bounds of a fetch.
const (
	defaultFetchBytes = 1 << 20
	maxFetchBytes     = 64 << 20
	maxFetchWait      = 30 * time.Second
	maxMessages       = 10000
	// pollInterval is how often a waiting fetch looks again (part 2: wake
	// on appends instead).
	pollInterval = 50 * time.Millisecond
)

// FetchRequest is a queue fetch: a group fetch with no topic or partition.
type FetchRequest struct {
	MemberID   string
	Generation *int32
	MaxBytes   int
	WaitMs     int64
}

// Message is one delivered record.
type Message struct {
	Topic string `json:"topic"`
	wire.Message
	Attempt     int    `json:"attempt"`
	SourceTopic string `json:"source_topic,omitempty"` // a retry tier's record: its source
}

// FetchResponse is a queue fetch's answer.
type FetchResponse struct {
	Messages []Message `json:"messages"`
}

// Fetch serves a queue fetch of groupID.
func (a *API) Fetch(w http.ResponseWriter, r *http.Request, groupID string, req FetchRequest) {
	resp, err := a.fetch(r, groupID, req)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	a.be.WriteJSON(w, http.StatusOK, resp)
}

func (a *API) fetch(r *http.Request, groupID string, req FetchRequest) (FetchResponse, error) {
	if req.MaxBytes < 0 || req.WaitMs < 0 {
		return FetchResponse{}, badRequest("max_bytes and wait_ms must not be negative")
	}
	maxBytes := req.MaxBytes
	if maxBytes == 0 {
		maxBytes = defaultFetchBytes
	}
	maxBytes = min(maxBytes, maxFetchBytes)
	deadline := a.now().Add(min(time.Duration(req.WaitMs)*time.Millisecond, maxFetchWait))
	ctx := r.Context()
	for {
		gs, assigned, err := a.member(groupID, req.MemberID, req.Generation)
		if err != nil {
			return FetchResponse{}, err
		}
		msgs, nextDue, err := a.round(ctx, r, gs, groupID, assigned, maxBytes)
		gs.mu.Unlock()
		if err != nil || len(msgs) > 0 {
			return FetchResponse{Messages: msgs}, err
		}
		now := a.now()
		if !now.Before(deadline) {
			return FetchResponse{Messages: []Message{}}, nil
		}
		wait := min(pollInterval, deadline.Sub(now))
		if !nextDue.IsZero() {
			wait = max(min(wait, nextDue.Sub(now)), time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return FetchResponse{}, ctx.Err()
		case <-t.C:
		}
	}
}

// round reads each partition the member reads once, without waiting;
// nextDue is the earliest due time of a tier record held back.
func (a *API) round(ctx context.Context, r *http.Request, gs *groupState, groupID string, assigned map[string][]int32, budget int) ([]Message, time.Time, error) {
	now := a.now()
	msgs := []Message{}
	var nextDue time.Time
	for _, rp := range a.sourceParts(groupID, assigned) {
		if budget <= 0 || len(msgs) >= maxMessages {
			break
		}
		pt, err := a.partOf(ctx, gs, groupID, rp.tp, rp.p)
		if err != nil {
			return nil, time.Time{}, err
		}
		l := pt.lane
		l.SetTime(now)
		if exp := l.Expire(now, pt.visibility); len(exp) > 0 {
			a.log.Debug().Str("group", groupID).Str("topic", rp.tp.Topic).Int32("partition", rp.tp.Partition).
				Int("records", len(exp)).Msg("visibility timeout: deliveries neither acked nor nacked are made again")
		}
		// First the waiting records of resumed scopes, in their order:
		// each before any later record of its scope (queue.Lane).
		if ready := l.Ready(); len(ready) > 0 {
			want := make(map[int64]bool, len(ready))
			for _, o := range ready {
				want[o] = true
			}
			recs, err := a.be.Read(ctx, rp.tp, ready[0], budget)
			if err != nil {
				return nil, time.Time{}, err
			}
			for _, rec := range recs {
				if !want[rec.Offset] {
					continue
				}
				if err := l.Redeliver(rec.Offset); err != nil {
					return nil, time.Time{}, err
				}
				msgs = append(msgs, toMessage(r, a.be, rp.tp, rec))
				budget -= len(rec.Value) + len(rec.Key)
				if budget <= 0 || len(msgs) >= maxMessages {
					break
				}
			}
			if budget <= 0 || len(msgs) >= maxMessages {
				break
			}
		}
		if l.Room() <= 0 {
			continue
		}
		from := l.Next()
		recs, err := a.be.Read(ctx, rp.tp, from, budget)
		if err != nil {
			return nil, time.Time{}, err
		}
		for _, rec := range recs {
			if rec.Offset < l.Next() {
				continue
			}
			m := toMessage(r, a.be, rp.tp, rec)
			if pt.tier >= 0 {
				meta, ok, err := queue.Parse(rec.Headers)
				switch {
				case err != nil:
					// Never lost: delivered as it is, and a nack starts
					// its history again.
					a.log.Warn().Err(err).Str("topic", rp.tp.Topic).Int32("partition", rp.tp.Partition).
						Int64("offset", rec.Offset).Msg("retry record with malformed headers; delivered as a first attempt")
				case ok && meta.Due.After(now):
					if nextDue.IsZero() || meta.Due.Before(nextDue) {
						nextDue = meta.Due
					}
				case ok:
					m.Attempt = meta.Attempt + 1
					m.SourceTopic = a.be.Show(r, rp.p.source)
				}
				if err == nil && ok && meta.Due.After(now) {
					break // the first record not yet due ends the tier's read
				}
			}
			v, err := l.Offer(rec.Offset, rec.Key)
			if err != nil {
				return nil, time.Time{}, err
			}
			if v == queue.Stop {
				break
			}
			if v != queue.Deliver {
				continue // held back by a pause, or acknowledged before a restart
			}
			msgs = append(msgs, m)
			budget -= len(rec.Value) + len(rec.Key)
			if len(msgs) >= maxMessages || budget <= 0 {
				break
			}
		}
	}
	return msgs, nextDue, nil
}

func toMessage(r *http.Request, be Backend, tp TP, rec Record) Message {
	hs := make([]wire.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		hs[i] = wire.Header{Key: h.Key, Value: h.Value}
	}
	m := Message{Topic: be.Show(r, tp.Topic), Message: wire.NewMessage(tp.Partition, rec.Offset, rec.TimestampMs, rec.Key, rec.Value, hs), Attempt: 1}
	m.MessageID = rec.MessageID
	return m
}
