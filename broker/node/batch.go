package node

// This file owns building record batches for messages that arrive over
// HTTP. Encoding is kmsg's; this only fills the fields and the CRC.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluice-mq/sluice/wal"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBatch encodes records[idx...] as one uncompressed v2 batch, as a
// producer would send it. Each record's TimestampDelta64 holds its absolute
// timestamp on entry.
func EncodeBatch(records []kmsg.Record, idx []int, producerID int64, epoch int16, seq int32) []byte {
	first := records[idx[0]].TimestampDelta64
	maxTS := first
	for _, i := range idx {
		first = min(first, records[i].TimestampDelta64)
		maxTS = max(maxTS, records[i].TimestampDelta64)
	}
	var recs []byte
	for j, i := range idx {
		r := records[i]
		r.TimestampDelta64 -= first
		r.OffsetDelta = int32(j)
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(idx) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: producerID, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(idx)), Records: recs,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// validateBatch checks that records is exactly one well-formed v2 batch a
// client may send, with a correct CRC, no larger than maxBytes.
func ValidateBatch(records []byte, maxBytes int32) (wal.BatchHeader, error) {
	if len(records) == 0 {
		return wal.BatchHeader{}, fmt.Errorf("%w: no record batch", ErrInvalidRecord)
	}
	if len(records) > int(maxBytes) {
		return wal.BatchHeader{}, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", ErrMessageTooLarge, len(records), maxBytes)
	}
	h, err := wal.ParseBatchHeader(records)
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrCorruptMessage, err)
	}
	switch size := int(h.Length) + 12; {
	case h.Magic != 2:
		return h, fmt.Errorf("%w: magic %d, only record batch v2 is accepted", ErrCorruptMessage, h.Magic)
	case size > len(records):
		return h, fmt.Errorf("%w: batch length %d runs past the %d bytes sent", ErrCorruptMessage, size, len(records))
	case size < len(records):
		return h, fmt.Errorf("%w: more than one batch for a partition", ErrInvalidRecord)
	}
	// Checked here, on the connection's goroutine, so the partition owner
	// only sees intact batches and can settle producer sequences before the
	// group's single write (wal.AppendGroup checks again as it appends).
	if err := wal.CheckCRC(records); err != nil {
		return h, fmt.Errorf("%w: %w", ErrCorruptMessage, err)
	}
	switch {
	case h.Attributes&AttrControl != 0:
		return h, fmt.Errorf("%w: clients may not send control batches", ErrInvalidRecord)
	case h.Attributes&AttrTransactional != 0:
		return h, fmt.Errorf("%w: transactional batches are not supported", ErrInvalidRecord)
	case h.Attributes&attrCodecMask > maxCodec:
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptMessage, h.Attributes&attrCodecMask)
	case h.BaseOffset != 0:
		return h, fmt.Errorf("%w: base offset %d, producers send 0", ErrInvalidRecord, h.BaseOffset)
	case h.RecordCount <= 0 || h.LastOffsetDelta != h.RecordCount-1:
		return h, fmt.Errorf("%w: %d records with last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	case h.ProducerID >= 0 && (h.ProducerEpoch < 0 || h.BaseSequence < 0):
		return h, fmt.Errorf("%w: producer %d with epoch %d and sequence %d", ErrInvalidRecord, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	return h, nil
}

// Attributes of a record batch that ValidateBatch checks.
const (
	attrCodecMask     = 0x07
	AttrTransactional = 0x10
	AttrControl       = 0x20
	maxCodec          = 4 // zstd
)
