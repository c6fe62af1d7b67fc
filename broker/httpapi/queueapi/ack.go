package queueapi

// This file owns messages:ack and messages:nack.
//
// Invariant: a nacked record is acknowledged only after its copy (retry
// tier or dead-letter topic) is acknowledged by the replicas; a failed
// copy leaves the record outstanding (delivered again after a rebalance),
// so a nack never loses a record.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// Ref names a delivered record.
type Ref struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// AckRequest is the body of messages:ack.
type AckRequest struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
	Acks       []Ref  `json:"acks"`
}

// NackRef is one negative acknowledgement.
type NackRef struct {
	Ref
	ErrorClass string `json:"error_class"`
	Error      string `json:"error"`
}

// NackRequest is the body of messages:nack.
type NackRequest struct {
	MemberID   string    `json:"member_id"`
	Generation *int32    `json:"generation"`
	Nacks      []NackRef `json:"nacks"`
}

// Result is the outcome of one ack or nack.
type Result struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Status: ok (acked), retry, dead_letter, paused (a nack on a strict
	// topic: the key or partition is paused at this record),
	// not_delivered (not an outstanding delivery of this generation, or
	// withdrawn by a pause) or error (the copy or the pause failed; the
	// record stays outstanding).
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	ToTopic string `json:"to_topic,omitempty"` // nack: where the copy went
	DueMs   int64  `json:"due_ms,omitempty"`   // nack to a retry tier
	Attempt int    `json:"attempt,omitempty"`  // nack: deliveries failed so far
	// Withdrawn (a pause): later deliveries of the paused key or
	// partition, not to be processed; they come again after keys:resume,
	// in order.
	Withdrawn []int64 `json:"withdrawn,omitempty"`
}

// Committed is a partition's committed offset after a request.
type Committed struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Answer is the body of an ack or nack answer.
type Answer struct {
	Results   []Result    `json:"results"`
	Committed []Committed `json:"committed"`
}

// maxRefs bounds the acks or nacks of one request.
const maxRefs = 10000

// HandleAck serves POST /v1/groups/{group}/messages:ack.
func (a *API) HandleAck(w http.ResponseWriter, r *http.Request) {
	var req AckRequest
	if err := a.be.Decode(w, r, &req); err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	refs := make([]NackRef, len(req.Acks))
	for i, ref := range req.Acks {
		refs[i] = NackRef{Ref: ref}
	}
	a.settle(w, r, req.MemberID, req.Generation, refs, false)
}

// HandleNack serves POST /v1/groups/{group}/messages:nack.
func (a *API) HandleNack(w http.ResponseWriter, r *http.Request) {
	var req NackRequest
	if err := a.be.Decode(w, r, &req); err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	for i, n := range req.Nacks {
		if err := queue.ValidateClass(n.ErrorClass); err != nil {
			a.be.WriteError(w, r, badRequest("nacks[%d]: %v (transient, permanent or a class of the topic's retry.permanent.classes)", i, err))
			return
		}
	}
	a.settle(w, r, req.MemberID, req.Generation, req.Nacks, true)
}

