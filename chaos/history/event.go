package history

// This file owns the event types of a history and their validation: what a
// well-formed event is, independent of whether the run it describes was
// correct. Validation never judges the system under test; a backwards offset
// or a value nobody sent is data for the checker, not a malformed event.
//
// Invariant: every event that Validate accepts can be encoded and decoded
// again to an equal value (MarshalEvent, UnmarshalEvent).
// Invariant: fields that do not apply carry their explicit "none" value
// (NoOffset, NoEpoch, NoGeneration, ""), never a silent zero.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
)

// Distinct types for protocol quantities, so the compiler catches a swap.
type (
	// Offset is a Kafka record offset in one partition.
	Offset int64
	// Epoch is a partition leader epoch.
	Epoch int32
	// Partition is a partition number of the history's topic.
	Partition int32
	// Generation is a consumer-group generation.
	Generation int32
	// BrokerID identifies a broker (a replica of a partition).
	BrokerID int32
	// Process identifies one client of the runner: a producer, a group
	// member, a reader or a drain. A client that crashes and is recreated
	// takes a new Process, as in Jepsen.
	Process int
	// Nanos is a time in nanoseconds since the start of the run (the
	// header's StartUnixNano), on the runner's monotonic clock.
	Nanos int64
)

// "None" values of the quantities above, as Kafka spells them.
const (
	NoOffset     Offset     = -1
	NoEpoch      Epoch      = -1
	NoGeneration Generation = -1
)

// Kind names an event type; it is the "type" field of its JSON line.
type Kind string

// The event kinds of format version 1.
const (
	KindSend       Kind = "send"
	KindPoll       Kind = "poll"
	KindCommit     Kind = "commit"
	KindAssign     Kind = "assign"
	KindRevoke     Kind = "revoke"
	KindSeek       Kind = "seek"
	KindReplicaLog Kind = "replica-log"
	KindTieredRead Kind = "tiered-read"
	KindFaultStart Kind = "fault-start"
	KindFaultStop  Kind = "fault-stop"
	KindFinal      Kind = "final"
)

// Outcome is how an operation ended, in Jepsen's terms.
type Outcome string

const (
	// OK: the operation definitely happened (a send was acknowledged).
	OK Outcome = "ok"
	// Fail: the operation definitely did not happen (a Kafka error that
	// guarantees nothing was appended or committed).
	Fail Outcome = "fail"
	// Info: the outcome is unknown (timeout, connection lost, a retriable
	// error after the request may have been applied). It may have happened.
	Info Outcome = "info"
)

// Consumer is the kind of client that polled.
type Consumer string

const (
	// ConsumerGroup is a consumer-group member (subscribe), with a member id
	// and generation.
	ConsumerGroup Consumer = "group"
	// ConsumerReader is a client assigned to partitions directly (assign),
	// positioned by Seek events.
	ConsumerReader Consumer = "reader"
	// ConsumerDrain is the final drain: a fresh reader that reads every
	// partition from its log start to the final high watermark after the
	// faults have healed. Its records make up the final log.
	ConsumerDrain Consumer = "drain"
)

// Event is one line of a history. The concrete types are Send, Poll, Commit,
// Assign, Revoke, Seek, ReplicaLog, TieredRead, FaultStart, FaultStop and
// Final; the set is closed.
type Event interface {
	// Kind is the event's type name.
	Kind() Kind
	// Validate reports whether the event is well formed.
	Validate() error
	isEvent()
}

// Record is one record as a consumer saw it.
type Record struct {
	Offset      Offset `json:"offset"`
	Key         string `json:"key"`
	Value       string `json:"value"`
	LeaderEpoch Epoch  `json:"leader_epoch"` // NoEpoch when the client did not report it
}

// Send is one produce of one record by a producer client, from the call to
// its completion. Values are unique per send across the history.
type Send struct {
	Process     Process   `json:"process"`
	Key         string    `json:"key"`
	Value       string    `json:"value"`
	Partition   Partition `json:"partition"` // where the key maps; known before sending
	Outcome     Outcome   `json:"outcome"`
	Offset      Offset    `json:"offset"`          // ok: the acknowledged offset; otherwise NoOffset
	LeaderEpoch Epoch     `json:"leader_epoch"`    // ok: if the client reported it; otherwise NoEpoch
	Error       string    `json:"error,omitempty"` // fail: the Kafka error name; info: what happened
	Invoke      Nanos     `json:"invoke"`
	Complete    Nanos     `json:"complete"`
}

