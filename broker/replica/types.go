package replica

// This file owns the vocabulary shared by the replica core, the controller
// and their drivers: partition state, hard state, batches, messages, the
// Ready batch of work a core hands to its driver, and the sentinel errors.
//
// Invariant: a Message holds no memory shared with its sender's core once it
// has left Ready (Batches are filled by the driver, which copies them).
//
// These are plain values; whoever holds one owns it.

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/wal"
)

// NodeID names a broker.
type NodeID int32

const (
	// NoLeader is State.Leader when the partition has no leader.
	NoLeader NodeID = -1
	// ControllerNode is the To (or From) of a message for (or from) the
	// controller; the driver routes it to whichever broker is controller.
	ControllerNode NodeID = -2
)

// State is a partition's replication state as stored in etcd. Only the
// controller writes it, with a compare-and-swap on Version.
type State struct {
	Epoch    wal.Epoch
	Leader   NodeID // NoLeader: none
	Replicas []NodeID
	// Incarnations, indexed like Replicas (shorter or nil: unknown), is
	// the data-directory incarnation each replica was last known to hold
	// everything committed with. 0: unknown, and any incarnation counts
	// (a state written before incarnations existed). A replica answering
	// with another incarnation lost its disk: it neither votes nor counts
	// for the high watermark until it has caught up and the controller
	// records its new incarnation.
	Incarnations []Incarnation
	Version      int64
}

// Incarnation identifies one life of a replica's data directory: a random
// value drawn when the directory is created, so a broker restarted on an
// empty disk answers with a new one. 0 means unknown.
type Incarnation uint64

// Clone returns a copy sharing no memory with s.
func (s State) Clone() State {
	s.Replicas = append([]NodeID(nil), s.Replicas...)
	if s.Incarnations != nil {
		s.Incarnations = append([]Incarnation(nil), s.Incarnations...)
	}
	return s
}

// IncarnationOf is the incarnation recorded for replica id, 0 if unknown.
func (s State) IncarnationOf(id NodeID) Incarnation {
	for i, r := range s.Replicas {
		if r == id && i < len(s.Incarnations) {
			return s.Incarnations[i]
		}
	}
	return 0
}

// Counts reports whether a message from replica id stamped with
// incarnation inc speaks for the log that the state counts on: the
// recorded incarnation is unknown, or inc is it.
func (s State) Counts(id NodeID, inc Incarnation) bool {
	rec := s.IncarnationOf(id)
	return rec == 0 || rec == inc
}

// HardState is what a replica persists durably (write, fsync, rename,
// directory fsync) outside its log.
type HardState struct {
	// Fenced is the highest epoch the replica promised to: it never again
	// appends, follows, leads or acknowledges for a lower one.
	Fenced wal.Epoch
}

// EpochEntry is one entry of a log's epoch chain: the first offset written
// under Epoch (Kafka's leader-epoch checkpoint).
type EpochEntry struct {
	Epoch wal.Epoch
	Start wal.Offset
}

// Batch is a run of records [Base, Last] created by the leader of Epoch.
// Data is opaque to the core. Control marks a leader's epoch-start batch.
type Batch struct {
	Base, Last wal.Offset
	Epoch      wal.Epoch
	Control    bool
	Data       []byte
}

// End is the offset after the batch.
func (b Batch) End() wal.Offset { return b.Last + 1 }

// Clone returns a copy sharing no memory with b.
func (b Batch) Clone() Batch {
	b.Data = append([]byte(nil), b.Data...)
	return b
}

// Token is the driver's handle on a parked produce reply.
type Token uint64

// TokenErr is a parked reply that can no longer succeed here.
type TokenErr struct {
	Token Token
	Err   error
}

// MsgType is the kind of a Message.
type MsgType uint8

// The messages between replicas, and between replicas and the controller.
const (
	// MsgFetch: follower → leader. Epoch followed, Offset = the follower's
	// log end (= its durable end), LastEpoch = epoch of the batch below
	// Offset, Seq pairs the answer.
	MsgFetch MsgType = iota + 1
	// MsgFetchResp: leader → follower. Err, or Diverging (DivergingEpoch,
	// DivergingEnd), or data [ReadFrom, ReadTo) in Batches, and HW; Epoch,
	// Seq, Offset and LastEpoch echo the fetch. Unjudged: no answer at all
	// (the leader's core did not judge the fetch), only "ask again".
	MsgFetchResp
	// MsgFence: controller → replica. Epoch to fence at.
	MsgFence
	// MsgFenceAck: replica → controller, sent only once Fenced >= Epoch is
	// durable: LastEpoch and Offset describe the replica's durable log.
	// Err FencedLeaderEpoch: refused, the replica is fenced at Epoch > asked.
	MsgFenceAck
	// MsgLeaderUnreachable: replica → controller. The sender cannot follow
	// (or, when it is the named leader, cannot lead) the leader of Epoch.
	// LastEpoch is the epoch the sender is fenced at: above Epoch, a fence
	// round elected nobody and only a new election lets the sender serve.
	MsgLeaderUnreachable
	// MsgState: the partition state, from etcd to a replica (used by
	// drivers that deliver the etcd watch as a message, like the simulator).
	MsgState
	// MsgCaughtUp: replica → controller. The sender, whose Incarnation
	// the state does not record, holds durably everything up to HW, a
	// high watermark the leader of Epoch published past that epoch's
	// start: it holds all that is committed and asks to count again.
	MsgCaughtUp
)

