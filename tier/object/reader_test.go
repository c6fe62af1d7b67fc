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

func TestSmallObjectShape(t *testing.T) {
	obj, f := smallObject(t)
	if f.NumChunks() != 3 || len(f.Epochs()) != 2 {
		t.Fatalf("small object has %d chunks and epochs %v; the corruption tests want 3 and 2", f.NumChunks(), f.Epochs())
	}
	if _, err := ParseFooter(obj, int64(len(obj))); err != nil {
		t.Fatal(err)
	}
}

func TestChunkFor(t *testing.T) {
	_, f := smallObject(t) // chunks [100, 103), [103, 107), [107, 111)
	tests := []struct {
		off    wal.Offset
		want   int
		wantOK bool
	}{
		{0, 0, false}, {99, 0, false}, {100, 0, true}, {102, 0, true}, {103, 1, true},
		{106, 1, true}, {107, 2, true}, {110, 2, true}, {111, 3, false}, {1 << 62, 3, false},
	}
	for _, tc := range tests {
		if got, ok := f.ChunkFor(tc.off); got != tc.want || ok != tc.wantOK {
			t.Errorf("ChunkFor(%d) = %d, %v, want %d, %v", tc.off, got, ok, tc.want, tc.wantOK)
		}
	}
	for i, c := range f.Chunks() {
		for off := c.FirstOffset; off <= c.LastOffset; off++ {
			if got, ok := f.ChunkFor(off); got != i || !ok {
				t.Errorf("ChunkFor(%d) = %d, %v, want chunk %d", off, got, ok, i)
			}
		}
	}
	// A hand-made footer with a gap: the first chunk after it.
	gap := Footer{BaseOffset: 0, NextOffset: 30, chunks: []Chunk{{FirstOffset: 0, LastOffset: 9}, {FirstOffset: 20, LastOffset: 29}}}
	if got, ok := gap.ChunkFor(15); got != 1 || !ok {
		t.Errorf("ChunkFor in a gap = %d, %v, want 1, true", got, ok)
	}
}

func TestChunkForTimestamp(t *testing.T) {
	// Chunk max timestamps 501, 100, 900, -1: not increasing.
	batches := [][]byte{
		mkBatch(spec{base: 0, records: 2, ts: 500}),
		mkBatch(spec{base: 2, records: 1, ts: 100}),
		mkBatch(spec{base: 3, records: 1, ts: 900}),
		mkBatch(spec{base: 4, records: 1, ts: -1}),
	}
	_, built := build(t, BuilderConfig{TargetChunkBytes: 1}, batches, []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}, nil)
	f := &built
	tests := []struct {
		ts     int64
		want   int
		wantOK bool
	}{
		{-1, 0, true}, {0, 0, true}, {501, 0, true}, {502, 2, true}, {900, 2, true}, {901, 4, false},
	}
	for _, tc := range tests {
		if got, ok := f.ChunkForTimestamp(tc.ts); got != tc.want || ok != tc.wantOK {
			t.Errorf("ChunkForTimestamp(%d) = %d, %v, want %d, %v", tc.ts, got, ok, tc.want, tc.wantOK)
		}
	}
	if f.MaxTimestamp() != 900 {
		t.Errorf("max timestamp %d", f.MaxTimestamp())
	}
}