// Poll is what one poll returned for one partition. A client poll that
// returns several partitions is recorded as one Poll per partition with the
// same times, in the order the client returned them. Empty polls may be left
// out.
type Poll struct {
	Process    Process    `json:"process"`
	Consumer   Consumer   `json:"consumer"`
	Group      string     `json:"group,omitempty"`  // group members only
	Member     string     `json:"member,omitempty"` // group members only
	Generation Generation `json:"generation"`       // group members; NoGeneration otherwise
	Partition  Partition  `json:"partition"`
	Records    []Record   `json:"records"` // in the order returned
	Invoke     Nanos      `json:"invoke"`
	Complete   Nanos      `json:"complete"`
}

// Commit is one offset commit (OffsetCommit) for one partition. Offset is
// the next offset to consume, as Kafka stores it. Reset marks an explicit
// reset (an admin or HTTP reset, or a commit meant to move the offset back),
// which may move the committed offset backwards.
type Commit struct {
	Process    Process    `json:"process"`
	Group      string     `json:"group"`
	Member     string     `json:"member,omitempty"` // empty for a reset outside the group
	Generation Generation `json:"generation"`       // NoGeneration for a commit outside the group
	Partition  Partition  `json:"partition"`
	Offset     Offset     `json:"offset"`
	Reset      bool       `json:"reset,omitempty"`
	Outcome    Outcome    `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	Invoke     Nanos      `json:"invoke"`
	Complete   Nanos      `json:"complete"`
}

// Rebalance is the body of Assign and Revoke: a group member's partitions
// changing, recorded when the client's callback runs.
type Rebalance struct {
	Process    Process     `json:"process"`
	Group      string      `json:"group"`
	Member     string      `json:"member"`
	Generation Generation  `json:"generation"`
	Partitions []Partition `json:"partitions"`
	At         Nanos       `json:"at"`
}

// Assign: a group member was given Partitions in Generation.
type Assign struct{ Rebalance }

// Revoke: a group member lost Partitions (eager rebalance, or lost
// partitions in a cooperative one). Generation is the one it had.
type Revoke struct{ Rebalance }

// Seek: a client set its position on a partition to Offset (a reader's
// start, a drain's start at the log start, a group member's explicit seek).
type Seek struct {
	Process   Process   `json:"process"`
	Partition Partition `json:"partition"`
	Offset    Offset    `json:"offset"`
	At        Nanos     `json:"at"`
}

// ReplicaEntry is one record of a replica's log: its offset, a digest of
// its key and value (Digest), and the leader epoch of its batch.
type ReplicaEntry struct {
	Offset Offset `json:"offset"`
	Digest string `json:"digest"`
	Epoch  Epoch  `json:"epoch"`
}

// ReplicaLog is one replica's log of one partition at the end of the run,
// for the records in [LogStart, HighWatermark) as that replica knows them
// (its local log start and its own HW). A long log may be split over several
// events for the same partition and broker, with the same LogStart and
// HighWatermark; the checker merges them.
type ReplicaLog struct {
	Partition     Partition      `json:"partition"`
	Broker        BrokerID       `json:"broker"`
	LogStart      Offset         `json:"log_start"`
	HighWatermark Offset         `json:"high_watermark"`
	Entries       []ReplicaEntry `json:"entries"`
}

// TieredRead is a re-read from object storage after local deletion: every
// record the reader found in [From, To).
type TieredRead struct {
	Process   Process   `json:"process"`
	Partition Partition `json:"partition"`
	From      Offset    `json:"from"`
	To        Offset    `json:"to"` // exclusive
	Records   []Record  `json:"records"`
	Invoke    Nanos     `json:"invoke"`
	Complete  Nanos     `json:"complete"`
}

// Fault is the body of FaultStart and FaultStop. ID pairs a stop with its
// start.
type Fault struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`   // e.g. "kill", "pause", "partition-net", "s3-errors"
	Target string            `json:"target"` // e.g. "broker-2", "broker-1<->etcd"
	Params map[string]string `json:"params,omitempty"`
	At     Nanos             `json:"at"`
}

// FaultStart: the runner began injecting a fault.
type FaultStart struct{ Fault }

