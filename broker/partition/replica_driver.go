package partition

// This file owns the driver of a partition's replica core (broker/replica):
// carrying out each Ready on the log (truncate, persist the fenced epoch,
// append, make durable), routing the core's messages (fetches to the
// follower fetcher, fetch answers to the waiting replica Fetch, fence
// answers and complaints to the controller), and feeding it the partition
// state, ticks and messages from other brokers. It keeps doc.go's
// invariants on the order of a Ready, on fence answers and on replica fetch
// answers read off the owner goroutine.
//
// Everything here runs on the owner goroutine except Step, SetState,
// SetMinISR, Tick, TakeFetch, ReturnFetch, ReplicaFetch, ReadFetchAnswer and
// ReplicaStatus, which hand work to it through ctl or read what it
// publishes (atomics, fetchMu).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// The replica core's timeouts, in ticks (Tick). The broker ticks every
// 50 ms; the durations below assume it.
const (
	// replicaLagTicks: a follower that has not fetched for this long (3 s)
	// leaves the in-sync set; with fewer in-sync replicas than
	// min.insync.replicas, produce gets NOT_ENOUGH_REPLICAS at once.
	replicaLagTicks = 60
	// replicaFetchWaitTicks: how long (500 ms) a leader holds a follower's
	// fetch at its log end.
	replicaFetchWaitTicks = 10
	// replicaRetryTicks: a follower's pause (200 ms) after a failed fetch,
	// and the resend interval of complaints.
	replicaRetryTicks = 4
	// replicaUnreachableTicks: a follower that cannot fetch for this long
	// (2 s) tells the controller its leader is unreachable.
	replicaUnreachableTicks = 40
)

// fetchWaitKey pairs a replica fetch with its answer.
type fetchWaitKey struct {
	from replica.NodeID
	seq  uint64
}

// FetchAnswer is the core's answer to a replica fetch (ReplicaFetch), with
// the number of truncations the log had seen when the core decided it.
type FetchAnswer struct {
	Msg         replica.Message
	truncations uint64
}

// coreEpochs converts the wal's epoch chain to the core's.
func coreEpochs(es []wal.EpochEntry) []replica.EpochEntry {
	out := make([]replica.EpochEntry, len(es))
	for i, e := range es {
		out[i] = replica.EpochEntry{Epoch: e.Epoch, Start: e.StartOffset}
	}
	return out
}

