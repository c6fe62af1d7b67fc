package replica

// This file owns the wire form of the core's messages between brokers: a
// follower's fetch as one partition of a Kafka replica Fetch request, the
// leader's answer as one partition of the Fetch response, the reading of
// both, and the JSON envelope the election messages travel in. The brokers
// (fetcher.go, api_fetch_replica.go, replication_transport.go) and the
// simulator (sim_wire_test.go) both go through it, so a seeded run crosses
// the encoding the brokers use. Kafka error codes appear here because this
// is the core's edge to the Kafka wire; the core itself speaks ErrCode.
//
// Invariant: a partition whose fetch the leader's core has not judged is
// left out of the response (EncodeFetchAnswer reports false), and a
// follower reads a missing partition as Unjudged. Only a present partition
// without an error and without a divergence says the follower's log
// matches the leader's up to the fetch offset.
// Invariant: a DivergingEpoch is judged only with an epoch and an end both
// >= 0 (Kafka's -1 is "none"); one set without the other is read as an
// error, so a malformed answer is neither a divergence nor a match.
// Invariant: only Fence, FenceAck and LeaderUnreachable, without batches,
// travel in envelopes; DecodeEnvelopes refuses the rest.
//
// Pure functions over values the caller owns; no I/O beyond the io.Reader
// DecodeEnvelopes is given.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// EncodeFetch writes a follower's fetch m into rp (its epoch, offset and
// last fetched epoch); the caller names the partition and its byte budget.
func EncodeFetch(m Message, rp *kmsg.FetchRequestTopicPartition) {
	rp.CurrentLeaderEpoch = int32(m.Epoch)
	rp.FetchOffset = int64(m.Offset)
	rp.LastFetchedEpoch = int32(m.LastEpoch)
	rp.LogStartOffset = -1
}

// DecodeFetch is the core's message for partition rp of a replica fetch
// from follower from to leader to; seq pairs it with the core's answer on
// the leader (the follower's own Seq does not travel). inc is the
// follower's data-directory incarnation as the leader's edge knows it (the
// Fetch does not carry it; 0: unknown, and the fetch counts as before).
func DecodeFetch(from, to NodeID, seq uint64, inc Incarnation, rp *kmsg.FetchRequestTopicPartition) Message {
	return Message{
		Type: MsgFetch, From: from, To: to, Seq: seq, Incarnation: inc,
		Epoch: wal.Epoch(rp.CurrentLeaderEpoch), Offset: wal.Offset(rp.FetchOffset),
		LastEpoch: wal.Epoch(rp.LastFetchedEpoch), LogStart: wal.Offset(rp.LogStartOffset),
	}
}

// EncodeFetchAnswer writes the leader core's answer a into sp, over
// whatever the caller wrote there of the partition (its log start, say).
// a nil means the core has not judged the fetch: the partition stays out
// of the response (include false). read reports whether the caller must
// read the log range [a.ReadFrom, a.ReadTo) into sp.RecordBatches.
func EncodeFetchAnswer(a *Message, sp *kmsg.FetchResponseTopicPartition) (include, read bool) {
	if a == nil {
		return false, false
	}
	sp.HighWatermark, sp.LastStableOffset = int64(a.HW), int64(a.HW)
	switch a.Err {
	case ErrNone:
	case ErrCodeFencedLeaderEpoch:
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return true, false
	case ErrCodeUnknownLeaderEpoch:
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return true, false
	case ErrCodeOffsetOutOfRange:
		// LogStartOffset says where the follower may start again.
		sp.ErrorCode, sp.LogStartOffset = kerr.OffsetOutOfRange.Code, int64(a.LogStart)
		return true, false
	default:
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return true, false
	}
	if a.Diverging {
		sp.DivergingEpoch.Epoch = int32(a.DivergingEpoch)
		sp.DivergingEpoch.EndOffset = int64(a.DivergingEnd)
		return true, false
	}
	return true, a.ReadFrom < a.ReadTo
}

// UnjudgedAnswer is the core's answer to fetch m when the leader answered
// the request without m's partition.
func UnjudgedAnswer(m Message) Message {
	return Message{Type: MsgFetchResp, From: m.To, To: m.From, Epoch: m.Epoch, Seq: m.Seq,
		Offset: m.Offset, LastEpoch: m.LastEpoch, Unjudged: true}
}

// FailedAnswer is the core's answer to fetch m when the request failed:
// NOT_LEADER, so the core asks again after its back-off.
func FailedAnswer(m Message) Message {
	return Message{Type: MsgFetchResp, From: m.To, To: m.From, Epoch: m.Epoch, Seq: m.Seq,
		Offset: m.Offset, LastEpoch: m.LastEpoch, Err: ErrCodeNotLeader}
}

