package object

// footer.go owns the Footer value: the facts of one object (partition,
// offset range, size), its chunk table, its leader-epoch entries and its
// producer-snapshot section, and the lookups a reader makes on them
// (offset, timestamp or epoch → chunk or byte range).
//
// Invariant: a Footer from ParseFooter or Builder.Finish passes
// checkFooter: chunks tile [0, snapshot position) in bytes and
// [BaseOffset, NextOffset) in offsets, in order and without gaps; epoch
// entries strictly increase in epoch and start, the first starts at
// BaseOffset and every start is below NextOffset.
//
// A Footer is never changed after it is returned, so any goroutine may
// read it without a lock; accessors return copies of its slices.

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/sluice-mq/sluice/wal"
)

// Sentinel errors; wrapped errors from this package match them with errors.Is.
var (
	// ErrCorrupt marks bytes that fail a checksum or hold impossible
	// values: a torn or damaged object, never a transient I/O error.
	ErrCorrupt = errors.New("object: corrupt object")
	// ErrUnsupportedVersion marks an object written in a format version
	// newer than this build reads; the reader refuses it rather than guess.
	ErrUnsupportedVersion = errors.New("object: unsupported format version")
	// ErrShortTail is returned by ParseFooter when the tail it was given
	// holds the trailer but not the whole footer: fetch the last
	// footerLength+TrailerSize bytes (ParseTrailer) and call it again.
	ErrShortTail = errors.New("object: tail shorter than footer")
	// ErrInvalid marks a caller's mistake: a batch that is not whole,
	// valid or contiguous, epochs that do not match the batches, a bad
	// config, a chunk index out of range, or a finished Builder.
	ErrInvalid = errors.New("object: invalid input")
)

// Chunk is one chunk table entry: a run of whole record batches.
type Chunk struct {
	FirstOffset  wal.Offset // base offset of the first batch
	LastOffset   wal.Offset // offset of the last record of the last batch
	Position     int64      // byte position in the object
	Length       int64      // bytes
	BatchCount   int        // record batches in the chunk
	MinTimestamp int64      // smallest batch baseTimestamp: a hint, records may be older
	MaxTimestamp int64      // largest batch maxTimestamp: bounds every record
	CRC          uint32     // CRC-32C of the chunk's bytes
}

// NextOffset is the offset after the chunk's last record.
func (c Chunk) NextOffset() wal.Offset { return c.LastOffset + 1 }

// section is a byte range of the object with its CRC-32C.
type section struct {
	pos, length int64
	crc         uint32
}

// Footer describes one object. The exported fields are the object's facts;
// the chunk table, epochs and snapshot section are read through methods.
type Footer struct {
	TopicID    [16]byte   // the topic's UUID
	Partition  int32      // partition number
	BaseOffset wal.Offset // first offset in the object
	NextOffset wal.Offset // offset after its last record
	ObjectSize int64      // whole object, trailer included

	chunks   []Chunk
	epochs   []wal.EpochEntry
	snapshot section
}

// NumChunks is the number of chunks.
func (f *Footer) NumChunks() int { return len(f.chunks) }

// Chunk returns chunk i's entry; i must be in [0, NumChunks()).
func (f *Footer) Chunk(i int) Chunk { return f.chunks[i] }

// Chunks returns a copy of the chunk table.
func (f *Footer) Chunks() []Chunk { return slices.Clone(f.chunks) }

// ChunkRange returns chunk i's byte range in the object, for a ranged GET;
// i must be in [0, NumChunks()).
func (f *Footer) ChunkRange(i int) (pos, length int64) {
	return f.chunks[i].Position, f.chunks[i].Length
}

// ChunkFor returns the index of the chunk holding offset off. Offsets
// outside [BaseOffset, NextOffset) return false, with 0 below the object
// and NumChunks() above it. Should off fall between two chunks (a gap,
// which ParseFooter never accepts), the first chunk after it is returned
// with true, as Kafka serves the next batch after a compacted gap.
func (f *Footer) ChunkFor(off wal.Offset) (int, bool) {
	if len(f.chunks) == 0 || off < f.BaseOffset {
		return 0, false
	}
	i := sort.Search(len(f.chunks), func(i int) bool { return f.chunks[i].LastOffset >= off })
	return i, i < len(f.chunks)
}

// ChunkForTimestamp returns the first chunk whose MaxTimestamp is at least
// ts: the chunk where Kafka's ListOffsets for ts finds its offset (the
// first record with a timestamp >= ts is in it, since every record before
// it is older than ts). Timestamps need not grow along the log, so the
// table is scanned, not searched. False, with NumChunks(), when no chunk
// qualifies.
func (f *Footer) ChunkForTimestamp(ts int64) (int, bool) {
	for i, c := range f.chunks {
		if c.MaxTimestamp >= ts {
			return i, true
		}
	}
	return len(f.chunks), false
}

// MaxTimestamp is the largest MaxTimestamp of the chunks (-1 if none has one).
func (f *Footer) MaxTimestamp() int64 {
	ts := int64(-1)
	for _, c := range f.chunks {
		ts = max(ts, c.MaxTimestamp)
	}
	return ts
}

// Epochs returns a copy of the leader-epoch entries covering the object:
// the first starts at BaseOffset.
func (f *Footer) Epochs() []wal.EpochEntry { return slices.Clone(f.epochs) }