// replicaError maps the core's refusals to the partition's errors.
func replicaError(err error) error {
	switch {
	case errors.Is(err, replica.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return fmt.Errorf("%w: %w", ErrNotEnoughReplicas, err)
	}
	return err
}

// handleReady carries out the core's work until it has none.
func (p *Partition) handleReady() {
	for p.rep.HasReady() {
		rd := p.rep.Ready()
		truncated := false
		var persisted *replica.HardState
		if rd.Truncate >= 0 && p.failed == nil {
			truncated = p.truncate(rd.Truncate)
		}
		if rd.HardState != nil && p.failed == nil {
			if err := p.log.SetFencedEpoch(rd.HardState.Fenced); err != nil {
				p.failLog(fmt.Errorf("persist fenced epoch %d: %w", rd.HardState.Fenced, err))
			} else {
				hs := *rd.HardState
				persisted = &hs
			}
		}
		appended := false
		if len(rd.Appends) > 0 && p.failed == nil {
			appended = p.applyAppends(rd.Appends)
		}
		for _, m := range rd.Messages {
			p.route(m)
		}
		if rd.HWChanged {
			p.followLeaderStart(rd.HW) // before the HW is seen (FollowLogStart)
			p.setHighWatermark(rd.HW)
		}
		p.release(rd.Released)
		p.failTokens(rd.Failed)
		p.rep.Advance()

		if truncated {
			p.rep.Truncated(p.log.EndOffset())
		}
		if persisted != nil {
			p.rep.HardStateDurable(*persisted)
		}
		if p.failed != nil {
			p.rep.Fail(p.failed)
		} else if appended && !p.log.Journaled() {
			p.syncInline()
		}
	}
	// A role can change without any work for the driver (a leader of an
	// empty log appends nothing), so the status is published every time.
	p.publishStatus()
}

// syncInline makes the appends durable with the log's own fsync (the
// per-partition fsync mode).
func (p *Partition) syncInline() {
	timer := p.m.StartFsync()
	end, err := p.log.Sync()
	timer()
	if err != nil {
		p.failLog(err)
		return
	}
	p.durable(end)
}

// truncate cuts the log at to, as the core asks, rebuilds the producer
// state from what is left, and rewrites the producer snapshot to match
// before the truncation is reported. It reports whether it succeeded.
//
// The snapshot on disk may cover offsets the truncation removed: its
// producers then hold batches that are gone. The rebuild below ignores such
// a snapshot (it is past the log end), but once the log regrows past its
// offset a restart would trust it, answer a retry of a removed batch as a
// duplicate and skip the replay of the new batches below its offset. So the
// rebuilt state is written as the snapshot, at the new end, as Kafka
// deletes the snapshots above a truncation point; if that fails the log
// fails with it.
func (p *Partition) truncate(to wal.Offset) bool {
	p.truncations.Add(1)
	oldEnd := p.log.EndOffset()
	if err := p.log.Truncate(to); err != nil {
		p.failLog(fmt.Errorf("truncate to %d: %w", to, err))
		return false
	}
	// The one line of a truncation (the wal's is debug); info only when
	// records went: a truncation is otherwise part of following a leader.
	ev := p.logger.Debug()
	if oldEnd > to {
		ev = p.logger.Info()
	}
	ev.Int64("offset", int64(to)).Int64("old_end", int64(oldEnd)).Msg("truncated the log to the leader's")
	p.producers = make(map[int64]*producerState)
	if err := p.rebuildProducers(); err != nil {
		p.failLog(err)
		return false
	}
	// Truncate left the log durable up to its new end, so the state written
	// covers only durable batches.
	if err := p.writeSnapshot(); err != nil {
		p.failLog(fmt.Errorf("rewrite the producer snapshot after truncating to %d: %w", to, err))
		return false
	}
	return true
}

// applyAppends appends the core's batches: the leader's own (proposed
// produce batches and its epoch-start batch, stamped here with their
// offsets and epoch) with one group write, a follower's copies as the
// leader stamped them, also with one write per run (AppendStampedGroup).
// It reports whether anything was appended.
func (p *Partition) applyAppends(bs []replica.Batch) bool {
	var own [][]byte // the leader's: stamped by AppendGroup
	var epoch wal.Epoch
	var copies []replica.Batch // a follower's: stamped by the leader
	flushOwn := func() bool {
		if len(own) == 0 {
			return true
		}
		for _, res := range p.log.AppendGroup(own, epoch) {
			if res.Err != nil {
				p.failLog(fmt.Errorf("append: %w", res.Err))
				return false
			}
		}
		own = own[:0]
		return true
	}
	flushCopies := func() bool {
		if len(copies) == 0 {
			return true
		}
		data := make([][]byte, len(copies))
		for i, b := range copies {
			data[i] = b.Data
		}
		for i, res := range p.log.AppendStampedGroup(data) {
			b := copies[i]
			err := res.Err
			if err == nil && (res.Base != b.Base || res.Last != b.Last) {
				err = fmt.Errorf("batch [%d, %d] landed at [%d, %d]", b.Base, b.Last, res.Base, res.Last)
			}
			if err != nil {
				p.failLog(fmt.Errorf("append a copy of the leader's batch: %w", err))
				return false
			}
			if h, err := wal.ParseBatchHeader(b.Data); err == nil {
				p.recordProducer(h, res.Base, res.Last)
			}
		}
		copies = copies[:0]
		return true
	}
	for _, b := range bs {
		switch {
		case b.Data == nil && b.Control:
			if !flushCopies() {
				return false
			}
			own, epoch = append(own, encodeEpochStartBatch(p.opts.Now().UnixMilli())), b.Epoch
		case b.Data == nil:
			if !flushCopies() {
				return false
			}
			if len(p.proposed) == 0 {
				p.failLog(fmt.Errorf("append at %d: the core appended a batch that was not proposed", b.Base))
				return false
			}
			own, epoch = append(own, p.proposed[0]), b.Epoch
			p.proposed[0] = nil
			p.proposed = p.proposed[1:]
		default:
			if !flushOwn() {
				return false
			}
			copies = append(copies, b)
		}
	}
	if !flushOwn() || !flushCopies() {
		return false
	}
	if end := p.log.EndOffset(); end != bs[len(bs)-1].End() {
		p.failLog(fmt.Errorf("log end %d after appends, the core expects %d", end, bs[len(bs)-1].End()))
		return false
	}
	return true
}

// route delivers one of the core's messages.
func (p *Partition) route(m replica.Message) {
	switch m.Type {
	case replica.MsgFetch:
		p.fetchMu.Lock()
		p.fetchNext = &m
		p.fetchMu.Unlock()
		if p.opts.Net != nil {
			p.opts.Net.FetchReady(int32(m.To), p)
		}
	case replica.MsgFetchResp:
		k := fetchWaitKey{from: m.To, seq: m.Seq}
		if ch, ok := p.fetchWaits[k]; ok {
			delete(p.fetchWaits, k)
			ch <- FetchAnswer{Msg: m, truncations: p.truncations.Load()}
		}
	default:
		if p.opts.Net != nil && m.To == replica.ControllerNode {
			p.opts.Net.SendToController(m)
		}
	}
}

// failFetchWaits answers every waiting replica fetch with NOT_LEADER.
func (p *Partition) failFetchWaits() {
	for k, ch := range p.fetchWaits {
		delete(p.fetchWaits, k)
		ch <- FetchAnswer{Msg: replica.Message{Type: replica.MsgFetchResp, Seq: k.seq, Err: replica.ErrCodeNotLeader}}
	}
}

// publishStatus shares the core's state with other goroutines.
//
// It runs after every event on the owner goroutine, produce groups
// included, so it stores a new snapshot only when what readers use (role,
// epoch, leader, fence, error, in-sync set) changed; the snapshot's HW, End
// and Durable are therefore those of its last change, not current (readers
// take the high watermark from HighWatermark).
func (p *Partition) publishStatus() {
	st := p.rep.Status()
	if prev := p.status.Load(); prev != nil && prev.Role == st.Role && prev.Epoch == st.Epoch &&
		prev.Leader == st.Leader && prev.Fenced == st.Fenced && (prev.Err == nil) == (st.Err == nil) && slices.Equal(prev.InSync, st.InSync) {
		return
	}
	p.status.Store(&st)
	p.epoch.Store(int32(st.Epoch))
}

// ReplicaStatus is the core's role, epoch, leader, fence, error and in-sync
// set as of the last event that changed one of them (its HW, End and
// Durable are not kept current: see publishStatus); any goroutine may call
// it.
func (p *Partition) ReplicaStatus() replica.Status {
	if st := p.status.Load(); st != nil {
		return *st
	}
	return replica.Status{Leader: replica.NoLeader}
}

// electSelf makes a standalone partition the leader of a one-replica group
// at a fresh epoch, as the controller would: fence, then the state.
func (p *Partition) electSelf() {
	e := max(p.log.FencedEpoch(), p.log.LastEpoch()) + 1
	self := replica.NodeID(p.opts.Self)
	p.rep.Step(replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: self, Epoch: e})
	p.handleReady()
	p.rep.SetState(replica.State{Epoch: e, Leader: self, Replicas: []replica.NodeID{self}, Version: 1})
	p.handleReady()
}

