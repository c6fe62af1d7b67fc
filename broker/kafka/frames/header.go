package frames

// This file owns the skipping of a flexible request header's tagged fields
// (KIP-482): the broker knows no header tags, so it reads past them to the
// body.
//
// Invariant: a section of more than 64 tags, or one whose varints or
// lengths run past the frame, is an error; SkipTags never reads outside b.

import (
	"encoding/binary"
	"errors"
)

// SkipTags skips the tagged-field section at the start of b (a flexible
// request header's, KIP-482) and returns what follows it.
func SkipTags(b []byte) ([]byte, error) {
	n, sz := binary.Uvarint(b)
	if sz <= 0 || n > 64 {
		return nil, errors.New("bad header tag count")
	}
	b = b[sz:]
	for i := uint64(0); i < n; i++ {
		_, ksz := binary.Uvarint(b)
		if ksz <= 0 {
			return nil, errors.New("bad header tag key")
		}
		b = b[ksz:]
		l, lsz := binary.Uvarint(b)
		if lsz <= 0 || l > uint64(len(b)-lsz) {
			return nil, errors.New("bad header tag length")
		}
		b = b[lsz+int(l):]
	}
	return b, nil
}