// EpochFor returns the leader epoch in force at off, false outside
// [BaseOffset, NextOffset).
func (f *Footer) EpochFor(off wal.Offset) (wal.Epoch, bool) {
	if off < f.BaseOffset || off >= f.NextOffset || len(f.epochs) == 0 {
		return wal.UndefinedEpoch, false
	}
	i := sort.Search(len(f.epochs), func(i int) bool { return f.epochs[i].StartOffset > off })
	if i == 0 {
		return wal.UndefinedEpoch, false
	}
	return f.epochs[i-1].Epoch, true
}

// SnapshotRange returns the producer snapshot's byte range in the object
// (length 0 when the builder was given none).
func (f *Footer) SnapshotRange() (pos, length int64) {
	return f.snapshot.pos, f.snapshot.length
}

// footerSize is the encoded size of a version-1 footer.
func (f *Footer) footerSize() int {
	return footerSizeFor(len(f.chunks), len(f.epochs))
}

// checkFooter checks every rule doc.go states for a footer, except its
// size against the trailer, which decoding checks.
func checkFooter(f *Footer) error {
	if f.BaseOffset < 0 || f.NextOffset <= f.BaseOffset {
		return fmt.Errorf("object: offsets [%d, %d): %w", f.BaseOffset, f.NextOffset, ErrCorrupt)
	}
	if err := checkChunks(f); err != nil {
		return err
	}
	if err := checkEpochs(f.epochs, f.BaseOffset, f.NextOffset); err != nil {
		return fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	s := f.snapshot
	if s.length < 0 || s.length > f.ObjectSize || s.pos > f.ObjectSize-s.length {
		return fmt.Errorf("object: snapshot at %d, %d bytes in %d: %w", s.pos, s.length, f.ObjectSize, ErrCorrupt)
	}
	if want := s.pos + s.length + int64(f.footerSize()) + TrailerSize; want != f.ObjectSize {
		return fmt.Errorf("object: footer says %d bytes, its sections add up to %d: %w", f.ObjectSize, want, ErrCorrupt)
	}
	return nil
}

// checkChunks checks that the chunk table tiles the offsets and bytes and
// that the snapshot starts where the last chunk ends.
func checkChunks(f *Footer) error {
	if len(f.chunks) == 0 || len(f.chunks) > MaxChunks {
		return fmt.Errorf("object: %d chunks: %w", len(f.chunks), ErrCorrupt)
	}
	pos, off := int64(0), f.BaseOffset
	for i, c := range f.chunks {
		switch {
		case c.FirstOffset != off:
			return fmt.Errorf("object: chunk %d starts at offset %d, want %d: %w", i, c.FirstOffset, off, ErrCorrupt)
		case c.LastOffset < c.FirstOffset || c.LastOffset >= f.NextOffset:
			return fmt.Errorf("object: chunk %d ends at offset %d outside [%d, %d): %w", i, c.LastOffset, c.FirstOffset, f.NextOffset, ErrCorrupt)
		case c.Position != pos:
			return fmt.Errorf("object: chunk %d at byte %d, want %d: %w", i, c.Position, pos, ErrCorrupt)
		case c.Length < wal.BatchHeaderSize || c.Length > f.ObjectSize-pos:
			return fmt.Errorf("object: chunk %d of %d bytes: %w", i, c.Length, ErrCorrupt)
		case c.BatchCount < 1 || int64(c.BatchCount) > c.Length/wal.BatchHeaderSize ||
			int64(c.BatchCount) > int64(c.LastOffset-c.FirstOffset)+1:
			return fmt.Errorf("object: chunk %d has %d batches in %d bytes: %w", i, c.BatchCount, c.Length, ErrCorrupt)
		}
		pos += c.Length
		off = c.LastOffset + 1
	}
	if off != f.NextOffset {
		return fmt.Errorf("object: chunks end at offset %d, footer says %d: %w", off, f.NextOffset, ErrCorrupt)
	}
	if f.snapshot.pos != pos {
		return fmt.Errorf("object: snapshot at byte %d, chunks end at %d: %w", f.snapshot.pos, pos, ErrCorrupt)
	}
	return nil
}

// checkEpochs checks that entries strictly increase in epoch and start,
// that the first starts at base and that all start below next. Its error
// is unclassified: the caller says whose mistake it is.
func checkEpochs(entries []wal.EpochEntry, base, next wal.Offset) error {
	if len(entries) == 0 || len(entries) > MaxEpochs {
		return fmt.Errorf("object: %d epoch entries", len(entries))
	}
	if entries[0].StartOffset != base {
		return fmt.Errorf("object: first epoch entry starts at %d, object at %d", entries[0].StartOffset, base)
	}
	for i, e := range entries {
		if e.Epoch < 0 || e.StartOffset >= next {
			return fmt.Errorf("object: epoch entry %d (%d at %d) outside the object", i, e.Epoch, e.StartOffset)
		}
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset) {
			return fmt.Errorf("object: epoch entry %d (%d at %d) does not follow (%d at %d)",
				i, e.Epoch, e.StartOffset, entries[i-1].Epoch, entries[i-1].StartOffset)
		}
	}
	return nil
}