// DecodeFetchAnswer turns partition sp of a replica fetch response into the
// core's answer to fetch m. Batches alias sp.RecordBatches: whole batches
// from m.Offset on, contiguous (a partial last batch is left for the next
// fetch).
func DecodeFetchAnswer(m Message, sp *kmsg.FetchResponseTopicPartition) Message {
	out := Message{
		Type: MsgFetchResp, From: m.To, To: m.From, Epoch: m.Epoch, Seq: m.Seq,
		Offset: m.Offset, LastEpoch: m.LastEpoch, // the answer names the fetch it answers
		HW: wal.Offset(sp.HighWatermark), ReadFrom: m.Offset,
	}
	switch sp.ErrorCode {
	case 0:
	case kerr.FencedLeaderEpoch.Code:
		out.Err = ErrCodeFencedLeaderEpoch
		return out
	case kerr.UnknownLeaderEpoch.Code:
		out.Err = ErrCodeUnknownLeaderEpoch
		return out
	default:
		out.Err = ErrCodeNotLeader
		return out
	}
	switch de := sp.DivergingEpoch; {
	case de.Epoch >= 0 && de.EndOffset >= 0:
		out.Diverging = true
		out.DivergingEpoch, out.DivergingEnd = wal.Epoch(de.Epoch), wal.Offset(de.EndOffset)
		return out
	case de.Epoch >= 0 || de.EndOffset >= 0:
		// Half a divergence (an epoch of -1 means none on the wire): not a
		// judgement this follower can act on, and surely not proof that its
		// log matches. Ask again after the back-off.
		out.Err = ErrCodeNotLeader
		return out
	}
	data := sp.RecordBatches
	next := m.Offset
	for len(data) >= wal.BatchHeaderSize {
		h, err := wal.ParseBatchHeader(data)
		if err != nil {
			break
		}
		size := int(h.Length) + 12
		if size > len(data) || h.BaseOffset != next || h.LastOffsetDelta < 0 {
			// A partial last batch, or not contiguous: the rest comes next
			// time. A negative LastOffsetDelta is no batch at all (its end
			// would fall below its base).
			break
		}
		out.Batches = append(out.Batches, Batch{
			Base: h.BaseOffset, Last: h.BaseOffset + wal.Offset(h.LastOffsetDelta),
			Epoch: h.LeaderEpoch, Control: h.Attributes&0x20 != 0, Data: data[:size:size],
		})
		next = h.BaseOffset + wal.Offset(h.LastOffsetDelta) + 1
		data = data[size:]
	}
	out.ReadTo = next
	return out
}

// PartitionKey names a partition by topic ID, so a message about a deleted
// and recreated topic can never reach its successor.
type PartitionKey struct {
	TopicID   [16]byte `json:"topic_id"`
	Partition int32    `json:"partition"`
}

// Envelope is one election Message about one partition, as it travels
// between brokers.
type Envelope struct {
	Key PartitionKey `json:"key"`
	Msg Message      `json:"msg"`
}

// ElectionMessage reports whether m may travel in an envelope.
func ElectionMessage(m Message) bool {
	switch m.Type {
	case MsgFence, MsgFenceAck, MsgLeaderUnreachable, MsgCaughtUp:
		return len(m.Batches) == 0
	}
	return false
}

// ErrEnvelope marks envelopes that are malformed or carry what they may
// not; an error reading r is wrapped as it is.
var ErrEnvelope = errors.New("replica: bad envelope")

// EncodeEnvelopes is the JSON array of envs.
func EncodeEnvelopes(envs []Envelope) ([]byte, error) {
	body, err := json.Marshal(envs)
	if err != nil {
		return nil, fmt.Errorf("replica: encode envelopes: %w", err)
	}
	return body, nil
}

// DecodeEnvelopes reads one JSON array of election envelopes from r and
// nothing after it.
func DecodeEnvelopes(r io.Reader) ([]Envelope, error) {
	dec := json.NewDecoder(r)
	var envs []Envelope
	if err := dec.Decode(&envs); err != nil {
		return nil, decodeErr(err, "malformed")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, decodeErr(err, "data after the array")
	}
	for i, env := range envs {
		switch {
		case len(env.Msg.Batches) > 0:
			return nil, fmt.Errorf("%w: envelope %d: record batches are not carried here (they travel over Kafka Fetch)", ErrEnvelope, i)
		case !ElectionMessage(env.Msg):
			return nil, fmt.Errorf("%w: envelope %d: message type %v is not carried here", ErrEnvelope, i, env.Msg.Type)
		case env.Msg.Epoch == math.MaxInt32 || env.Msg.LastEpoch == math.MaxInt32:
			// The controller's next round is one above the highest epoch
			// it heard of: this one would overflow it, and no round could
			// ever elect a leader again.
			return nil, fmt.Errorf("%w: envelope %d: epoch %d (last %d) leaves no epoch above it", ErrEnvelope, i, env.Msg.Epoch, env.Msg.LastEpoch)
		case env.Msg.Type == MsgFence && env.Msg.From != ControllerNode:
			return nil, fmt.Errorf("%w: envelope %d: a fence from node %d, not from the controller", ErrEnvelope, i, env.Msg.From)
		}
	}
	return envs, nil
}

// decodeErr marks an error of the JSON array as ErrEnvelope, keeping its
// cause (a reader's error among them: the caller may tell a size limit).
func decodeErr(err error, what string) error {
	if err == nil {
		return fmt.Errorf("%w: %s", ErrEnvelope, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrEnvelope, what, err)
}
