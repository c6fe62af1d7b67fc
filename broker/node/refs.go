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

// RefSite is where the records naming a reference are about to be
// appended: the claim records it in the reference ledger (meta/largerefs.go)
// before they are, so the object outlives them.
type RefSite struct {
	TopicID   [16]byte
	Topic     string // the internal name
	Partition int32
}

// RefClaimer checks that r names a completed upload session of tenant,
// unexpired, with r's size and checksum, marks it published and records
// the reference of partition at in the ledger. It returns nil for a
// session already published (a retried produce, a retry or dead-letter
// copy, a redrive claim again), and otherwise an error wrapping
// ref.ErrUnknown, ref.ErrForeign, ref.ErrExpired (also: the object is
// condemned, every record naming it is gone) or ref.ErrMismatch; any other
// error is the service's own failure (the produce is refused as
// retriable).
type RefClaimer interface {
	Claim(ctx context.Context, tenant string, r ref.Ref, at RefSite) error
}
