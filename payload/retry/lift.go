package retry

// This file owns the Consumer's own way to lift a strict pause (doc.go,
// "Strict topics"): Resume and Skip do locally what keys:resume and
// keys:skip do over HTTP.
//
// Invariants:
//   - A pause whose record is handed out (retried in place, not yet
//     acked or nacked) is not lifted: the record would be in flight twice.
//   - Skip's dead letter is acknowledged before the record is settled; a
//     failed write leaves the pause as it was, and so does a pause that
//     changed during the write (Skip then reports it).
//   - A lifted pause is committed before Skip returns, and by the next
//     Poll or Commit after Resume.

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/queue"
)

// ErrNotPaused refuses Resume or Skip of a scope this consumer holds no
// pause of (not assigned, never paused, or lifted already).
var ErrNotPaused = errors.New("retry: no pause of that key on this consumer")

// ErrHandedOut refuses Resume or Skip of a pause whose record the last
// Poll handed out again: ack it (the next Poll) or nack it first.
var ErrHandedOut = errors.New("retry: the paused record is handed out; ack or nack it first")

// pauseOf finds the pause of key (any key on per-partition-strict) of a
// strict partition; mu is held.
func (c *Consumer) pauseOf(topic string, partition int32, key []byte) (*strictPart, string, queue.Pause, error) {
	sp := c.strict[tp{topic, partition}]
	if sp == nil || sp.lane == nil {
		return nil, "", queue.Pause{}, fmt.Errorf("%w: %s-%d is not an assigned strict partition", ErrNotPaused, topic, partition)
	}
	scope := queue.ScopeOf(sp.order, key)
	p, ok := sp.lane.Paused(scope)
	if !ok {
		return nil, "", queue.Pause{}, fmt.Errorf("%w: %s-%d", ErrNotPaused, topic, partition)
	}
	if _, busy := sp.retrying[scope]; busy {
		return nil, "", queue.Pause{}, fmt.Errorf("%w: %s-%d offset %d", ErrHandedOut, topic, partition, p.First)
	}
	return sp, scope, p, nil
}

// Resume lifts the pause of key on topic's partition (the whole
// partition's on per-partition-strict, whatever key), as keys:resume
// does: the failed record is handed out again by the next Poll, as
// attempt 1, and the key's later records follow it in order. The state is
// committed by the next Poll or Commit.
func (c *Consumer) Resume(topic string, partition int32, key []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sp, scope, p, err := c.pauseOf(topic, partition, key)
	if err != nil {
		return err
	}
	if _, err := sp.lane.Resume(scope); err != nil {
		return err
	}
	delete(sp.hist, p.First)
	sp.dirty = true
	return nil
}

// Skip moves the failed record of key's pause on topic's partition to the
// dead-letter topic and lifts the pause, as keys:skip does: the key's
// later records follow in order. The dead letter carries every failure of
// the record this consumer saw (failures before a restart only as the
// pause's start and class: their count when the pause still had one, else
// one); its dead reason is "skipped". The record must have been read since
// the pause was restored (a Poll after a restart reads it); the new state
// is committed before Skip returns. The Result names the dead letter.
func (c *Consumer) Skip(ctx context.Context, topic string, partition int32, key []byte) (Result, error) {
	ct, ok := c.contracts[topic]
	if !ok || !ct.IsStrict() {
		return Result{}, fmt.Errorf("retry: %s is not a strict source topic of this consumer", topic)
	}
	dest := ct.DeadLetterTopic(topic)
	if dest == topic {
		return Result{}, fmt.Errorf("retry: dead.letter.topic of %s is the topic itself", topic)
	}
	now := c.now()
	c.mu.Lock()
	sp, scope, p, err := c.pauseOf(topic, partition, key)
	if err != nil {
		c.mu.Unlock()
		return Result{}, err
	}
	rec := sp.recs[p.First]
	if rec == nil && len(sp.backlog) > 0 && sp.backlog[0].Offset == p.First {
		rec = sp.backlog[0]
	}
	if rec == nil {
		c.mu.Unlock()
		return Result{}, fmt.Errorf("retry: %s-%d offset %d is not read yet since the pause was restored; poll first", topic, partition, p.First)
	}
	hist := append([]queue.Failure(nil), sp.hist[p.First]...)
	class := p.Class
	if class == "" {
		class = queue.ClassTransient
	}
	for len(hist) < max(p.Attempts, 1) { // failures before a restart
		hist = append([]queue.Failure{{At: p.Since, Class: class, Error: restartedError}}, hist...)
	}
	c.mu.Unlock()

	m := queue.Meta{SourceTopic: topic, SourcePartition: partition, SourceOffset: p.First, Group: c.nacker.Group,
		FirstSeen: hist[0].At, Attempt: len(hist), History: hist, Tier: -1, Due: now, DeadReason: queue.DeadReasonSkipped}
	cp, err := c.nacker.write(ctx, rec, m, dest, now)
	if err != nil {
		return Result{}, err
	}
	res := Result{Outcome: queue.DeadLetter, Topic: dest, Partition: cp.Partition, Offset: cp.Offset, Due: now, Meta: m}
	c.mu.Lock()
	lifted := false
	if cur, ok := sp.lane.Paused(scope); c.strict[tp{topic, partition}] == sp && ok && cur.First == p.First {
		if _, busy := sp.retrying[scope]; !busy {
			if _, _, err := sp.lane.Skip(scope); err == nil {
				delete(sp.recs, p.First)
				delete(sp.hist, p.First)
				sp.dirty, lifted = true, true
			}
		}
	}
	c.mu.Unlock()
	if !lifted {
		// Lifted meanwhile (keys:resume, a rebalance) or handed out again
		// at its due time: the dead letter stays, a duplicate, never a loss.
		return res, fmt.Errorf("retry: the pause of %s-%d offset %d changed during Skip; it is not skipped (dead letter %s-%d offset %d written)",
			topic, partition, p.First, dest, cp.Partition, cp.Offset)
	}
	return res, c.syncStrict(ctx, true)
}