// FaultStop: the runner healed a fault.
type FaultStop struct{ Fault }

// Final holds a partition's watermarks after the faults healed and the
// drain finished: the log start and the high watermark the drain read up to.
type Final struct {
	Partition     Partition `json:"partition"`
	LogStart      Offset    `json:"log_start"`
	HighWatermark Offset    `json:"high_watermark"`
	At            Nanos     `json:"at"`
}

// Kind implementations.
func (Send) Kind() Kind       { return KindSend }
func (Poll) Kind() Kind       { return KindPoll }
func (Commit) Kind() Kind     { return KindCommit }
func (Assign) Kind() Kind     { return KindAssign }
func (Revoke) Kind() Kind     { return KindRevoke }
func (Seek) Kind() Kind       { return KindSeek }
func (ReplicaLog) Kind() Kind { return KindReplicaLog }
func (TieredRead) Kind() Kind { return KindTieredRead }
func (FaultStart) Kind() Kind { return KindFaultStart }
func (FaultStop) Kind() Kind  { return KindFaultStop }
func (Final) Kind() Kind      { return KindFinal }

func (Send) isEvent()       {}
func (Poll) isEvent()       {}
func (Commit) isEvent()     {}
func (Assign) isEvent()     {}
func (Revoke) isEvent()     {}
func (Seek) isEvent()       {}
func (ReplicaLog) isEvent() {}
func (TieredRead) isEvent() {}
func (FaultStart) isEvent() {}
func (FaultStop) isEvent()  {}
func (Final) isEvent()      {}

// Digest is the digest of a record that ReplicaLog entries carry: FNV-1a 64
// over the key's length (4 bytes, big-endian), the key and the value, as 16
// hex digits. Any digest works if every replica's entries use the same one.
func Digest(key, value []byte) string {
	d := fnv.New64a()
	n := len(key)
	d.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	d.Write(key)
	d.Write(value)
	return fmt.Sprintf("%016x", d.Sum64())
}

// Validation. Errors name the field; the decoder adds the line number.

func (s Send) Validate() error {
	if err := first(
		nonNegative("process", int64(s.Process)),
		nonNegative("partition", int64(s.Partition)),
		nonEmpty("value", s.Value),
		epochValid("leader_epoch", s.LeaderEpoch),
		interval(s.Invoke, s.Complete),
	); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	switch s.Outcome {
	case OK:
		if s.Offset < 0 {
			return errors.New("send: outcome ok needs an offset >= 0")
		}
	case Fail:
		if s.Error == "" {
			return errors.New("send: outcome fail needs the Kafka error name")
		}
		fallthrough
	case Info:
		if s.Offset != NoOffset || s.LeaderEpoch != NoEpoch {
			return fmt.Errorf("send: outcome %s has offset %d and leader_epoch %d; both must be -1", s.Outcome, s.Offset, s.LeaderEpoch)
		}
	default:
		return fmt.Errorf("send: unknown outcome %q", s.Outcome)
	}
	return nil
}

func (p Poll) Validate() error {
	if err := first(
		nonNegative("process", int64(p.Process)),
		nonNegative("partition", int64(p.Partition)),
		interval(p.Invoke, p.Complete),
		records(p.Records),
	); err != nil {
		return fmt.Errorf("poll: %w", err)
	}
	switch p.Consumer {
	case ConsumerGroup:
		if p.Group == "" || p.Member == "" || p.Generation < 0 {
			return errors.New("poll: a group poll needs group, member and a generation >= 0")
		}
	case ConsumerReader, ConsumerDrain:
		if p.Group != "" || p.Member != "" || p.Generation != NoGeneration {
			return fmt.Errorf("poll: a %s poll has no group, member or generation (-1)", p.Consumer)
		}
	default:
		return fmt.Errorf("poll: unknown consumer %q", p.Consumer)
	}
	return nil
}

func (c Commit) Validate() error {
	if err := first(
		nonNegative("process", int64(c.Process)),
		nonEmpty("group", c.Group),
		nonNegative("partition", int64(c.Partition)),
		nonNegative("offset", int64(c.Offset)),
		interval(c.Invoke, c.Complete),
	); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if c.Generation < NoGeneration {
		return fmt.Errorf("commit: generation %d < -1", c.Generation)
	}
	switch c.Outcome {
	case OK, Info:
	case Fail:
		if c.Error == "" {
			return errors.New("commit: outcome fail needs the Kafka error name")
		}
	default:
		return fmt.Errorf("commit: unknown outcome %q", c.Outcome)
	}
	return nil
}

