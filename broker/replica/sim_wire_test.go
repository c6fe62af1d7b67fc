package replica

// The simulator's wire: every message between replicas and the controller
// is encoded to bytes as the brokers encode it (wire.go: a fetch as a
// partition of a Kafka replica Fetch request, the answer as a partition of
// the response, the election messages as JSON envelopes) and decoded at
// delivery. A fetch is paired with its answer as the brokers pair them: the
// leader numbers the requests it receives, the follower keeps its own
// fetch and reads the answer against it.
//
// The leader's side behaves like api_fetch_replica.go answering a fetch of
// many partitions: the answer may leave before this partition's core has
// judged the fetch (another partition answered first), even before the
// core steps it (its owner goroutine was busy); the core's later answer
// then finds no request waiting and is dropped. What the response says of
// such a partition is wire.go's decision (EncodeFetchAnswer), so a leader
// that wrote it as a clean answer fails the run.
//
// Invariant: no two endpoints share memory through a message: each
// delivery decodes its own copy of the bytes.

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

const (
	// simFetchVersion is the Fetch version the sim's brokers speak (the
	// broker's highest, which names topics by ID).
	simFetchVersion = 13
	// simPartition is the partition the sim replicates; the other
	// partitions of a multi-partition fetch exist only as their effect
	// (an answer leaving early).
	simPartition = 0
)

var simTopicID = [16]byte{'s', 'i', 'm'}

// simRequest is a replica Fetch request as the leader's edge holds it
// until it answers, with the follower's own fetch (the fetcher's memory).
type simRequest struct {
	fetch    Message // the follower core's fetch, as its fetcher keeps it
	follower int
	leader   *simNode
	inc      int // the leader's incarnation: a restart forgets the request
	answered bool
}

// simWire holds the wire's knobs, its own random source (so its draws do
// not shift the network's) and the requests leaders have not answered.
type simWire struct {
	r *rand.Rand
	// partial: chance that a request is answered without this partition
	// (another one answered first), within partialDelay of its arrival.
	partial      float64
	partialDelay int64
	// slowStep: chance that the leader's core steps a fetch only after a
	// delay of up to slowStepDelay (its owner goroutine was busy).
	slowStep      float64
	slowStepDelay int64

	seq  uint64 // the leaders' request numbers (replicaFetchSeq)
	reqs map[uint64]*simRequest
}

func (w *simWire) init(r *rand.Rand) {
	w.r = r
	w.reqs = map[uint64]*simRequest{}
	if r.IntN(3) > 0 {
		w.partial = r.Float64() * 0.5
	}
	w.partialDelay = r.Int64N(3 * tickUnits)
	if r.IntN(2) == 0 {
		w.slowStep = r.Float64() * 0.3
	}
	w.slowStepDelay = 1 + r.Int64N(4*tickUnits)
}

// encode turns m into bytes and returns what decodes them at delivery;
// false: nothing goes on the wire (an answer nobody waits for).
func (w *simWire) encode(s *sim, from int, m Message) (func() (Message, bool), bool) {
	switch m.Type {
	case MsgFetch:
		req := kmsg.NewPtrFetchRequest()
		req.Version = simFetchVersion
		req.ReplicaID = int32(m.From)
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = simTopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = simPartition, 1<<20
		EncodeFetch(m, &rp)
		rp.LogStartOffset = int64(s.nodes[from].disk.start) // the fetcher sends its log start
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		raw := req.AppendTo(nil)
		fetch := m.Clone()
		return func() (Message, bool) { return w.receiveFetch(s, from, fetch, raw) }, true
	case MsgFetchResp:
		r := w.reqs[m.Seq]
		if r == nil || r.answered {
			return nil, false // answered already (or never asked): dropped as the broker drops it
		}
		w.answer(s, m.Seq, &m)
		return nil, false // answer sent it
	case MsgFence, MsgFenceAck, MsgLeaderUnreachable, MsgCaughtUp:
		raw, err := EncodeEnvelopes([]Envelope{{Key: PartitionKey{TopicID: simTopicID, Partition: simPartition}, Msg: m}})
		if err != nil {
			s.fail("wire: %v", err)
			return nil, false
		}
		return func() (Message, bool) {
			envs, err := DecodeEnvelopes(bytes.NewReader(raw))
			if err != nil || len(envs) != 1 {
				s.fail("wire: envelope of %s does not decode: %v", m.Type, err)
				return Message{}, false
			}
			return envs[0].Msg, true
		}, true
	}
	s.fail("wire: %s is not carried between brokers", m.Type)
	return nil, false
}