// send runs fn on the owner goroutine, followed by handleReady. It waits
// at most a short while for room in ctl; false means the owner is gone or
// too busy (the sender's protocol retries).
func (p *Partition) send(fn func()) bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case p.ctl <- fn:
		return true
	case <-p.done:
	case <-t.C:
	}
	return false
}

// Step hands the partition's replica one message from another broker or
// the controller. False: the owner is gone or too busy (the message is
// dropped; the sender's protocol retries).
func (p *Partition) Step(m replica.Message) bool {
	return p.send(func() { p.rep.Step(m) })
}

// SetState gives the replica the partition state etcd reports. False as
// for Step.
func (p *Partition) SetState(s replica.State) bool {
	return p.send(func() { p.rep.SetState(s) })
}

// SetMinISR applies a new min.insync.replicas to the replica core on the
// owner goroutine and waits until it is applied or the owner has stopped:
// once it returns, produce is checked against the new value.
func (p *Partition) SetMinISR(n int) {
	p.onOwner(func() { p.rep.SetMinISR(n) })
}

// Tick asks the owner for one replication tick; a tick already due covers it.
func (p *Partition) Tick() {
	select {
	case p.ticks <- struct{}{}:
	default:
	}
}

// TakeFetch returns the fetch the follower core wants sent, if any.
func (p *Partition) TakeFetch() (replica.Message, bool) {
	p.fetchMu.Lock()
	defer p.fetchMu.Unlock()
	if p.fetchNext == nil {
		return replica.Message{}, false
	}
	m := *p.fetchNext
	p.fetchNext = nil
	return m, true
}