func (r Rebalance) validate(kind Kind) error {
	err := first(
		nonNegative("process", int64(r.Process)),
		nonEmpty("group", r.Group),
		nonEmpty("member", r.Member),
		nonNegative("generation", int64(r.Generation)),
		nonNegative("at", int64(r.At)),
	)
	for _, p := range r.Partitions {
		if err == nil {
			err = nonNegative("partition", int64(p))
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

func (a Assign) Validate() error { return a.validate(KindAssign) }
func (r Revoke) Validate() error { return r.validate(KindRevoke) }

func (s Seek) Validate() error {
	if err := first(
		nonNegative("process", int64(s.Process)),
		nonNegative("partition", int64(s.Partition)),
		nonNegative("offset", int64(s.Offset)),
		nonNegative("at", int64(s.At)),
	); err != nil {
		return fmt.Errorf("seek: %w", err)
	}
	return nil
}

func (r ReplicaLog) Validate() error {
	if err := first(
		nonNegative("partition", int64(r.Partition)),
		nonNegative("broker", int64(r.Broker)),
		watermarks(r.LogStart, r.HighWatermark),
	); err != nil {
		return fmt.Errorf("replica-log: %w", err)
	}
	for _, e := range r.Entries {
		if e.Offset < r.LogStart || e.Offset >= r.HighWatermark {
			return fmt.Errorf("replica-log: entry offset %d outside [%d, %d)", e.Offset, r.LogStart, r.HighWatermark)
		}
		if err := first(nonEmpty("digest", e.Digest), epochValid("epoch", e.Epoch)); err != nil {
			return fmt.Errorf("replica-log: offset %d: %w", e.Offset, err)
		}
	}
	return nil
}

func (t TieredRead) Validate() error {
	if err := first(
		nonNegative("process", int64(t.Process)),
		nonNegative("partition", int64(t.Partition)),
		watermarks(t.From, t.To),
		interval(t.Invoke, t.Complete),
		records(t.Records),
	); err != nil {
		return fmt.Errorf("tiered-read: %w", err)
	}
	for _, r := range t.Records {
		if r.Offset < t.From || r.Offset >= t.To {
			return fmt.Errorf("tiered-read: record offset %d outside [%d, %d)", r.Offset, t.From, t.To)
		}
	}
	return nil
}

func (f Fault) validate(kind Kind) error {
	if err := first(nonEmpty("name", f.Name), nonNegative("id", int64(f.ID)), nonNegative("at", int64(f.At))); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

func (f FaultStart) Validate() error { return f.validate(KindFaultStart) }
func (f FaultStop) Validate() error  { return f.validate(KindFaultStop) }

func (f Final) Validate() error {
	if err := first(
		nonNegative("partition", int64(f.Partition)),
		watermarks(f.LogStart, f.HighWatermark),
		nonNegative("at", int64(f.At)),
	); err != nil {
		return fmt.Errorf("final: %w", err)
	}
	return nil
}

func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func nonNegative(field string, v int64) error {
	if v < 0 {
		return fmt.Errorf("%s %d < 0", field, v)
	}
	return nil
}

func nonEmpty(field, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", field)
	}
	return nil
}

func epochValid(field string, e Epoch) error {
	if e < NoEpoch {
		return fmt.Errorf("%s %d < -1", field, e)
	}
	return nil
}

func interval(invoke, complete Nanos) error {
	if invoke < 0 || complete < invoke {
		return fmt.Errorf("times invoke %d, complete %d: need 0 <= invoke <= complete", invoke, complete)
	}
	return nil
}

func watermarks(start, end Offset) error {
	if start < 0 || end < start {
		return fmt.Errorf("range [%d, %d): need 0 <= start <= end", start, end)
	}
	return nil
}

func records(rs []Record) error {
	for i, r := range rs {
		if r.Offset < 0 {
			return fmt.Errorf("record %d: offset %d < 0", i, r.Offset)
		}
		if err := epochValid("record "+strconv.Itoa(i)+" leader_epoch", r.LeaderEpoch); err != nil {
			return err
		}
	}
	return nil
}