// receiveFetch is the leader's edge taking a replica Fetch request: it
// decodes the partition, numbers the request, and hands it to the core at
// once or after a delay; an answer without it may leave first.
func (w *simWire) receiveFetch(s *sim, follower int, fetch Message, raw []byte) (Message, bool) {
	req := kmsg.NewPtrFetchRequest()
	req.Version = simFetchVersion
	if err := req.ReadFrom(bytes.Clone(raw)); err != nil || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
		s.fail("wire: fetch request does not decode: %v", err)
		return Message{}, false
	}
	leader := s.nodes[endpointOf(fetch.To)]
	w.seq++
	seq := w.seq
	w.reqs[seq] = &simRequest{fetch: fetch, follower: follower, leader: leader, inc: leader.inc}
	// The incarnation the leader's edge learns from the follower's current
	// registration, which the simulator knows directly.
	m := DecodeFetch(NodeID(req.ReplicaID), fetch.To, seq, fetch.Incarnation, &req.Topics[0].Partitions[0])
	if w.r.Float64() < w.partial {
		s.after(w.r.Int64N(w.partialDelay+1), "early-answer", int(leader.id), func() { w.answer(s, seq, nil) })
	}
	if w.r.Float64() < w.slowStep {
		inc := leader.inc
		var step func()
		step = func() {
			switch {
			case leader.inc != inc || !leader.up:
			case s.fromLostDisk(follower, m): // its disk died after it was sent
			case s.paused(leader.pausedUntil):
				s.at(leader.pausedUntil+1, "msg", int(leader.id), step)
			default:
				s.stepNode(leader, m)
			}
		}
		s.after(1+w.r.Int64N(w.slowStepDelay), "slow-step", int(leader.id), step)
		return Message{}, false
	}
	return m, true
}

// answer sends the response to request seq with the core's answer a (nil:
// the core has not judged the fetch), unless it was answered already.
func (w *simWire) answer(s *sim, seq uint64, a *Message) {
	r := w.reqs[seq]
	if r == nil || r.answered {
		return
	}
	r.answered = true
	delete(w.reqs, seq)
	l := r.leader
	if l.inc != r.inc || !l.up {
		return // the leader restarted: its requests died with it
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = simFetchVersion
	st := kmsg.NewFetchResponseTopic()
	st.TopicID = simTopicID
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = simPartition
	// What the edge knows of the partition; the core's answer goes over it.
	hw := l.r.Status().HW
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = int64(hw), int64(hw), int64(l.disk.start)
	include, read := EncodeFetchAnswer(a, &sp)
	if read {
		for _, b := range a.Batches {
			sp.RecordBatches = append(sp.RecordBatches, simBatchBytes(b)...)
		}
	}
	if include {
		st.Partitions = append(st.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, st)
	raw := resp.AppendTo(nil)
	fetch := r.fetch
	s.transmit(int(l.id), r.follower, func() (Message, bool) { return w.receiveAnswer(s, fetch, raw) })
}

// receiveAnswer is the follower's fetcher reading a response against its
// own fetch: a missing partition is Unjudged.
func (w *simWire) receiveAnswer(s *sim, fetch Message, raw []byte) (Message, bool) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = simFetchVersion
	if err := resp.ReadFrom(bytes.Clone(raw)); err != nil {
		s.fail("wire: fetch response does not decode: %v", err)
		return Message{}, false
	}
	for _, st := range resp.Topics {
		for i := range st.Partitions {
			if sp := &st.Partitions[i]; st.TopicID == simTopicID && sp.Partition == simPartition {
				s.leaderLogStart(fetch, sp) // sim_retention_test.go
				m := DecodeFetchAnswer(fetch, sp)
				for j := range m.Batches {
					m.Batches[j].Data = simBatchPayload(m.Batches[j].Data)
				}
				return m, true
			}
		}
	}
	return UnjudgedAnswer(fetch), true
}

// simBatchBytes is b as a Kafka record batch (v2) on the wire: the header
// the leader's log stamped, and the sim's opaque payload as its records.
func simBatchBytes(b Batch) []byte {
	rb := kmsg.RecordBatch{
		FirstOffset: int64(b.Base), PartitionLeaderEpoch: int32(b.Epoch), Magic: 2,
		LastOffsetDelta: int32(b.Last - b.Base), NumRecords: int32(b.Last - b.Base + 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: b.Data,
	}
	if b.Control {
		rb.Attributes = 0x20
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return raw
}

// simBatchPayload is the sim's payload of a batch read off the wire.
func simBatchPayload(raw []byte) []byte {
	if len(raw) <= wal.BatchHeaderSize {
		return nil
	}
	return bytes.Clone(raw[wal.BatchHeaderSize:])
}
