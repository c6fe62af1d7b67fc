package main

// records.go owns decoding the records inside stored batches (kmsg for the
// batch and record framing, the codec libraries for decompression), the way
// broker/records.go does it for the broker, whose helpers are unexported.
// It also walks a partition's batches over an offset range, from the local
// log where it holds them and from object storage below it.
//
// Invariant: a batch's records are handed on only after its CRC checked
// out; control batches (transaction markers, a leader's epoch-start batch)
// are skipped, as a consumer skips them.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/wal"
)

// Batch attributes (Kafka's).
const (
	attrCodecMask = 0x07
	attrControl   = 0x20
)

// maxDecompressed bounds one batch's decompressed records.
const maxDecompressed = 256 << 20

// record is one decoded record.
type record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

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
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(data, nil)
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func unsnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(data)
	}
	if len(data) < 16 {
		return nil, errors.New("xerial snappy: truncated header")
	}
	rest := data[16:] // magic, two int32 versions, then (length, chunk) pairs
	var out []byte
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, errors.New("xerial snappy: truncated chunk length")
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

// eachRecord calls fn with every record of a stored batch, in order, until
// fn returns false. Control batches have no records for it.
func eachRecord(batch []byte, fn func(r record) bool) error {
	if err := wal.CheckCRC(batch); err != nil {
		return err
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	if rb.Attributes&attrControl != 0 {
		return nil
	}
	raw, err := decompress(rb.Attributes&attrCodecMask, rb.Records)
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
		r := record{Offset: rb.FirstOffset + int64(rec.OffsetDelta), Timestamp: rb.FirstTimestamp + rec.TimestampDelta64,
			Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

// errEnough ends a walk that has what it wanted.
var errEnough = errors.New("enough")

// localReadBytes is how much one local log read takes.
const localReadBytes = 1 << 20

// eachBatch calls fn with every batch of t holding offsets in [from, to), in
// order: from the local log l (nil: none) where it holds them, otherwise
// from object storage. fn's errEnough ends the walk with nil. An offset that
// neither holds is an error naming both ranges.
func (e *env) eachBatch(ctx context.Context, t target, l *localLog, from, to wal.Offset, fn func(batch []byte) error) error {
	var objs []meta.RemoteObject
	next := from
	walk := func(batch []byte) error {
		h, err := wal.ParseBatchHeader(batch)
		if err != nil {
			return err
		}
		if h.BaseOffset >= to {
			return errEnough
		}
		if err := fn(batch); err != nil {
			return err
		}
		next = h.LastOffset() + 1
		return nil
	}
	for next < to {
		before := next
		var err error
		switch {
		case l != nil && next >= l.log.StartOffset() && next < l.log.EndOffset():
			var data []byte
			if data, err = l.log.Read(next, to, localReadBytes); err == nil {
				err = object.Batches(data, walk)
			}
		case next >= wal.Offset(t.head.LogStart) && next < wal.Offset(t.head.RemoteEnd) && e.store != nil:
			if objs == nil {
				if objs, err = tier.ListObjects(ctx, e.store, t.head); err != nil {
					return err
				}
			}
			err = tier.RemoteBatches(ctx, e.store, objs, next, func(b []byte) error {
				if l != nil && next >= l.log.StartOffset() && next < l.log.EndOffset() {
					return tier.ErrStop // the local log takes over
				}
				return walk(b)
			})
		default:
			return fmt.Errorf("%s: offset %d is in neither the remote log [%d, %d) nor the local one %s",
				t, next, t.head.LogStart, t.head.RemoteEnd, localRange(l))
		}
		if errors.Is(err, errEnough) {
			return nil
		}
		if err != nil {
			return err
		}
		if next == before {
			return fmt.Errorf("%s: no batch holds offset %d", t, next)
		}
	}
	return nil
}

func localRange(l *localLog) string {
	if l == nil {
		return "(no --data-dir or no local log)"
	}
	return fmt.Sprintf("[%d, %d)", l.log.StartOffset(), l.log.EndOffset())
}