func (t MsgType) String() string {
	switch t {
	case MsgFetch:
		return "Fetch"
	case MsgFetchResp:
		return "FetchResp"
	case MsgFence:
		return "Fence"
	case MsgFenceAck:
		return "FenceAck"
	case MsgLeaderUnreachable:
		return "LeaderUnreachable"
	case MsgState:
		return "State"
	case MsgCaughtUp:
		return "CaughtUp"
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// ErrCode is the error of an answer, named after its Kafka error code.
type ErrCode int8

// Answer errors.
const (
	ErrNone ErrCode = iota
	// ErrCodeNotLeader: NOT_LEADER_OR_FOLLOWER.
	ErrCodeNotLeader
	// ErrCodeFencedLeaderEpoch: FENCED_LEADER_EPOCH (the asker's epoch is old).
	ErrCodeFencedLeaderEpoch
	// ErrCodeUnknownLeaderEpoch: UNKNOWN_LEADER_EPOCH (the asker is ahead).
	ErrCodeUnknownLeaderEpoch
	// ErrCodeOffsetOutOfRange: OFFSET_OUT_OF_RANGE (or, on a tiered topic,
	// OFFSET_MOVED_TO_TIERED_STORAGE): the fetch is below the leader's log
	// start; LogStart says where the follower may start instead.
	ErrCodeOffsetOutOfRange
)

// Message is one network message. Fields unused by a Type are zero.
type Message struct {
	Type     MsgType
	From, To NodeID
	Epoch    wal.Epoch
	Seq      uint64
	Offset   wal.Offset
	// LastEpoch: in a Fetch the epoch of the batch below Offset; in a
	// FenceAck the epoch of the last durable batch.
	LastEpoch wal.Epoch
	HW        wal.Offset
	Err       ErrCode
	// Diverging: the fetch diverged; the leader's log holds DivergingEpoch
	// up to DivergingEnd (KIP-595).
	Diverging      bool
	DivergingEpoch wal.Epoch
	DivergingEnd   wal.Offset
	// Unjudged (MsgFetchResp): the fetch was not answered by the leader's
	// core: a multi-partition replica fetch was answered before this
	// partition's core judged its fetch, and the leader left the partition
	// out. It says nothing about the follower's log or the high watermark;
	// the follower asks again at once.
	Unjudged bool
	// ReadFrom, ReadTo: the leader's log range the driver reads into
	// Batches (whole batches, from ReadFrom, up to its byte budget).
	ReadFrom, ReadTo wal.Offset
	Batches          []Batch
	// LogStart: in a Fetch the follower's log start; in a FetchResp the
	// leader's, or with ErrCodeOffsetOutOfRange the lowest offset the
	// follower may fetch from (logstart.go).
	LogStart wal.Offset
	State    State // MsgState only
	// Incarnation: the sender replica's data-directory incarnation
	// (stamped on every message a Replica sends; 0 unknown).
	Incarnation Incarnation
	// SyncedEpoch: in a FenceAck, the epoch whose leader's high watermark
	// (past its epoch start) the sender last held durably in this
	// incarnation, 0 if none: the proof that a replica whose incarnation
	// the state does not record has caught up.
	SyncedEpoch wal.Epoch
}

// Clone returns a deep copy of m.
func (m Message) Clone() Message {
	if m.Batches != nil {
		bs := make([]Batch, len(m.Batches))
		for i, b := range m.Batches {
			bs[i] = b.Clone()
		}
		m.Batches = bs
	}
	m.State = m.State.Clone()
	return m
}

// Ready is the work a Replica hands its driver, to be done in this order:
// Truncate, then persist HardState, then Appends, then send Messages; HW,
// Released and Failed may be acted on at once. Then call Advance.
type Ready struct {
	// Truncate: -1 none; otherwise first remove every record at or above
	// this offset, durably (a batch holding it goes whole, as Kafka's log
	// truncation does), then call Truncated with the log's new end.
	Truncate wal.Offset
	// HardState: persist durably; call HardStateDurable when done.
	HardState *HardState
	// Appends: append in order; not durable until Durable reports it.
	Appends []Batch
	// Messages: send now. A FetchResp has ReadFrom/ReadTo set and the
	// driver fills Batches from its log.
	Messages  []Message
	HW        wal.Offset
	HWChanged bool
	// Released: replies now covered (acks=all: HW; acks=1: durable end).
	Released []Token
	// Failed: replies that can no longer succeed here.
	Failed []TokenErr
}

// Role is what a replica does in its current epoch.
type Role int8

// Roles.
const (
	// RoleNone: not serving (fenced and waiting for the new state, cannot
	// lead the epoch it is named for, not a replica, or failed).
	RoleNone Role = iota
	RoleFollower
	RoleLeader
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleFollower:
		return "follower"
	case RoleLeader:
		return "leader"
	}
	return fmt.Sprintf("Role(%d)", int8(r))
}

// Status is a snapshot of a replica for Metadata and metrics.
type Status struct {
	Role    Role
	Epoch   wal.Epoch // the epoch led or followed
	Leader  NodeID
	Fenced  wal.Epoch // promised (perhaps not yet durable)
	HW      wal.Offset
	End     wal.Offset
	Durable wal.Offset
	InSync  []NodeID // leader only: in-sync replicas, itself included
	Err     error
}

// Sentinel errors.
var (
	// ErrNotLeader: this replica does not lead the partition (any more).
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrNotEnoughReplicas: fewer in-sync replicas than MinISR.
	ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")
)
