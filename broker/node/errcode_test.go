package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want *kerr.Error
	}{
		{"unknown topic", fmt.Errorf("x: %w", ErrUnknownTopic), kerr.UnknownTopicOrPartition},
		{"not leader", fmt.Errorf("x: %w", ErrNotLeader), kerr.NotLeaderForPartition},
		{"not enough replicas", fmt.Errorf("x: %w", errNotEnoughReplicas), kerr.NotEnoughReplicas},
		{"request timed out", fmt.Errorf("x: %w", ErrRequestTimedOut), kerr.RequestTimedOut},
		{"meta not found", fmt.Errorf("x: %w", meta.ErrTopicNotFound), kerr.UnknownTopicOrPartition},
		{"exists", meta.ErrTopicExists, kerr.TopicAlreadyExists},
		{"invalid config", InvalidConfig("bad"), kerr.InvalidConfig},
		{"invalid topic", errInvalidTopic, kerr.InvalidTopicException},
		{"partitions", ErrInvalidPartitions, kerr.InvalidPartitions},
		{"record", ErrInvalidRecord, kerr.InvalidRecord},
		{"crc", fmt.Errorf("%w: %w", ErrCorruptMessage, wal.ErrCorrupt), kerr.CorruptMessage},
		{"wal corrupt inside storage", fmt.Errorf("%w: %w", ErrStorage, wal.ErrCorrupt), kerr.CorruptMessage},
		{"storage", fmt.Errorf("%w: disk", ErrStorage), kerr.KafkaStorageError},
		{"too large", ErrMessageTooLarge, kerr.MessageTooLarge},
		{"acks", ErrInvalidRequiredAcks, kerr.InvalidRequiredAcks},
		{"epoch", errInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{"sequence", errOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{"version", ErrUnsupportedVersion, kerr.UnsupportedVersion},
		{"out of range", wal.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{"fenced epoch", fmt.Errorf("x: %w", kerr.FencedLeaderEpoch), kerr.FencedLeaderEpoch},
		{"transactions", fmt.Errorf("x: %w", ErrTransactionsUnsupported), kerr.TransactionalIDAuthorizationFailed},
		{"count quota", fmt.Errorf("%w: topics", ErrCountQuota), kerr.PolicyViolation},
		{"first watermark", fmt.Errorf("%w: level 1", ErrDiskWatermark), kerr.PolicyViolation},
		{"storage quota", fmt.Errorf("%w: acme", ErrStorageQuota), kerr.KafkaStorageError},
		{"third watermark", fmt.Errorf("%w: acme", ErrDiskOverQuota), kerr.KafkaStorageError},
		{"mutation rate", fmt.Errorf("x: %w", &ThrottleError{Wait: 1}), kerr.ThrottlingQuotaExceeded},
		{"unmapped", errors.New("surprise"), kerr.UnknownServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorCode(tt.err); got != tt.want.Code {
				t.Fatalf("errorCode(%v) = %d, want %d (%s)", tt.err, got, tt.want.Code, tt.want.Message)
			}
		})
	}
	if ErrorCode(nil) != 0 {
		t.Fatal("nil error must map to 0")
	}
}
