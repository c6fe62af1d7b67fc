package partition

import "errors"

// Sentinel errors a partition returns, wrapped with what failed. The broker
// maps each to one Kafka error code (broker/errcode.go); their texts reach
// clients in error messages, so they name no package.
var (
	// ErrShuttingDown: the owner is stopping (or stopped); the append or
	// request was not applied.
	ErrShuttingDown = errors.New("broker is shutting down")
	// ErrBackpressure: the append queue is full.
	ErrBackpressure = errors.New("partition queue is full")
	// ErrAppendTooLate: the batch reached the log after its NotAfter time
	// and was not appended (retriable: a retry claims its references anew).
	ErrAppendTooLate = errors.New("batch reached the log after its deadline")
	// ErrNotLeader: this replica does not lead the partition (any more), or
	// the log changed under a replica fetch's answer.
	ErrNotLeader = errors.New("this broker does not lead the partition")
	// ErrNotEnoughReplicas: fewer in-sync replicas than min.insync.replicas.
	ErrNotEnoughReplicas = errors.New("fewer in-sync replicas than min.insync.replicas")
	// ErrInvalidProducerEpoch: an idempotent producer's epoch is older than
	// the partition has seen.
	ErrInvalidProducerEpoch = errors.New("producer epoch is stale")
	// ErrOutOfOrderSequence: an idempotent producer's batch does not follow
	// its last one.
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	// ErrStorage: the log failed a write or an fsync (sticky: the partition
	// refuses appends until reopened), or another storage operation failed.
	ErrStorage = errors.New("storage error")
	// ErrNotAppended marks a refusal given before the batch reached the
	// log (NotAppended): nothing of it was appended, so it may be sent to
	// another broker even without a producer id to deduplicate it. It is
	// never the only mark: the refusal's own sentinel says why.
	ErrNotAppended = errors.New("not appended")
)

// NotAppended marks err with ErrNotAppended, its message unchanged; nil
// stays nil.
func NotAppended(err error) error {
	if err == nil {
		return nil
	}
	return notAppended{err}
}

type notAppended struct{ error }

func (e notAppended) Unwrap() []error { return []error{e.error, ErrNotAppended} }
