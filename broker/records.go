package broker

// This file owns reading the records inside a stored batch, which the broker
// needs to answer timestamp lookups (ListOffsets, lag) and HTTP fetches.
// Batches are decoded with kmsg and decompressed with the codec libraries;
// nothing here rewrites a batch.
//
// Invariant: at most maxConcurrentDecompressions batches are decompressed
// (and their records walked) at once in the process, so decompression holds
// at most maxConcurrentDecompressions x maxDecompressed bytes however many
// requests ask; the others wait for a slot. Decompression is CPU-bound and
// does no I/O, so a slot is never held for long.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxDecompressed bounds the decompressed size of one batch we inspect.
const maxDecompressed = 256 << 20

// maxConcurrentDecompressions bounds the batches decompressed at once.
const maxConcurrentDecompressions = 4

// decompressSlots is the pool of decompression slots: a slot is taken by
// sending and returned by receiving. It is process-wide, like zstdDecoders:
// a process runs one broker, and brokers sharing a test process share it.
var decompressSlots = make(chan struct{}, maxConcurrentDecompressions)

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
	return d
}}

// readAllLimited reads r to its end, failing past maxDecompressed bytes
// rather than silently truncating.
func readAllLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err == nil && len(out) > maxDecompressed {
		err = fmt.Errorf("decompressed batch exceeds %d bytes", maxDecompressed)
	}
	return out, err
}

// xerialMagic starts snappy data framed the way the Java client frames it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the raw records section of a batch.
func decompress(codec int16, data []byte) ([]byte, error) {
	switch codec {
	case 0:
		return data, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return readAllLimited(zr)
	case 2:
		return unsnappy(data)
	case 3:
		return readAllLimited(lz4.NewReader(bytes.NewReader(data)))
	case 4:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		return d.DecodeAll(data, nil)
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func unsnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(data)
	}
	// xerial framing: magic, two int32 versions, then (length, chunk) pairs.
	rest := data[16:]
	var out []byte
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, fmt.Errorf("xerial snappy: truncated chunk length")
		}
		n := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if n > len(rest) {
			return nil, fmt.Errorf("xerial snappy: chunk of %d bytes past the end", n)
		}
		chunk, err := snappyBlock(rest[:n])
		if err != nil {
			return nil, err
		}
		if len(out)+len(chunk) > maxDecompressed {
			return nil, fmt.Errorf("snappy: decompressed batch exceeds %d bytes", maxDecompressed)
		}
		out = append(out, chunk...)
		rest = rest[n:]
	}
	return out, nil
}

// eachRecord calls fn with the offset and timestamp of every record of a
// stored batch, in order, until fn returns false.
func eachRecord(batch []byte, fn func(offset, timestamp int64, rec *kmsg.Record) bool) error {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	codec := rb.Attributes & attrCodecMask
	if codec != 0 {
		// Held while the records are walked: they live in the decompressed
		// buffer.
		decompressSlots <- struct{}{}
		defer func() { <-decompressSlots }()
	}
	raw, err := decompress(codec, rb.Records)
	if err != nil {
		return fmt.Errorf("decompress batch at %d: %w", rb.FirstOffset, err)
	}
	for i := int32(0); i < rb.NumRecords && len(raw) > 0; i++ {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || int64(len(raw)-n) < length {
			return fmt.Errorf("record %d of batch at %d is truncated", i, rb.FirstOffset)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:n+int(length)]); err != nil {
			return fmt.Errorf("record %d of batch at %d: %w", i, rb.FirstOffset, err)
		}
		raw = raw[n+int(length):]
		if !fn(rb.FirstOffset+int64(rec.OffsetDelta), rb.FirstTimestamp+rec.TimestampDelta64, &rec) {
			return nil
		}
	}
	return nil
}

// snappyBlock decodes one snappy block, refusing one that claims to
// decompress past maxDecompressed before allocating for it.
func snappyBlock(data []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(data)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressed {
		return nil, fmt.Errorf("snappy: block claims %d bytes, more than %d", n, maxDecompressed)
	}
	return snappy.Decode(nil, data)
}

// firstOffsetAtOrAfter returns the offset and timestamp of the first record
// in batch at or above offset from whose timestamp is at least ts (from is
// the log start: a batch may straddle it after DeleteRecords).
func firstOffsetAtOrAfter(batch []byte, ts, from int64) (offset, recordTS int64, found bool, err error) {
	err = eachRecord(batch, func(off, recTS int64, _ *kmsg.Record) bool {
		if recTS >= ts && off >= from {
			offset, recordTS, found = off, recTS, true
			return false
		}
		return true
	})
	return offset, recordTS, found, err
}