// settle acks or nacks refs, then commits the offsets that moved.
func (a *API) settle(w http.ResponseWriter, r *http.Request, memberID string, gen *int32, refs []NackRef, nack bool) {
	groupID := r.PathValue("group")
	switch {
	case groupID == "":
		a.be.WriteError(w, r, badRequest("group id must not be empty"))
		return
	case len(refs) == 0 || len(refs) > maxRefs:
		a.be.WriteError(w, r, badRequest("give 1 to %d records", maxRefs))
		return
	}
	gs, assigned, err := a.member(groupID, memberID, gen)
	if err != nil {
		a.be.WriteError(w, r, err)
		return
	}
	defer gs.mu.Unlock()
	ctx := r.Context()
	moved := map[TP]bool{}
	touched := map[TP]*part{}
	results := make([]Result, len(refs))
	for i, ref := range refs {
		tp := TP{ref.Topic, ref.Partition}
		res := Result{Topic: a.be.Show(r, ref.Topic), Partition: ref.Partition, Offset: ref.Offset, Status: "ok"}
		pt := gs.parts[tp]
		switch {
		case pt == nil || !pt.lane.IsInFlight(ref.Offset) || !assignedTo(assigned, pt.source, ref.Partition):
			res.Status = "not_delivered"
			res.Error = fmt.Sprintf("%s-%d offset %d is not an outstanding delivery to this member in generation %d (or a pause withdrew it)", res.Topic, ref.Partition, ref.Offset, *gen)
		case nack && pt.lane.Order() != queue.OrderRelaxed:
			withdrawn, err := pt.lane.Nack(ref.Offset, a.now(), ref.ErrorClass)
			if err != nil {
				a.log.Warn().Err(err).Str("group", groupID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Int64("offset", ref.Offset).Msg("pause failed; the record stays outstanding")
				res.Status, res.Error = "error", err.Error()
			} else {
				res.Status, res.Withdrawn = "paused", withdrawn
				touched[tp] = pt
				a.log.Info().Str("group", groupID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Int64("offset", ref.Offset).Str("order", pt.lane.Order()).Int("withdrawn", len(withdrawn)).Msg("paused on a nack")
			}
		case nack:
			if err := a.nackOne(ctx, r, groupID, tp, pt, ref, &res); err != nil {
				a.log.Warn().Err(err).Str("group", groupID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
					Int64("offset", ref.Offset).Msg("nack failed; the record stays outstanding")
				res.Status, res.Error = "error", err.Error()
			}
		}
		if res.Status == "ok" || res.Status == "retry" || res.Status == "dead_letter" {
			if adv, err := pt.lane.Ack(ref.Offset); err != nil {
				res.Status, res.Error = "not_delivered", err.Error()
			} else {
				touched[tp] = pt
				if adv {
					moved[tp] = true
				}
			}
		}
		results[i] = res
	}
	ans := Answer{Results: results, Committed: []Committed{}}
	if len(touched) > 0 {
		commits, err := commitsOf(touched)
		if err == nil {
			err = a.be.Commit(ctx, groupID, memberID, *gen, commits)
		}
		if err != nil {
			// The settlements stay in the lanes; the next ack commits
			// them, or a new generation delivers them again. A lane
			// whose state an operator changed since (keys:resume or
			// keys:skip through another broker) is forgotten: the next
			// fetch loads the committed state, and delivers again what
			// these acks settled.
			if errors.Is(err, queue.ErrStaleState) {
				for tp := range touched {
					delete(gs.parts, tp)
				}
			}
			a.be.WriteError(w, r, err)
			return
		}
		for tp := range moved {
			ans.Committed = append(ans.Committed, Committed{a.be.Show(r, tp.Topic), tp.Partition, commits[tp].Offset})
		}
	}
	a.be.WriteJSON(w, http.StatusOK, ans)
}

// commitsOf is the commit of each lane.
func commitsOf(parts map[TP]*part) (map[TP]Commit, error) {
	out := make(map[TP]Commit, len(parts))
	for tp, pt := range parts {
		c, err := commitOf(pt.lane)
		if err != nil {
			return nil, fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, err)
		}
		out[tp] = c
	}
	return out, nil
}

// nackOne writes the copy of a nacked record where the contract sends it.
func (a *API) nackOne(ctx context.Context, r *http.Request, groupID string, tp TP, pt *part, ref NackRef, res *Result) error {
	rec, err := a.readOne(ctx, tp, ref.Offset)
	if err != nil {
		return err
	}
	c, srcParts, ok := a.contract(pt.source)
	if !ok {
		return fmt.Errorf("%w: source topic %s", node.ErrUnknownTopic, pt.source)
	}
	now := a.now()
	tenant, group := node.SplitName(groupID)
	_, srcLocal := node.SplitName(pt.source)
	m, isCopy, perr := queue.Parse(rec.Headers)
	if perr != nil {
		a.log.Warn().Err(perr).Str("topic", tp.Topic).Int64("offset", ref.Offset).Msg("nacked record has malformed retry headers; its history starts again")
	}
	if !isCopy || perr != nil {
		m = queue.Meta{SourceTopic: srcLocal, SourcePartition: tp.Partition, SourceOffset: ref.Offset, Group: group, FirstSeen: now}
	}
	m.Attempt++
	m.History = append(m.History, queue.Failure{At: now, Class: ref.ErrorClass, Error: queue.TruncateError(ref.Error)})
	d := c.Decide(m.Attempt, ref.ErrorClass, now, a.random)
	var dest string
	if d.Outcome == queue.Retry {
		m.Tier, m.Due, m.DeadReason = d.Tier, d.Due, ""
		dest = retryTopic(groupID, pt.source, d.Tier)
		res.Status, res.DueMs = "retry", d.Due.UnixMilli()
	} else {
		m.Tier, m.Due, m.DeadReason = -1, now, d.Reason
		dest = node.QualifyName(tenant, c.DeadLetterTopic(srcLocal))
		res.Status = "dead_letter"
		if dest == pt.source {
			return node.InvalidConfig("dead.letter.topic of %s is the topic itself", srcLocal)
		}
	}
	res.ToTopic, res.Attempt = a.be.Show(r, dest), m.Attempt
	if err := a.be.CreateTopic(ctx, dest, srcParts); err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	_, destParts, ok := a.be.Topic(dest)
	if !ok || destParts < 1 {
		return fmt.Errorf("%w: %s", node.ErrUnknownTopic, dest)
	}
	cp := Record{TimestampMs: now.UnixMilli(), Key: rec.Key, Value: rec.Value, MessageID: rec.MessageID,
		Headers: append(queue.WithoutRetryHeaders(rec.Headers), m.Headers()...)}
	if err := a.be.Produce(ctx, TP{dest, tp.Partition % destParts}, cp); err != nil {
		return err
	}
	if d.Outcome == queue.Retry {
		a.copies.retries.WithLabelValues(pt.source).Inc()
	} else {
		a.copies.deadLetters.WithLabelValues(pt.source).Inc()
	}
	return nil
}

// readOne reads the record at off.
func (a *API) readOne(ctx context.Context, tp TP, off int64) (Record, error) {
	recs, err := a.be.Read(ctx, tp, off, 1)
	if err != nil {
		return Record{}, err
	}
	for _, rec := range recs {
		if rec.Offset == off {
			return rec, nil
		}
	}
	// Nothing at off: below the log start it is gone; at or above it, the
	// leader cannot serve it yet (a new leader whose high watermark has not
	// reached its log end after a failover): retriable.
	if start, end, err := a.be.Bounds(ctx, tp); err == nil && off >= start {
		return Record{}, &Error{Status: http.StatusServiceUnavailable, Code: "offset_not_available",
			Message: fmt.Sprintf("%s-%d offset %d is not readable at the partition's leader yet (high watermark %d); retry",
				tp.Topic, tp.Partition, off, end)}
	}
	return Record{}, fmt.Errorf("%w: %s-%d offset %d is no longer in the log", errNotDelivered, tp.Topic, tp.Partition, off)
}
