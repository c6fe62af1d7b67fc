// Package records reads the records inside a stored Kafka v2 record batch:
// kmsg for the batch and record framing, the codec libraries (gzip, snappy
// with or without the Java client's xerial framing, lz4, zstd) for
// decompression. The broker uses it to answer timestamp lookups, lag and
// HTTP fetches; tierctl to dump and export records. Nothing here rewrites a
// batch.
//
// Invariant: at most MaxConcurrentDecompressions batches are decompressed
// (and their records walked) at once in the process, so decompression holds
// at most MaxConcurrentDecompressions x MaxDecompressed bytes however many
// callers ask; the others wait for a slot. Decompression is CPU-bound and
// does no I/O, so a slot is never held for long.
package records

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

// codecMask selects the compression codec in a batch's attributes.
const codecMask = 0x07

// MaxDecompressed bounds the decompressed size of one batch.
const MaxDecompressed = 256 << 20

// MaxConcurrentDecompressions bounds the batches decompressed at once.
const MaxConcurrentDecompressions = 4

// decompressSlots is the pool of decompression slots: a slot is taken by
// sending and returned by receiving. It is process-wide, like zstdDecoders:
// a process runs one broker, and brokers sharing a test process share it.
var decompressSlots = make(chan struct{}, MaxConcurrentDecompressions)

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressed))
	return d
}}

// readAllLimited reads r to its end, failing past MaxDecompressed bytes
// rather than silently truncating.
func readAllLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, MaxDecompressed+1))
	if err == nil && len(out) > MaxDecompressed {
		err = fmt.Errorf("decompressed batch exceeds %d bytes", MaxDecompressed)
	}
	return out, err
}

// xerialMagic starts snappy data framed the way the Java client frames it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Decompress returns the raw records section of a batch of the given codec
// (the batch attributes' low three bits), at most MaxDecompressed bytes.
func Decompress(codec int16, data []byte) ([]byte, error) {
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
		if len(out)+len(chunk) > MaxDecompressed {
			return nil, fmt.Errorf("snappy: decompressed batch exceeds %d bytes", MaxDecompressed)
		}
		out = append(out, chunk...)
		rest = rest[n:]
	}
	return out, nil
}

// Each calls fn with the offset and timestamp of every record of a
// stored batch, in order, until fn returns false.
func Each(batch []byte, fn func(offset, timestamp int64, rec *kmsg.Record) bool) error {
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	codec := rb.Attributes & codecMask
	if codec != 0 {
		// Held while the records are walked: they live in the decompressed
		// buffer.
		decompressSlots <- struct{}{}
		defer func() { <-decompressSlots }()
	}
	raw, err := Decompress(codec, rb.Records)
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
// decompress past MaxDecompressed before allocating for it.
func snappyBlock(data []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(data)
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressed {
		return nil, fmt.Errorf("snappy: block claims %d bytes, more than %d", n, MaxDecompressed)
	}
	return snappy.Decode(nil, data)
}
