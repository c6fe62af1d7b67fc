package loadgen

// This file declares what a run needs from a messaging system, so the
// scenarios are written once for Kafka and JetStream.

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"time"
)

// HeaderTimestamp names the record header holding the scheduled send time:
// 8 bytes, big-endian Unix nanoseconds in Kafka; decimal Unix nanoseconds
// in NATS and over HTTP, whose headers are text. A Kafka consumer reads
// both: a decimal Unix nanosecond time of this era has 19 digits, never 8.
const HeaderTimestamp = "lg-ts"

// ErrGroupsUnsupported is returned when a consumer group is required and
// the cluster does not serve the group APIs (Kafka: no JoinGroup, key 11).
var ErrGroupsUnsupported = errors.New("loadgen: the cluster does not support consumer groups")

// Message is one record to publish.
type Message struct {
	Key       []byte
	Value     []byte
	Partition int32     // JetStream subject suffix; Kafka ignores it (the partitioner decides)
	Scheduled time.Time // written into HeaderTimestamp
	Seq       int64     // per-producer sequence (JetStream de-duplication ID when idempotent)
}

// Delivered is one received record.
type Delivered struct {
	Partition   int32
	Offset      int64
	Bytes       int
	Scheduled   time.Time // from HeaderTimestamp; zero if absent
	Redelivered bool      // the system says so (JetStream delivery count > 1)
}

// System is a messaging system under test.
type System interface {
	// Setup (re)creates the topic or stream with the given partitions.
	Setup(ctx context.Context, topic string, partitions int) error
	// GroupsSupported reports whether consumer groups work.
	GroupsSupported(ctx context.Context) (bool, error)
	// OrderedPartitions is true when each partition is consumed in offset
	// order by one member at a time, so an offset at or below the highest
	// one seen is a replay.
	OrderedPartitions() bool
	NewProducer(ctx context.Context, id int) (Producer, error)
	NewConsumer(ctx context.Context, spec ConsumerSpec) (Consumer, error)
	// Teardown deletes the topic or stream.
	Teardown(ctx context.Context, topic string) error
	Close()
}

// AckFunc is called once per published message with nil on acknowledgment.
type AckFunc func(err error)

// Producer publishes asynchronously with a bounded in-flight budget.
type Producer interface {
	// Publish blocks while the in-flight budget is full, then queues msg;
	// done runs later on another goroutine.
	Publish(ctx context.Context, msg *Message, done AckFunc) error
	// Flush waits until every queued message has been acknowledged or failed.
	Flush(ctx context.Context) error
	Close()
}

// ConsumerSpec describes one consumer member.
type ConsumerSpec struct {
	ID         int
	Topic      string
	Group      string  // empty: direct assignment of Partitions
	Partitions []int32 // direct assignment only
	FromStart  bool
}

// Sink receives what a consumer member gets.
type Sink interface {
	Deliver(batch []Delivered)
	Error(err error)
}

// Consumer is one member.
type Consumer interface {
	// Run hands batches to sink until ctx ends or Kill is called; sink is
	// called from Run's goroutine only.
	Run(ctx context.Context, sink Sink) error
	// Ready is closed once the member can receive: it has partitions
	// assigned (group) or has started fetching. A group member left
	// without partitions is never ready.
	Ready() <-chan struct{}
	// Kill stops abruptly: no leave, no commit, connections dropped.
	Kill()
	// Close leaves the group and releases resources.
	Close()
}

func encodeTimestamp(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	return b[:]
}

func decodeTimestamp(b []byte) time.Time {
	if len(b) != 8 {
		if ns, err := strconv.ParseInt(string(b), 10, 64); err == nil && ns > 0 {
			return time.Unix(0, ns) // written as text (an HTTP publish)
		}
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)))
}
