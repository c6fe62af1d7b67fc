package object

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// classified fails the test unless err carries one of the package's markers.
func classified(t *testing.T, err error, markers ...error) {
	t.Helper()
	for _, m := range markers {
		if errors.Is(err, m) {
			return
		}
	}
	t.Fatalf("unclassified error: %v", err)
}

// fixCRCs recomputes the trailer's and footer's CRCs in a copy of tail, so
// the fuzzer reaches the checks behind them.
func fixCRCs(tail []byte) []byte {
	tail = bytes.Clone(tail)
	if len(tail) < TrailerSize {
		return tail
	}
	tr := tail[len(tail)-TrailerSize:]
	binary.BigEndian.PutUint32(tr[trCRC:], crc32.Checksum(tr[:trCRC], castagnoli))
	n := int64(binary.BigEndian.Uint32(tr[trFooterLen:]))
	if n < footerCRCSize || n+TrailerSize > int64(len(tail)) {
		return tail
	}
	footer := tail[int64(len(tail))-TrailerSize-n : len(tail)-TrailerSize]
	body := len(footer) - footerCRCSize
	binary.BigEndian.PutUint32(footer[body:], crc32.Checksum(footer[:body], castagnoli))
	return tail
}

// FuzzParseFooter feeds arbitrary tails and object sizes (with the CRCs
// fixed up or not). ParseFooter must not panic, must classify every error,
// and a footer it accepts must re-encode to the bytes it came from, parse
// again the same and answer its lookups consistently.
func FuzzParseFooter(f *testing.F) {
	obj, built := smallObject(f)
	size := int64(len(obj))
	need := built.footerSize() + TrailerSize
	f.Add(obj, size, false)
	f.Add(obj[len(obj)-need:], size, false)
	f.Add(obj[len(obj)-need+1:], size, false)
	f.Add(obj[len(obj)-need:], size+1, true)
	flipped := bytes.Clone(obj)
	flipped[len(obj)-need+ftChunkCount+3] ^= 1
	f.Add(flipped, size, true)
	f.Add(obj[:len(obj)-1], size-1, false)
	f.Add([]byte{}, int64(0), false)
	f.Add([]byte("SLTO"), int64(4), true)
	f.Fuzz(func(t *testing.T, tail []byte, size int64, fix bool) {
		if fix {
			tail = fixCRCs(tail)
		}
		ft, err := ParseFooter(tail, size)
		if err != nil {
			classified(t, err, ErrCorrupt, ErrShortTail, ErrUnsupportedVersion, ErrInvalid)
			return
		}
		n := ft.footerSize()
		enc := appendTrailer(appendFooter(nil, ft), n)
		if !bytes.Equal(enc, tail[len(tail)-len(enc):]) {
			t.Fatalf("footer re-encodes differently")
		}
		again, err := ParseFooter(enc, size)
		if err != nil || !reflect.DeepEqual(again, ft) {
			t.Fatalf("re-encoded footer parses as %+v, %v", again, err)
		}
		if got, err := ParseTrailer(tail); err != nil || got != n {
			t.Fatalf("trailer says %d, %v; footer is %d", got, err, n)
		}
		checkLookups(t, ft)
	})
}

// checkLookups checks that a valid footer's lookups agree with its table.
func checkLookups(t *testing.T, f *Footer) {
	t.Helper()
	for i, c := range f.Chunks() {
		for _, off := range []wal.Offset{c.FirstOffset, c.LastOffset} {
			if got, ok := f.ChunkFor(off); got != i || !ok {
				t.Fatalf("ChunkFor(%d) = %d, %v, want %d", off, got, ok, i)
			}
			if _, ok := f.EpochFor(off); !ok {
				t.Fatalf("no epoch for offset %d", off)
			}
		}
		if got, ok := f.ChunkForTimestamp(c.MaxTimestamp); !ok || got > i {
			t.Fatalf("ChunkForTimestamp(%d) = %d, %v, want at most %d", c.MaxTimestamp, got, ok, i)
		}
		if pos, n := f.ChunkRange(i); pos < 0 || n <= 0 || pos+n > f.ObjectSize {
			t.Fatalf("chunk %d range %d+%d outside %d", i, pos, n, f.ObjectSize)
		}
	}
	if _, ok := f.ChunkFor(f.NextOffset); ok {
		t.Fatalf("ChunkFor(next offset %d) found a chunk", f.NextOffset)
	}
	if pos, n := f.SnapshotRange(); pos < 0 || n < 0 || pos+n > f.ObjectSize {
		t.Fatalf("snapshot range %d+%d outside %d", pos, n, f.ObjectSize)
	}
}

// FuzzVerifyChunk feeds arbitrary bytes as chunk i of a valid object: they
// pass only if they are the chunk's bytes. Then it checks them against an
// entry patched to their length and CRC, so the batch walk sees them:
// never a panic, every error ErrCorrupt, and bytes that pass walk and
// slice consistently.
func FuzzVerifyChunk(f *testing.F) {
	obj, base := smallObject(f)
	for i := range base.NumChunks() {
		data := chunkBytes(&base, obj, i)
		f.Add(data, uint8(i))
		f.Add(data[:len(data)-1], uint8(i))
		f.Add(append(bytes.Clone(data), data...), uint8(i))
	}
	f.Add([]byte{}, uint8(0))
	f.Add(obj, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, idx uint8) {
		i := int(idx) % base.NumChunks()
		if err := VerifyChunk(&base, i, data); err != nil {
			classified(t, err, ErrCorrupt)
		} else if !bytes.Equal(data, chunkBytes(&base, obj, i)) {
			t.Fatalf("chunk %d: other bytes verified", i)
		}
		if err := Batches(data, func([]byte) error { return nil }); err != nil {
			classified(t, err, ErrCorrupt)
		}
		if _, err := SliceFrom(data, base.Chunk(i).LastOffset); err != nil {
			classified(t, err, ErrCorrupt)
		}

		patched := base
		patched.chunks = base.Chunks()
		c := &patched.chunks[i]
		c.Length, c.CRC = int64(len(data)), crc32.Checksum(data, castagnoli)
		if err := VerifyChunk(&patched, i, data); err != nil {
			classified(t, err, ErrCorrupt)
			return
		}
		checkVerified(t, *c, data)
	})
}

// checkVerified checks what a reader does with a chunk that verified.
func checkVerified(t *testing.T, c Chunk, data []byte) {
	t.Helper()
	count, total := 0, 0
	if err := Batches(data, func(b []byte) error { count++; total += len(b); return nil }); err != nil {
		t.Fatalf("batches of a verified chunk: %v", err)
	}
	if count != c.BatchCount || total != len(data) {
		t.Fatalf("walked %d batches of %d bytes, entry says %d of %d", count, total, c.BatchCount, len(data))
	}
	for _, tc := range []struct {
		from  wal.Offset
		empty bool
	}{{c.FirstOffset, false}, {c.LastOffset, false}, {c.LastOffset + 1, true}} {
		got, err := SliceFrom(data, tc.from)
		if err != nil || (len(got) == 0) != tc.empty || !bytes.HasSuffix(data, got) {
			t.Fatalf("slice from %d: %d bytes, %v", tc.from, len(got), err)
		}
	}
	if got, _ := SliceFrom(data, c.FirstOffset); len(got) != len(data) {
		t.Fatalf("slice from the first offset cut %d bytes", len(data)-len(got))
	}
}
