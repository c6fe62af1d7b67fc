package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
)

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want *kerr.Error
	}{
		{"unknown topic", fmt.Errorf("x: %w", errUnknownTopic), kerr.UnknownTopicOrPartition},
		{"not leader", fmt.Errorf("x: %w", errNotLeader), kerr.NotLeaderForPartition},
		{"not enough replicas", fmt.Errorf("x: %w", errNotEnoughReplicas), kerr.NotEnoughReplicas},
		{"request timed out", fmt.Errorf("x: %w", errRequestTimedOut), kerr.RequestTimedOut},
		{"meta not found", fmt.Errorf("x: %w", meta.ErrTopicNotFound), kerr.UnknownTopicOrPartition},
		{"exists", meta.ErrTopicExists, kerr.TopicAlreadyExists},
		{"invalid config", invalidConfig("bad"), kerr.InvalidConfig},
		{"invalid topic", errInvalidTopic, kerr.InvalidTopicException},
		{"partitions", errInvalidPartitions, kerr.InvalidPartitions},
		{"record", errInvalidRecord, kerr.InvalidRecord},
		{"crc", fmt.Errorf("%w: %w", errCorruptMessage, wal.ErrCorrupt), kerr.CorruptMessage},
		{"wal corrupt inside storage", fmt.Errorf("%w: %w", errStorage, wal.ErrCorrupt), kerr.CorruptMessage},
		{"storage", fmt.Errorf("%w: disk", errStorage), kerr.KafkaStorageError},
		{"too large", errMessageTooLarge, kerr.MessageTooLarge},
		{"acks", errInvalidRequiredAcks, kerr.InvalidRequiredAcks},
		{"epoch", errInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{"sequence", errOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{"version", errUnsupportedVersion, kerr.UnsupportedVersion},
		{"out of range", wal.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{"fenced epoch", fmt.Errorf("x: %w", kerr.FencedLeaderEpoch), kerr.FencedLeaderEpoch},
		{"transactions", fmt.Errorf("x: %w", errTransactionsUnsupported), kerr.TransactionalIDAuthorizationFailed},
		{"unmapped", errors.New("surprise"), kerr.UnknownServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorCode(tt.err); got != tt.want.Code {
				t.Fatalf("errorCode(%v) = %d, want %d (%s)", tt.err, got, tt.want.Code, tt.want.Message)
			}
		})
	}
	if errorCode(nil) != 0 {
		t.Fatal("nil error must map to 0")
	}
}
