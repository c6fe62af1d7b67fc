package object

// chunk.go owns what a reader does with the bytes of a ranged GET: checking
// a chunk against its footer entry (VerifyChunk) and the producer snapshot
// against its section (VerifySnapshot), walking a chunk's batches (Batches)
// and cutting it to the batches a fetch from an offset needs (SliceFrom).
//
// Invariant: every batch walkBatches hands on lies wholly inside the bytes
// it was given, has a parsed v2 header, offsets that do not overflow, and
// a base offset one above the previous batch's last offset.
//
// Stateless: functions of their arguments only.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/sluice-mq/sluice/wal"
)

// errStop ends a walk early without an error.
var errStop = errors.New("object: stop walking")

// batchLengthOverhead is the part of a batch its length field does not
// count (baseOffset and length).
const batchLengthOverhead = 12

// walkBatches calls fn with each batch of data, its header and its byte
// position, in order. Malformed, truncated or non-contiguous batches are
// ErrCorrupt; an error from fn ends the walk and is returned as it is.
func walkBatches(data []byte, fn func(h wal.BatchHeader, pos int, batch []byte) error) error {
	next := wal.UndefinedOffset
	for pos := 0; pos < len(data); {
		h, err := wal.ParseBatchHeader(data[pos:])
		if err != nil {
			return fmt.Errorf("object: batch at byte %d: %w: %w", pos, err, ErrCorrupt)
		}
		if int64(h.Length)+batchLengthOverhead > int64(len(data)-pos) {
			return fmt.Errorf("object: batch at byte %d needs %d bytes, %d left: %w", pos, int64(h.Length)+batchLengthOverhead, len(data)-pos, ErrCorrupt)
		}
		if h.LastOffsetDelta < 0 || h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-wal.Offset(h.LastOffsetDelta)-1 {
			return fmt.Errorf("object: batch at byte %d has offsets %d+%d: %w", pos, h.BaseOffset, h.LastOffsetDelta, ErrCorrupt)
		}
		if next != wal.UndefinedOffset && h.BaseOffset != next {
			return fmt.Errorf("object: batch at byte %d starts at offset %d, want %d: %w", pos, h.BaseOffset, next, ErrCorrupt)
		}
		size := h.Size()
		if err := fn(h, pos, data[pos:pos+size]); err != nil {
			return err
		}
		next = h.LastOffset() + 1
		pos += size
	}
	return nil
}

// VerifyChunk checks data, the bytes a ranged GET returned for chunk i of
// f, against its entry: length (a truncated read fails), CRC-32C, and that
// its batches parse, start at the chunk's first offset, follow each other
// without gaps, end at its last offset and agree with the entry's batch
// count and timestamps and with f's leader epochs. A mismatch is
// ErrCorrupt; an index outside the table is ErrInvalid. The batches' own
// CRCs are not checked again: the chunk's CRC covers their bytes, and the
// Builder checked each one.
func VerifyChunk(f *Footer, i int, data []byte) error {
	if f == nil || i < 0 || i >= len(f.chunks) {
		return fmt.Errorf("object: verify chunk %d: no such chunk: %w", i, ErrInvalid)
	}
	c := f.chunks[i]
	if int64(len(data)) != c.Length {
		return fmt.Errorf("object: chunk %d: %d bytes, footer says %d: %w", i, len(data), c.Length, ErrCorrupt)
	}
	if got := crc32.Checksum(data, castagnoli); got != c.CRC {
		return fmt.Errorf("object: chunk %d: crc %08x, footer says %08x: %w", i, got, c.CRC, ErrCorrupt)
	}
	next, count := c.FirstOffset, 0
	var minTS, maxTS int64
	err := walkBatches(data, func(h wal.BatchHeader, pos int, _ []byte) error {
		if h.BaseOffset != next {
			return fmt.Errorf("object: chunk %d: batch at byte %d starts at offset %d, want %d: %w", i, pos, h.BaseOffset, next, ErrCorrupt)
		}
		if e, ok := f.EpochFor(h.BaseOffset); !ok || e != h.LeaderEpoch {
			return fmt.Errorf("object: chunk %d: batch at offset %d has leader epoch %d, footer says %d: %w", i, h.BaseOffset, h.LeaderEpoch, e, ErrCorrupt)
		}
		if count == 0 {
			minTS, maxTS = h.BaseTimestamp, h.MaxTimestamp
		}
		minTS, maxTS = min(minTS, h.BaseTimestamp), max(maxTS, h.MaxTimestamp)
		count++
		next = h.LastOffset() + 1
		return nil
	})
	if err != nil {
		return err
	}
	if next != c.NextOffset() || count != c.BatchCount {
		return fmt.Errorf("object: chunk %d: %d batches end at offset %d, footer says %d ending at %d: %w",
			i, count, next-1, c.BatchCount, c.LastOffset, ErrCorrupt)
	}
	if minTS != c.MinTimestamp || maxTS != c.MaxTimestamp {
		return fmt.Errorf("object: chunk %d: timestamps [%d, %d], footer says [%d, %d]: %w",
			i, minTS, maxTS, c.MinTimestamp, c.MaxTimestamp, ErrCorrupt)
	}
	return nil
}

// VerifySnapshot checks data, the bytes read at f.SnapshotRange(), against
// the footer's length and CRC-32C (ErrCorrupt on a mismatch).
func VerifySnapshot(f *Footer, data []byte) error {
	if f == nil {
		return fmt.Errorf("object: verify producer snapshot: no footer: %w", ErrInvalid)
	}
	s := f.snapshot
	if int64(len(data)) != s.length {
		return fmt.Errorf("object: producer snapshot: %d bytes, footer says %d: %w", len(data), s.length, ErrCorrupt)
	}
	if got := crc32.Checksum(data, castagnoli); got != s.crc {
		return fmt.Errorf("object: producer snapshot: crc %08x, footer says %08x: %w", got, s.crc, ErrCorrupt)
	}
	return nil
}

// Batches calls fn with each record batch of data, a chunk (VerifyChunk
// first) or a slice of one, in offset order. batch aliases data. Malformed
// bytes are ErrCorrupt; an error from fn stops the walk and is returned
// unwrapped.
func Batches(data []byte, fn func(batch []byte) error) error {
	return walkBatches(data, func(_ wal.BatchHeader, _ int, batch []byte) error { return fn(batch) })
}

// SliceFrom returns the tail of data, a verified chunk, that starts with
// the batch holding offset from (or the first batch after from, or the
// whole of data when from is below its first batch): what a fetch at from
// returns, as Kafka returns whole batches. It is empty when every batch
// ends below from. It aliases data.
func SliceFrom(data []byte, from wal.Offset) ([]byte, error) {
	start := len(data)
	err := walkBatches(data, func(h wal.BatchHeader, pos int, _ []byte) error {
		if h.LastOffset() >= from {
			start = pos
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return data[start:], nil
}
