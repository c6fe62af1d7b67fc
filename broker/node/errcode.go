package node

// This file owns the one mapping from internal errors to Kafka error codes.
// Kafka codes exist only at the protocol edge; everything inside the broker
// returns wrapped Go errors.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
	"github.com/sluice-mq/sluice/wal"
)

// The partition's errors under the names the rest of the broker uses.
var (
	ErrShuttingDown         = partition.ErrShuttingDown
	ErrNotLeader            = partition.ErrNotLeader
	ErrRequestTimedOut      = errors.New("request timed out before a quorum of replicas held the batch")
	errNotEnoughReplicas    = partition.ErrNotEnoughReplicas
	errInvalidProducerEpoch = partition.ErrInvalidProducerEpoch
	errOutOfOrderSequence   = partition.ErrOutOfOrderSequence
	ErrStorage              = partition.ErrStorage
)

var (
	ErrUnknownTopic        = errors.New("unknown topic or partition")
	errInvalidTopic        = errors.New("invalid topic name")
	ErrInvalidPartitions   = errors.New("invalid number of partitions")
	ErrInvalidReplication  = errors.New("invalid replication factor")
	ErrInvalidRecord       = errors.New("invalid record")
	ErrCorruptMessage      = errors.New("corrupt record batch")
	ErrMessageTooLarge     = errors.New("record batch too large")
	ErrInvalidRequiredAcks = errors.New("acks must be -1, 0 or 1")
	ErrUnsupportedVersion  = errors.New("unsupported version")
	ErrInvalidRequest      = errors.New("invalid request")
	errInvalidTimestamp    = errors.New("invalid timestamp")

	// Group coordinator errors (coordinator.go, group_*.go).
	ErrInvalidGroupID         = errors.New("invalid group id")
	ErrGroupNotFound          = errors.New("group not found")
	ErrCoordinatorUnavailable = errors.New("group coordinator not available")
	ErrOffsetMetadataTooLarge = errors.New("offset metadata too large")
	ErrGroupSubscribedToTopic = errors.New("group is subscribed to the topic")
	ErrCoordinatorKeyType     = errors.New("unsupported coordinator key type")

	// ErrTransactionsUnsupported refuses transactional ids. Its code is
	// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: not retriable, so franz-go,
	// librdkafka and the Java client fail at once (librdkafka and Java show
	// the message), where COORDINATOR_NOT_AVAILABLE made them retry forever.
	ErrTransactionsUnsupported = errors.New("transactions are not supported by this broker yet")
)

// ErrorCode maps an error to the Kafka error code a client should see.
// A nil error is 0. Unknown errors are UNKNOWN_SERVER_ERROR, never silence.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var cfgErr *errInvalidConfig
	var kafkaErr *kerr.Error
	var throttle *ThrottleError
	switch {
	case errors.As(err, &throttle):
		return kerr.ThrottlingQuotaExceeded.Code
	case errors.As(err, &kafkaErr):
		return kafkaErr.Code
	case errors.As(err, &cfgErr):
		return kerr.InvalidConfig.Code
	}
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return kerr.UnknownServerError.Code
}

var errorCodes = []struct {
	err  error
	code int16
}{
	{partition.ErrShuttingDown, kerr.NotLeaderForPartition.Code},
	{partition.ErrBackpressure, kerr.RequestTimedOut.Code},
	{partition.ErrAppendTooLate, kerr.RequestTimedOut.Code},
	{ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{partition.ErrNotLeader, kerr.NotLeaderForPartition.Code},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
	{ErrRequestTimedOut, kerr.RequestTimedOut.Code},
	{meta.ErrTopicNotFound, kerr.UnknownTopicOrPartition.Code},
	{meta.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{meta.ErrConflict, kerr.RequestTimedOut.Code}, // lost a CAS race; the client retries
	{errInvalidTopic, kerr.InvalidTopicException.Code},
	{ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{ErrInvalidReplication, kerr.InvalidReplicationFactor.Code},
	{ErrInvalidRecord, kerr.InvalidRecord.Code},
	{ErrCorruptMessage, kerr.CorruptMessage.Code},
	{wal.ErrCorrupt, kerr.CorruptMessage.Code},
	{wal.ErrInvalidBatch, kerr.CorruptMessage.Code},
	{ErrMessageTooLarge, kerr.MessageTooLarge.Code},
	{ErrInvalidRequiredAcks, kerr.InvalidRequiredAcks.Code},
	{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{ErrUnsupportedVersion, kerr.UnsupportedVersion.Code},
	{ErrInvalidRequest, kerr.InvalidRequest.Code},
	{errInvalidTimestamp, kerr.InvalidTimestamp.Code},
	{wal.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{partition.ErrStorage, kerr.KafkaStorageError.Code},
	{ErrRemoteRead, kerr.KafkaStorageError.Code},
	{errDiskFull, kerr.KafkaStorageError.Code},
	{ErrCountQuota, kerr.PolicyViolation.Code},
	{ErrDiskWatermark, kerr.PolicyViolation.Code},
	{ErrStorageQuota, kerr.KafkaStorageError.Code}, // retriable: storage.go says why
	{ErrDiskOverQuota, kerr.KafkaStorageError.Code},
	{wal.ErrClosed, kerr.NotLeaderForPartition.Code},
	{group.ErrUnknownMember, kerr.UnknownMemberID.Code},
	{group.ErrIllegalGeneration, kerr.IllegalGeneration.Code},
	{group.ErrFencedInstance, kerr.FencedInstanceID.Code},
	{group.ErrRebalanceInProgress, kerr.RebalanceInProgress.Code},
	{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout.Code},
	{group.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol.Code},
	{group.ErrMemberIDRequired, kerr.MemberIDRequired.Code},
	{group.ErrNotEmpty, kerr.NonEmptyGroup.Code},
	{group.ErrDead, kerr.CoordinatorNotAvailable.Code},
	{ErrInvalidGroupID, kerr.InvalidGroupID.Code},
	{ErrGroupNotFound, kerr.GroupIDNotFound.Code},
	{ErrCoordinatorUnavailable, kerr.CoordinatorNotAvailable.Code},
	{ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge.Code},
	// Retriable: read the committed state again (queue/commitcheck.go).
	{queue.ErrStaleState, kerr.UnstableOffsetCommit.Code},
	{ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic.Code},
	{ErrCoordinatorKeyType, kerr.InvalidRequest.Code},
	{ErrTransactionsUnsupported, kerr.TransactionalIDAuthorizationFailed.Code},
	{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
	{context.Canceled, kerr.RequestTimedOut.Code},
}
