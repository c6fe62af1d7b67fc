package partition

// This file owns idempotent-producer deduplication for one partition and
// keeps doc.go's invariants on sequence order and on who judges a
// sequence.
//
// The state lives in Partition.producers and is touched only by the
// owner goroutine. On open it is restored from the snapshot (snapshot.go)
// and the batch headers of the log above it.
//
// Invariant: only the leader judges a batch's sequence. A replica that
// does not lead (or whose log failed) refuses every batch with
// NOT_LEADER_OR_FOLLOWER (or its storage error) before checkSequence looks
// at it, as Kafka checks leadership before the producer state. A follower's
// producer state is only as new as its log, which lags the leader's (a
// follower behind, a replica restarted on an empty disk at the remote end
// with the tiered snapshot's state); its OUT_OF_ORDER_SEQUENCE_NUMBER or
// INVALID_PRODUCER_EPOCH would tell a client with stale metadata that a
// batch the leader holds is not in the log, and idempotent clients answer
// those by bumping their epoch and resending the batch as sequence 0 of
// the new epoch: a duplicate no broker can detect. NOT_LEADER_OR_FOLLOWER
// sends the client to the leader, whose state covers its whole log and
// deduplicates the retry.

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// producerWindow is how many recent batches per producer are remembered,
// matching the in-flight limit idempotent clients use.
const producerWindow = 5

type producerBatch struct {
	firstSeq, lastSeq int32
	base              wal.Offset
}

type producerState struct {
	epoch        int16
	batches      []producerBatch // oldest first, at most producerWindow
	lastAppendMs int64           // broker clock; drives expiry
}

func (s *producerState) lastSeq() int32 { return s.batches[len(s.batches)-1].lastSeq }

// seqAdd adds n to a sequence number, wrapping at MaxInt32 as clients do.
func seqAdd(seq int32, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// appendRefusal is the error every batch of a group gets before its
// sequence is looked at: the log's failure, or ErrNotLeader when this
// replica does not lead (see the invariant above). nil on a working leader.
// Only the owner goroutine calls it; no step of the core runs between it
// and the group's proposals, so the role it saw holds for the group.
func (p *Partition) appendRefusal() error {
	if p.failed != nil {
		return p.failed
	}
	switch st := p.rep.Status(); {
	case st.Err != nil:
		return st.Err
	case st.Role != replica.RoleLeader:
		return replicaError(fmt.Errorf("%w: epoch %d is led by node %d", replica.ErrNotLeader, st.Epoch, st.Leader))
	}
	return nil
}

// checkSequence decides whether a batch may be appended. dup reports an
// exact retry of a batch already in the log, with its original base offset.
func (p *Partition) checkSequence(h wal.BatchHeader) (dupBase wal.Offset, dup bool, err error) {
	if h.ProducerID < 0 {
		return 0, false, nil
	}
	s := p.producers[h.ProducerID]
	if s == nil || len(s.batches) == 0 {
		// An unknown producer (new, or its batches are gone from the local
		// log) starts wherever it says.
		return 0, false, nil
	}
	switch {
	case h.ProducerEpoch < s.epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, s.epoch)
	case h.ProducerEpoch > s.epoch:
		if h.BaseSequence != 0 {
			return 0, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return 0, false, nil
	}
	last := seqAdd(h.BaseSequence, h.LastOffsetDelta)
	for _, b := range s.batches {
		if b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b.base, true, nil
		}
	}
	if want := seqAdd(s.lastSeq(), 1); h.BaseSequence != want {
		return 0, false, fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, want, h.BaseSequence)
	}
	return 0, false, nil
}

// producerUndo holds the state of producers as it was before a group
// commit changed it; nil marks a producer the group introduced.
type producerUndo map[int64]*producerState

// save remembers id's state the first time the group touches it.
func (u *producerUndo) save(producers map[int64]*producerState, id int64) {
	if id < 0 {
		return
	}
	if *u == nil {
		*u = producerUndo{}
	}
	if _, ok := (*u)[id]; ok {
		return
	}
	s := producers[id]
	if s != nil {
		c := *s
		c.batches = slices.Clone(s.batches)
		s = &c
	}
	(*u)[id] = s
}

// restore puts every saved producer back as it was.
func (u producerUndo) restore(producers map[int64]*producerState) {
	for id, s := range u {
		if s == nil {
			delete(producers, id)
		} else {
			producers[id] = s
		}
	}
}

// recordProducer remembers an appended batch of an idempotent producer.
func (p *Partition) recordProducer(h wal.BatchHeader, base, _ wal.Offset) {
	if h.ProducerID < 0 {
		return
	}
	s := p.producers[h.ProducerID]
	if s == nil {
		s = &producerState{}
		p.producers[h.ProducerID] = s
	}
	if h.ProducerEpoch != s.epoch {
		s.epoch = h.ProducerEpoch
		s.batches = s.batches[:0]
	}
	if len(s.batches) == producerWindow {
		copy(s.batches, s.batches[1:])
		s.batches = s.batches[:producerWindow-1]
	}
	s.batches = append(s.batches, producerBatch{
		firstSeq: h.BaseSequence,
		lastSeq:  seqAdd(h.BaseSequence, h.LastOffsetDelta),
		base:     base,
	})
	s.lastAppendMs = p.nowMs()
}

// rebuildProducers loads the snapshot and replays the batch headers of the
// local log above it.
func (p *Partition) rebuildProducers() error {
	covered, err := p.loadSnapshot()
	if err != nil {
		return err
	}
	from := max(p.log.StartOffset(), covered)
	end := p.log.EndOffset()
	for from < end {
		chunk, err := p.log.Read(from, end, 4<<20)
		if err != nil {
			return fmt.Errorf("partition: rebuild producer state of %s-%d at %d: %w", p.topic, p.index, from, err)
		}
		if len(chunk) == 0 {
			break
		}
		for len(chunk) > 0 {
			h, err := wal.ParseBatchHeader(chunk)
			if err != nil {
				return fmt.Errorf("partition: rebuild producer state of %s-%d: %w", p.topic, p.index, err)
			}
			p.recordProducer(h, h.BaseOffset, h.BaseOffset+wal.Offset(h.LastOffsetDelta))
			from = h.BaseOffset + wal.Offset(h.LastOffsetDelta) + 1
			size := int(h.Length) + 12
			if size > len(chunk) {
				break
			}
			chunk = chunk[size:]
		}
	}
	return nil
}
