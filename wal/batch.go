package wal

// batch.go owns the fixed 61-byte header of a Kafka v2 record batch: parsing,
// validation, CRC-32C checking and stamping of the two fields the broker
// rewrites (baseOffset, partitionLeaderEpoch). Records are never decoded here.
//
// Invariant: a batch accepted by validateBatch is exactly BatchHeaderSize +
// records bytes long, carries magic 2 and a CRC-32C over bytes 21..end that
// matches, and has LastOffsetDelta >= 0.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Offset is a Kafka offset within one partition.
type Offset int64

// Epoch is a partition leader epoch.
type Epoch int32

// Byte positions of the v2 record batch header fields (see doc.go).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// BatchHeaderSize is the size of a v2 record batch header; records follow it.
	BatchHeaderSize = 61
	// batchLengthOverhead is the part of a batch not counted by its length field.
	batchLengthOverhead = 12
	// minBatchLength is the smallest valid length field (a header and no records).
	minBatchLength = BatchHeaderSize - batchLengthOverhead
	// batchMagic is the only record batch format the log stores.
	batchMagic = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader holds the fixed fields of a v2 record batch.
type BatchHeader struct {
	BaseOffset      Offset
	Length          int32 // bytes after the Length field: the batch is Length+12 bytes
	LeaderEpoch     Epoch
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the whole batch's size in bytes.
func (h BatchHeader) Size() int { return int(h.Length) + batchLengthOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() Offset { return h.BaseOffset + Offset(h.LastOffsetDelta) }

// ParseBatchHeader decodes the fixed header at the start of b, which may be
// just the header or a whole batch. It fails with ErrInvalidBatch when b is
// shorter than a header, the magic is not 2, or the length field is below the
// header size; it checks neither the CRC nor that b holds the whole batch.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("wal: batch header needs %d bytes, have %d: %w", BatchHeaderSize, len(b), ErrInvalidBatch)
	}
	h := BatchHeader{
		BaseOffset:      Offset(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:          int32(binary.BigEndian.Uint32(b[offLength:])),
		LeaderEpoch:     Epoch(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
	if h.Magic != batchMagic {
		return h, fmt.Errorf("wal: batch magic %d, want %d: %w", h.Magic, batchMagic, ErrInvalidBatch)
	}
	if h.Length < minBatchLength {
		return h, fmt.Errorf("wal: batch length %d below header size: %w", h.Length, ErrInvalidBatch)
	}
	return h, nil
}

// CheckCRC verifies the CRC-32C of the whole batch b (bytes 21 to the end of
// the batch as given by its length field). It returns ErrInvalidBatch if b is
// not a whole batch and ErrCorrupt if the checksum does not match.
func CheckCRC(b []byte) error {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return err
	}
	if h.Size() > len(b) {
		return fmt.Errorf("wal: batch of %d bytes truncated to %d: %w", h.Size(), len(b), ErrInvalidBatch)
	}
	if got := crc32.Checksum(b[offAttributes:h.Size()], castagnoli); got != h.CRC {
		return fmt.Errorf("wal: batch at offset %d: crc %08x, header says %08x: %w", h.BaseOffset, got, h.CRC, ErrCorrupt)
	}
	return nil
}

// validateBatch checks that b is exactly one whole well-formed v2 batch.
func validateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("wal: batch length field says %d bytes, have %d: %w", h.Size(), len(b), ErrInvalidBatch)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("wal: lastOffsetDelta %d < 0: %w", h.LastOffsetDelta, ErrInvalidBatch)
	}
	if h.BaseOffset > math.MaxInt64-Offset(h.LastOffsetDelta)-1 {
		return h, fmt.Errorf("wal: base offset %d overflows: %w", h.BaseOffset, ErrInvalidBatch)
	}
	if err := CheckCRC(b); err != nil {
		return h, err
	}
	return h, nil
}

// stampBatch writes the base offset and leader epoch into b's header; the CRC
// does not cover them.
func stampBatch(b []byte, base Offset, epoch Epoch) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}