// ReturnFetch gives back a fetch taken with TakeFetch that the taker
// cannot send, unless the core has asked for a newer one since.
func (p *Partition) ReturnFetch(m replica.Message) {
	p.fetchMu.Lock()
	defer p.fetchMu.Unlock()
	if p.fetchNext == nil {
		p.fetchNext = &m
	}
}

// ReplicaFetch steps a follower's fetch into the core and returns where
// its answer will arrive: at once, or when the core stops holding it.
func (p *Partition) ReplicaFetch(m replica.Message) <-chan FetchAnswer {
	ch := make(chan FetchAnswer, 1)
	if !p.send(func() {
		p.fetchWaits[fetchWaitKey{from: m.From, seq: m.Seq}] = ch
		p.syncCoreLogStart()
		p.rep.Step(m)
	}) {
		ch <- FetchAnswer{Msg: replica.Message{Type: replica.MsgFetchResp, Seq: m.Seq, Err: replica.ErrCodeNotLeader}}
	}
	return ch
}

// ExpireReplicaFetch has the core answer the replica fetch (from, seq) now
// if it still holds it (replica.ExpireFetch). The returned channel closes
// once that answer, if any, is in the channel ReplicaFetch returned. A
// fetch the core no longer holds (a later fetch of the same follower
// replaced it) gets no answer, and its wait is forgotten. The request
// handler calls it for every fetch still unanswered when it answers the
// request.
func (p *Partition) ExpireReplicaFetch(from replica.NodeID, seq uint64) <-chan struct{} {
	looked := make(chan struct{})
	k := fetchWaitKey{from: from, seq: seq}
	// The owner routes the core's answer after the first function returns,
	// before it takes the second from ctl.
	if !p.send(func() { p.rep.ExpireFetch(from, seq) }) || !p.send(func() {
		delete(p.fetchWaits, k)
		close(looked)
	}) {
		close(looked) // the owner is gone (it answered every wait) or stuck
	}
	return looked
}

// ReadFetchAnswer reads the log range a replica fetch's answer names, up
// to maxBytes (at least one batch). It fails with ErrNotLeader if the log
// was truncated since the core decided the range: what was read may not be
// what the core meant, and the follower asks again.
func (p *Partition) ReadFetchAnswer(a FetchAnswer, maxBytes int) ([]byte, error) {
	// A follower restarted at the base of the batch holding the log start
	// (logstart.go) reads that batch from the log start.
	data, err := p.log.Read(max(a.Msg.ReadFrom, p.log.StartOffset()), a.Msg.ReadTo, maxBytes)
	if err == nil && p.truncations.Load() != a.truncations {
		err = ErrNotLeader // the log changed under the core's decision
	}
	return data, err
}

// epochStartType is the control record type of a leader's epoch-start
// batch: Kafka's LEADER_CHANGE. Clients skip control batches whatever their
// type, as they skip transaction markers.
const epochStartType = 2

// encodeEpochStartBatch encodes the control batch a new leader appends
// first in its epoch (docs/architecture.md): one control record whose key is
// (version 0, type LEADER_CHANGE) and whose value is empty. The high
// watermark passes older epochs' records only once a quorum holds it.
func encodeEpochStartBatch(nowMs int64) []byte {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), epochStartType)
	r := kmsg.Record{Key: key, Value: []byte{}}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x20, // control
		FirstTimestamp: nowMs, MaxTimestamp: nowMs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: r.AppendTo(nil),
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}
