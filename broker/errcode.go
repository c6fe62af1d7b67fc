package broker

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
	"github.com/sluice-mq/sluice/wal"
)

// The partition's errors under the names the rest of the broker uses.
var (
	errShuttingDown         = partition.ErrShuttingDown
	errNotLeader            = partition.ErrNotLeader
	errRequestTimedOut      = errors.New("request timed out before a quorum of replicas held the batch")
	errNotEnoughReplicas    = partition.ErrNotEnoughReplicas
	errInvalidProducerEpoch = partition.ErrInvalidProducerEpoch
	errOutOfOrderSequence   = partition.ErrOutOfOrderSequence
	errStorage              = partition.ErrStorage
)

var (
	errUnknownTopic        = errors.New("unknown topic or partition")
	errInvalidTopic        = errors.New("invalid topic name")
	errInvalidPartitions   = errors.New("invalid number of partitions")
	errInvalidReplication  = errors.New("invalid replication factor")
	errInvalidRecord       = errors.New("invalid record")
	errCorruptMessage      = errors.New("corrupt record batch")
	errMessageTooLarge     = errors.New("record batch too large")
	errInvalidRequiredAcks = errors.New("acks must be -1, 0 or 1")
	errUnsupportedVersion  = errors.New("unsupported version")
	errInvalidRequest      = errors.New("invalid request")
	errInvalidTimestamp    = errors.New("invalid timestamp")

	// Group coordinator errors (coordinator.go, group_*.go).
	errInvalidGroupID         = errors.New("invalid group id")
	errGroupNotFound          = errors.New("group not found")
	errCoordinatorUnavailable = errors.New("group coordinator not available")
	errOffsetMetadataTooLarge = errors.New("offset metadata too large")
	errGroupSubscribedToTopic = errors.New("group is subscribed to the topic")
	errCoordinatorKeyType     = errors.New("unsupported coordinator key type")

	// errTransactionsUnsupported refuses transactional ids. Its code is
	// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: not retriable, so franz-go,
	// librdkafka and the Java client fail at once (librdkafka and Java show
	// the message), where COORDINATOR_NOT_AVAILABLE made them retry forever.
	errTransactionsUnsupported = errors.New("transactions are not supported by this broker yet")
)

// errorCode maps an error to the Kafka error code a client should see.
// A nil error is 0. Unknown errors are UNKNOWN_SERVER_ERROR, never silence.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var cfgErr *errInvalidConfig
	var kafkaErr *kerr.Error
	switch {
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
	{errUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{partition.ErrNotLeader, kerr.NotLeaderForPartition.Code},
	{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas.Code},
	{errRequestTimedOut, kerr.RequestTimedOut.Code},
	{meta.ErrTopicNotFound, kerr.UnknownTopicOrPartition.Code},
	{meta.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{meta.ErrConflict, kerr.RequestTimedOut.Code}, // lost a CAS race; the client retries
	{errInvalidTopic, kerr.InvalidTopicException.Code},
	{errInvalidPartitions, kerr.InvalidPartitions.Code},
	{errInvalidReplication, kerr.InvalidReplicationFactor.Code},
	{errInvalidRecord, kerr.InvalidRecord.Code},
	{errCorruptMessage, kerr.CorruptMessage.Code},
	{wal.ErrCorrupt, kerr.CorruptMessage.Code},
	{wal.ErrInvalidBatch, kerr.CorruptMessage.Code},
	{errMessageTooLarge, kerr.MessageTooLarge.Code},
	{errInvalidRequiredAcks, kerr.InvalidRequiredAcks.Code},
	{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
	{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
	{errUnsupportedVersion, kerr.UnsupportedVersion.Code},
	{errInvalidRequest, kerr.InvalidRequest.Code},
	{errInvalidTimestamp, kerr.InvalidTimestamp.Code},
	{wal.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
	{partition.ErrStorage, kerr.KafkaStorageError.Code},
	{errRemoteRead, kerr.KafkaStorageError.Code},
	{errDiskFull, kerr.KafkaStorageError.Code},
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
	{errInvalidGroupID, kerr.InvalidGroupID.Code},
	{errGroupNotFound, kerr.GroupIDNotFound.Code},
	{errCoordinatorUnavailable, kerr.CoordinatorNotAvailable.Code},
	{errOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge.Code},
	{errGroupSubscribedToTopic, kerr.GroupSubscribedToTopic.Code},
	{errCoordinatorKeyType, kerr.InvalidRequest.Code},
	{errTransactionsUnsupported, kerr.TransactionalIDAuthorizationFailed.Code},
	{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
	{context.Canceled, kerr.RequestTimedOut.Code},
}
