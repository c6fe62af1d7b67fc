package wal

// stamp.go owns the one shape shared by the wal's small fixed records: the
// logstart file, a journal file's header and the journal's CHECKPOINT file
// (all drawn in doc.go). Each holds one non-negative i64 under its own magic:
//
//	 0        4          6          8           16
//	+--------+----------+----------+-----------+--------+
//	| magic  | version  | reserved | value     | crc    |   crc: CRC-32C of bytes 0..16
//	| [4]u8  | u16      | u16 = 0  | i64 >= 0  | u32    |
//	+--------+----------+----------+-----------+--------+

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

const stampSize = 20

func encodeStamp(magic string, version uint16, v int64) []byte {
	b := make([]byte, stampSize)
	copy(b, magic)
	binary.BigEndian.PutUint16(b[4:], version)
	binary.BigEndian.PutUint64(b[8:], uint64(v))
	binary.BigEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return b
}

// decodeStamp reads the stamp at the start of b, which must be all of b when
// whole is set. A version other than version is ErrUnknownVersion (checked
// before the size, which a newer version may change); anything else wrong
// is ErrCorrupt. what names the record in errors.
func decodeStamp(b []byte, magic string, version uint16, whole bool, what string) (int64, error) {
	if len(b) < 8 || string(b[:4]) != magic {
		return 0, fmt.Errorf("wal: %s: bad magic or size %d: %w", what, len(b), ErrCorrupt)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != version {
		return 0, fmt.Errorf("wal: %s: version %d, this build reads %d: %w", what, v, version, ErrUnknownVersion)
	}
	if len(b) < stampSize || whole && len(b) != stampSize {
		return 0, fmt.Errorf("wal: %s: %d bytes, want %d: %w", what, len(b), stampSize, ErrCorrupt)
	}
	if got, want := binary.BigEndian.Uint32(b[16:]), crc32.Checksum(b[:16], castagnoli); got != want {
		return 0, fmt.Errorf("wal: %s: crc %08x, computed %08x: %w", what, got, want, ErrCorrupt)
	}
	v := int64(binary.BigEndian.Uint64(b[8:]))
	if v < 0 {
		return 0, fmt.Errorf("wal: %s: negative value %d: %w", what, v, ErrCorrupt)
	}
	return v, nil
}
