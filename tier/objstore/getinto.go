package objstore

// getinto.go owns the optional RangeReader interface: a ranged read into
// the caller's buffer, so that a reader streaming a large object in chunks
// reuses one buffer instead of allocating each chunk (broker/largeobj's
// downloads).
//
// Invariant: GetInto fills p from off and returns fewer than len(p) bytes
// only when the object ends before off+len(p); a missing key is
// ErrNotFound, an off beyond the end ErrInvalidRange, as for Get.

import "context"

// RangeReader is a store that can read a range into a given buffer. The
// S3 and memory stores implement it.
type RangeReader interface {
	GetInto(ctx context.Context, key string, off int64, p []byte) (int, error)
}
