package node

// This file owns the seam through which the produce paths reach the
// object service of large payloads (issue 21): a produced envelope record's
// reference (payload/ref) is claimed for the producing tenant before its
// batch is appended. broker/envelope does the checking; the object service
// (upload sessions) implements RefClaimer and is set in Config.Refs.

import (
	"context"

	"github.com/sluice-mq/sluice/payload/ref"
)

// RefClaimer checks that r names a completed upload session of tenant,
// unexpired, with r's size and checksum, and marks it published. It
// returns nil for a session already published (a retried produce claims
// again), and otherwise an error wrapping ref.ErrUnknown, ref.ErrForeign,
// ref.ErrExpired or ref.ErrMismatch; any other error is the service's own
// failure (the produce is refused as retriable).
type RefClaimer interface {
	Claim(ctx context.Context, tenant string, r ref.Ref) error
}