func TestEpochFor(t *testing.T) {
	_, f := smallObject(t) // epochs (3 at 100), (5 at 106), next 111
	tests := []struct {
		off    wal.Offset
		want   wal.Epoch
		wantOK bool
	}{
		{99, wal.UndefinedEpoch, false}, {100, 3, true}, {105, 3, true}, {106, 5, true}, {110, 5, true}, {111, wal.UndefinedEpoch, false},
	}
	for _, tc := range tests {
		if got, ok := f.EpochFor(tc.off); got != tc.want || ok != tc.wantOK {
			t.Errorf("EpochFor(%d) = %d, %v, want %d, %v", tc.off, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestSliceFrom(t *testing.T) {
	obj, f := smallObject(t)
	data := chunkBytes(&f, obj, 0) // batches [100, 102) and [102, 103)
	var bases []wal.Offset
	if err := Batches(data, func(b []byte) error { bases = append(bases, header(t, b).BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(bases, []wal.Offset{100, 102}) {
		t.Fatalf("chunk 0 batches %v", bases)
	}
	tests := []struct {
		from     wal.Offset
		wantBase wal.Offset // -1: empty
	}{
		{0, 100}, {100, 100}, {101, 100}, {102, 102}, {103, -1},
	}
	for _, tc := range tests {
		got, err := SliceFrom(data, tc.from)
		if err != nil {
			t.Fatalf("slice from %d: %v", tc.from, err)
		}
		if tc.wantBase < 0 {
			if len(got) != 0 {
				t.Errorf("slice from %d: %d bytes, want none", tc.from, len(got))
			}
			continue
		}
		if h := header(t, got); h.BaseOffset != tc.wantBase || !bytes.HasSuffix(data, got) {
			t.Errorf("slice from %d starts at %d, want %d", tc.from, h.BaseOffset, tc.wantBase)
		}
	}
	if _, err := SliceFrom(data[:len(data)-1], 102); !errors.Is(err, ErrCorrupt) {
		t.Errorf("slice of a truncated chunk: %v", err)
	}
}

// TestFlipFooterAndTrailer flips every bit of the footer and trailer of a
// small object: decoding must fail as ErrCorrupt, never panic.
func TestFlipFooterAndTrailer(t *testing.T) {
	obj, f := smallObject(t)
	size := int64(len(obj))
	start := len(obj) - f.footerSize() - TrailerSize
	for i := start; i < len(obj); i++ {
		for bit := range 8 {
			c := bytes.Clone(obj)
			c[i] ^= 1 << bit
			if _, err := ParseFooter(c, size); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d (of footer+trailer at %d) bit %d flipped: %v, want ErrCorrupt", i, start, bit, err)
			}
			if _, err := ParseFooter(c[start:], size); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped, tail only: %v, want ErrCorrupt", i, bit, err)
			}
		}
	}
}

// TestFlipData flips every byte of the chunks and the snapshot: the footer
// still parses, and the chunk or snapshot check holding the byte fails.
func TestFlipData(t *testing.T) {
	obj, f := smallObject(t)
	end := len(obj) - f.footerSize() - TrailerSize
	for i := range end {
		c := bytes.Clone(obj)
		c[i] ^= 0xff
		pf, err := ParseFooter(c, int64(len(c)))
		if err != nil {
			t.Fatalf("byte %d flipped: footer: %v", i, err)
		}
		caught := false
		for k := range pf.NumChunks() {
			if err := VerifyChunk(pf, k, chunkBytes(pf, c, k)); err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d flipped: chunk %d: %v, want ErrCorrupt", i, k, err)
				}
				caught = true
			}
		}
		pos, n := pf.SnapshotRange()
		if err := VerifySnapshot(pf, c[pos:pos+n]); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("byte %d flipped: snapshot: %v", i, err)
			}
			caught = true
		}
		if !caught {
			t.Fatalf("byte %d flipped: nothing noticed", i)
		}
	}
}

// TestTail reads the footer from tails of every length, as a reader with
// ranged GETs does: short tails ask for more, never fail otherwise.
func TestTail(t *testing.T) {
	obj, f := smallObject(t)
	size := int64(len(obj))
	need := f.footerSize() + TrailerSize
	for k := 0; k <= len(obj); k++ {
		got, err := ParseFooter(obj[len(obj)-k:], size)
		switch {
		case k < need:
			if !errors.Is(err, ErrShortTail) {
				t.Fatalf("tail of %d bytes: %v, want ErrShortTail", k, err)
			}
			if k >= TrailerSize {
				if n, err := ParseTrailer(obj[len(obj)-k:]); err != nil || n+TrailerSize != need {
					t.Fatalf("trailer from a tail of %d: %d, %v, want %d", k, n, err, need-TrailerSize)
				}
			}
		case err != nil || !reflect.DeepEqual(*got, f):
			t.Fatalf("tail of %d bytes: %v", k, err)
		}
	}
	if _, err := ParseFooter(obj, size+1); !errors.Is(err, ErrCorrupt) {
		t.Errorf("object size one more than the footer says: %v", err)
	}
	if _, err := ParseFooter(obj, size-1); !errors.Is(err, ErrInvalid) {
		t.Errorf("tail longer than the object: %v", err)
	}
}

// TestTruncatedObject parses every prefix of an object as if a PUT had
// been cut short: always ErrCorrupt; and a truncated chunk body fails
// VerifyChunk.
func TestTruncatedObject(t *testing.T) {
	obj, f := smallObject(t)
	for n := range len(obj) {
		if _, err := ParseFooter(obj[:n], int64(n)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("object cut to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	for i := range f.NumChunks() {
		data := chunkBytes(&f, obj, i)
		for n := range len(data) {
			if err := VerifyChunk(&f, i, data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("chunk %d cut to %d bytes: %v", i, n, err)
			}
		}
		if err := VerifyChunk(&f, i, append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("chunk %d with a byte more: %v", i, err)
		}
	}
	if err := VerifyChunk(&f, 3, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("chunk out of range: %v", err)
	}
	pos, n := f.SnapshotRange()
	if err := VerifySnapshot(&f, obj[pos:pos+n-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated snapshot: %v", err)
	}
}

// TestUnsupportedVersion: a newer trailer with a valid CRC is refused as
// ErrUnsupportedVersion, whatever follows; version 0 is corrupt.
func TestUnsupportedVersion(t *testing.T) {
	obj, _ := smallObject(t)
	for _, tc := range []struct {
		version uint16
		want    error
	}{{2, ErrUnsupportedVersion}, {0xffff, ErrUnsupportedVersion}, {0, ErrCorrupt}} {
		c := bytes.Clone(obj)
		tr := c[len(c)-TrailerSize:]
		binary.BigEndian.PutUint16(tr[trVersion:], tc.version)
		binary.BigEndian.PutUint32(tr[trFooterLen:], MaxFooterSize*4) // a newer version may have a bigger footer
		binary.BigEndian.PutUint32(tr[trCRC:], crc32.Checksum(tr[:trCRC], castagnoli))
		if _, err := ParseFooter(c, int64(len(c))); !errors.Is(err, tc.want) {
			t.Errorf("version %d: %v, want %v", tc.version, err, tc.want)
		}
	}
}

// TestLargeFooter follows the reader's two-GET path for a footer larger
// than SuggestedTailSize.
func TestLargeFooter(t *testing.T) {
	counts := make([]int, 1500)
	for i := range counts {
		counts[i] = 1
	}
	batches := run(0, 0, 0, 0, counts...)
	obj, built := build(t, BuilderConfig{TargetChunkBytes: 1}, batches, []wal.EpochEntry{{Epoch: 0, StartOffset: 0}}, nil)
	if built.footerSize() <= SuggestedTailSize {
		t.Fatalf("footer of %d bytes fits the first GET", built.footerSize())
	}
	size := int64(len(obj))
	tail := obj[len(obj)-SuggestedTailSize:]
	_, err := ParseFooter(tail, size)
	if !errors.Is(err, ErrShortTail) {
		t.Fatalf("first GET: %v, want ErrShortTail", err)
	}
	n, err := ParseTrailer(tail)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFooter(obj[len(obj)-n-TrailerSize:], size)
	if err != nil || !reflect.DeepEqual(*f, built) {
		t.Fatalf("second GET: %v", err)
	}
	readChunks(t, f, obj, batches, 1)
}

// TestVerifyChunkDisagreesWithFooter: the bytes are intact (CRC matches)
// but the footer's entry or epochs say otherwise.
func TestVerifyChunkDisagreesWithFooter(t *testing.T) {
	obj, base := smallObject(t)
	tests := []struct {
		name  string
		chunk int
		edit  func(f *Footer)
	}{
		{"first offset", 1, func(f *Footer) { f.chunks[1].FirstOffset++ }},
		{"last offset", 1, func(f *Footer) { f.chunks[1].LastOffset-- }},
		{"batch count", 0, func(f *Footer) { f.chunks[0].BatchCount++ }},
		{"min timestamp", 2, func(f *Footer) { f.chunks[2].MinTimestamp-- }},
		{"max timestamp", 2, func(f *Footer) { f.chunks[2].MaxTimestamp++ }},
		{"epoch", 1, func(f *Footer) { f.epochs[1].StartOffset = 107 }},
		{"epoch number", 0, func(f *Footer) { f.epochs[0].Epoch = 2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			f.chunks = f.Chunks()
			f.epochs = f.Epochs()
			tc.edit(&f)
			if err := VerifyChunk(&f, tc.chunk, chunkBytes(&base, obj, tc.chunk)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("verify: %v, want ErrCorrupt", err)
			}
			if err := VerifyChunk(&base, tc.chunk, chunkBytes(&base, obj, tc.chunk)); err != nil {
				t.Fatalf("edit leaked into the original footer: %v", err)
			}
		})
	}
}

// TestImpossibleFooter re-encodes footers with a fresh CRC but values that
// break a rule of doc.go: decoding must refuse each one as ErrCorrupt.
func TestImpossibleFooter(t *testing.T) {
	_, base := smallObject(t)
	tests := []struct {
		name string
		edit func(f *Footer)
	}{
		{"negative base", func(f *Footer) { f.BaseOffset = -1; f.chunks[0].FirstOffset = -1; f.epochs[0].StartOffset = -1 }},
		{"next at base", func(f *Footer) { f.NextOffset = f.BaseOffset }},
		{"next beyond the chunks", func(f *Footer) { f.NextOffset++ }},
		{"chunk offset gap", func(f *Footer) { f.chunks[1].FirstOffset++ }},
		{"chunk offset overlap", func(f *Footer) { f.chunks[1].FirstOffset-- }},
		{"chunk ends before it starts", func(f *Footer) { f.chunks[0].LastOffset = f.chunks[0].FirstOffset - 1 }},
		{"chunk byte gap", func(f *Footer) { f.chunks[2].Position++ }},
		{"chunk shorter than a batch header", func(f *Footer) { f.chunks[0].Length = wal.BatchHeaderSize - 1 }},
		{"chunk past the object", func(f *Footer) { f.chunks[2].Length = f.ObjectSize }},
		{"no batches", func(f *Footer) { f.chunks[1].BatchCount = 0 }},
		{"more batches than offsets", func(f *Footer) { f.chunks[2].BatchCount = 5 }},
		{"more batches than bytes hold", func(f *Footer) {
			f.chunks[0].BatchCount = int(f.chunks[0].Length/wal.BatchHeaderSize) + 1
			f.chunks[0].LastOffset, f.chunks[1].FirstOffset = 200, 201
		}},
		{"snapshot not after the chunks", func(f *Footer) { f.snapshot.pos-- }},
		{"negative snapshot", func(f *Footer) { f.snapshot.length = -1 }},
		{"huge snapshot", func(f *Footer) { f.snapshot.length = 1 << 62 }},
		{"size disagrees", func(f *Footer) { f.ObjectSize++ }},
		{"first epoch after base", func(f *Footer) { f.epochs[0].StartOffset++ }},
		{"first epoch before base", func(f *Footer) { f.epochs[0].StartOffset-- }},
		{"epochs decrease", func(f *Footer) { f.epochs[1].Epoch = f.epochs[0].Epoch }},
		{"epoch starts repeat", func(f *Footer) { f.epochs[1].StartOffset = f.epochs[0].StartOffset }},
		{"epoch at next", func(f *Footer) { f.epochs[1].StartOffset = f.NextOffset }},
		{"negative epoch", func(f *Footer) { f.epochs[0].Epoch = -2 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			f.chunks = f.Chunks()
			f.epochs = f.Epochs()
			tc.edit(&f)
			if _, err := decodeFooter(appendFooter(nil, &f)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode: %v, want ErrCorrupt", err)
			}
		})
	}
	raw := []struct {
		name string
		edit func(b []byte)
	}{
		{"magic", func(b []byte) { b[ftMagic] = 'X' }},
		{"version", func(b []byte) { b[ftVersion+1] = 2 }},
		{"flags", func(b []byte) { b[ftFlags+1] = 1 }},
		{"reserved", func(b []byte) { b[ftReserved] = 1 }},
		{"reserved 2", func(b []byte) { b[ftReserved2+3] = 1 }},
		{"chunk count", func(b []byte) { binary.BigEndian.PutUint32(b[ftChunkCount:], 4) }},
		{"no chunks", func(b []byte) { binary.BigEndian.PutUint32(b[ftChunkCount:], 0) }},
		{"epoch count", func(b []byte) { binary.BigEndian.PutUint32(b[ftEpochCount:], 1<<31) }},
	}
	for _, tc := range raw {
		t.Run("raw "+tc.name, func(t *testing.T) {
			b := appendFooter(nil, &base)
			tc.edit(b)
			n := len(b) - footerCRCSize
			binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
			if _, err := decodeFooter(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode: %v, want ErrCorrupt", err)
			}
		})
	}
	if _, err := decodeFooter(appendFooter(nil, &base)); err != nil {
		t.Fatalf("the unedited footer: %v", err)
	}
}
