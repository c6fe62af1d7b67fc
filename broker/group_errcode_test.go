package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/group"
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
		{errInvalidGroupID, kerr.InvalidGroupID},
		{errGroupNotFound, kerr.GroupIDNotFound},
		{fmt.Errorf("%w: %w", group.ErrUnknownMember, errGroupNotFound), kerr.UnknownMemberID},
		{fmt.Errorf("%w: %w", group.ErrIllegalGeneration, errGroupNotFound), kerr.IllegalGeneration},
		{errCoordinatorUnavailable, kerr.CoordinatorNotAvailable},
		{errOffsetMetadataTooLarge, kerr.OffsetMetadataTooLarge},
		{errGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
		{errCoordinatorKeyType, kerr.InvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := errorCode(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want.Code {
				t.Fatalf("errorCode = %d, want %d (%s)", got, tc.want.Code, tc.want.Message)
			}
		})
	}
}
