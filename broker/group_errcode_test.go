package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func TestGroupErrorCodes(t *testing.T) {
	tests := []struct {
		err  error
		want *kerr.Error
	}{
		{group.ErrUnknownMember, kerr.UnknownMemberID},
		{group.ErrIllegalGeneration, kerr.IllegalGeneration},
		{group.ErrFencedInstance, kerr.FencedInstanceID},
		{group.ErrRebalanceInProgress, kerr.RebalanceInProgress},
		{group.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
		{group.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
		{group.ErrMemberIDRequired, kerr.MemberIDRequired},
		{group.ErrNotEmpty, kerr.NonEmptyGroup},
		{group.ErrDead, kerr.CoordinatorNotAvailable},
		{node.ErrInvalidGroupID, kerr.InvalidGroupID},
		{node.ErrGroupNotFound, kerr.GroupIDNotFound},
		{fmt.Errorf("%w: %w", group.ErrUnknownMember, node.ErrGroupNotFound), kerr.UnknownMemberID},
		{fmt.Errorf("%w: %w", group.ErrIllegalGeneration, node.ErrGroupNotFound), kerr.IllegalGeneration},
		{node.ErrCoordinatorUnavailable, kerr.CoordinatorNotAvailable},
		{node.ErrOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
		{node.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
		{node.ErrCoordinatorKeyType, kerr.InvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := node.ErrorCode(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want.Code {
				t.Fatalf("errorCode = %d, want %d (%s)", got, tc.want.Code, tc.want.Message)
			}
		})
	}
}
