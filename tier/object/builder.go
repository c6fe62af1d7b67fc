package object

// builder.go owns the Builder: it takes whole record batches in offset
// order, cuts them into chunks and, given the leader-epoch chain and a
// producer snapshot, lays out one object's bytes (doc.go).
//
// Invariant: buf holds exactly the batches added, back to back and
// unchanged; chunks followed by the open chunk tile buf in bytes and
// [first batch's base, next) in offsets.
// Invariant: a failed Add or Finish changes nothing, so the caller may go
// on with another batch or other epochs.
// Invariant: epochs (from the batches' headers) strictly increase in epoch
// and start, the first at the first batch's base offset.
//
// A Builder belongs to one goroutine; it has no lock.

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/sluice-mq/sluice/wal"
)

// Defaults and limits of BuilderConfig.
const (
	// DefaultTargetChunkBytes is the chunk size a reader's ranged GET fetches.
	DefaultTargetChunkBytes = 4 << 20
	// MaxTargetChunkBytes keeps every chunk (at most the target, or one
	// batch of at most 2 GiB larger than it) within a chunk entry's u32
	// length field.
	MaxTargetChunkBytes = 1 << 30
)

// BuilderConfig says what object to build.
type BuilderConfig struct {
	TopicID   [16]byte // written into the footer
	Partition int32    // written into the footer
	// TargetChunkBytes is the size a chunk is closed at: a batch that
	// would take the open chunk past it starts a new one. 0 means
	// DefaultTargetChunkBytes.
	TargetChunkBytes int
	// SizeHint is the object size the caller expects, reserved up front to
	// spare copies while the buffer grows; 0 reserves nothing.
	SizeHint int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c BuilderConfig) WithDefaults() BuilderConfig {
	if c.TargetChunkBytes == 0 {
		c.TargetChunkBytes = DefaultTargetChunkBytes
	}
	return c
}

// Validate checks c after WithDefaults.
func (c BuilderConfig) Validate() error {
	if c.TargetChunkBytes < 1 || c.TargetChunkBytes > MaxTargetChunkBytes {
		return fmt.Errorf("object: target chunk bytes %d outside [1, %d]: %w", c.TargetChunkBytes, MaxTargetChunkBytes, ErrInvalid)
	}
	if c.Partition < 0 || c.SizeHint < 0 {
		return fmt.Errorf("object: partition %d, size hint %d: %w", c.Partition, c.SizeHint, ErrInvalid)
	}
	return nil
}

// Builder lays out one object. Add the batches in offset order, then call
// Finish once.
type Builder struct {
	cfg    BuilderConfig
	buf    []byte           // the object so far: the batches added
	chunks []Chunk          // closed chunks
	open   Chunk            // the open chunk; BatchCount 0 when empty
	epochs []wal.EpochEntry // from the batches' headers
	next   wal.Offset       // offset after the last batch; UndefinedOffset before the first
	done   bool             // Finish succeeded
}

// NewBuilder returns a Builder for cfg (defaults applied).
func NewBuilder(cfg BuilderConfig) (*Builder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Builder{
		cfg:  cfg,
		buf:  make([]byte, 0, cfg.SizeHint),
		next: wal.UndefinedOffset,
	}, nil
}

// Len is the number of batch bytes added so far.
func (b *Builder) Len() int { return len(b.buf) }

// NextOffset is the offset after the last batch added: the base offset
// the next batch must carry. wal.UndefinedOffset before the first batch.
func (b *Builder) NextOffset() wal.Offset { return b.next }

// BaseOffset is the first batch's base offset, wal.UndefinedOffset before it.
func (b *Builder) BaseOffset() wal.Offset {
	if len(b.epochs) == 0 {
		return wal.UndefinedOffset
	}
	return b.epochs[0].StartOffset
}

// Add appends batch, exactly one whole Kafka v2 record batch with a valid
// CRC, its base offset and leader epoch stamped as the log stores them. Its
// base offset must be NextOffset() (any offset >= 0 for the first batch),
// and its leader epoch >= 0 and no lower than the previous batch's. The
// bytes are copied. An error wraps ErrInvalid (and wal's marker when wal
// refused the batch) and leaves the Builder as it was.
func (b *Builder) Add(batch []byte) error {
	if b.done {
		return fmt.Errorf("object: add after finish: %w", ErrInvalid)
	}
	h, err := checkBatch(batch)
	if err != nil {
		return err
	}
	if b.next != wal.UndefinedOffset && h.BaseOffset != b.next {
		return fmt.Errorf("object: batch at offset %d, want %d (batches must be contiguous): %w", h.BaseOffset, b.next, ErrInvalid)
	}
	newEpoch := len(b.epochs) == 0 || h.LeaderEpoch != b.epochs[len(b.epochs)-1].Epoch
	if newEpoch && len(b.epochs) > 0 && h.LeaderEpoch < b.epochs[len(b.epochs)-1].Epoch {
		return fmt.Errorf("object: batch at offset %d has leader epoch %d after %d: %w",
			h.BaseOffset, h.LeaderEpoch, b.epochs[len(b.epochs)-1].Epoch, ErrInvalid)
	}
	if newEpoch && len(b.epochs) >= MaxEpochs {
		return fmt.Errorf("object: more than %d leader epochs: %w", MaxEpochs, ErrInvalid)
	}
	cut := b.open.BatchCount > 0 && b.open.Length+int64(len(batch)) > int64(b.cfg.TargetChunkBytes)
	if cut && len(b.chunks)+1 >= MaxChunks {
		return fmt.Errorf("object: more than %d chunks: %w", MaxChunks, ErrInvalid)
	}

	if cut {
		b.chunks = append(b.chunks, b.open)
		b.open = Chunk{}
	}
	if b.open.BatchCount == 0 {
		b.open = Chunk{
			FirstOffset:  h.BaseOffset,
			Position:     int64(len(b.buf)),
			MinTimestamp: h.BaseTimestamp,
			MaxTimestamp: h.MaxTimestamp,
		}
	}
	b.open.LastOffset = h.LastOffset()
	b.open.Length += int64(len(batch))
	b.open.BatchCount++
	b.open.MinTimestamp = min(b.open.MinTimestamp, h.BaseTimestamp)
	b.open.MaxTimestamp = max(b.open.MaxTimestamp, h.MaxTimestamp)
	b.open.CRC = crc32.Update(b.open.CRC, castagnoli, batch)
	if newEpoch {
		b.epochs = append(b.epochs, wal.EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
	}
	b.buf = append(b.buf, batch...)
	b.next = h.LastOffset() + 1
	return nil
}

// checkBatch checks that batch is exactly one whole, valid v2 batch whose
// offsets and epoch are in range.
func checkBatch(batch []byte) (wal.BatchHeader, error) {
	h, err := wal.ParseBatchHeader(batch)
	if err != nil {
		return h, fmt.Errorf("object: add: %w: %w", ErrInvalid, err)
	}
	switch {
	case h.Size() != len(batch):
		return h, fmt.Errorf("object: add: batch length field says %d bytes, have %d: %w: %w", h.Size(), len(batch), ErrInvalid, wal.ErrInvalidBatch)
	case h.LastOffsetDelta < 0 || h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-wal.Offset(h.LastOffsetDelta)-1:
		return h, fmt.Errorf("object: add: batch offsets %d+%d: %w: %w", h.BaseOffset, h.LastOffsetDelta, ErrInvalid, wal.ErrInvalidBatch)
	case h.LeaderEpoch < 0:
		return h, fmt.Errorf("object: add: batch at offset %d has leader epoch %d (not stamped): %w", h.BaseOffset, h.LeaderEpoch, ErrInvalid)
	}
	if err := wal.CheckCRC(batch); err != nil {
		return h, fmt.Errorf("object: add: %w: %w", ErrInvalid, err)
	}
	return h, nil
}

// Finish lays out the object: the chunks, producerSnapshot (opaque, may be
// empty), the footer and the trailer, and returns its bytes (the Builder
// gives them up) and its Footer. epochs is the partition's leader-epoch
// chain (wal.Log.Epochs, or any part of it covering the object): the entry
// in force at the object's base offset is kept with its start clamped to
// it, entries starting inside the object are kept, later ones dropped. The
// kept entries must match the leader epochs the batches carry. An error
// (ErrInvalid: no batches, epochs malformed or not matching, finished)
// leaves the Builder as it was.
func (b *Builder) Finish(epochs []wal.EpochEntry, producerSnapshot []byte) ([]byte, Footer, error) {
	if b.done {
		return nil, Footer{}, fmt.Errorf("object: finish twice: %w", ErrInvalid)
	}
	if b.open.BatchCount == 0 {
		return nil, Footer{}, fmt.Errorf("object: finish without batches: %w", ErrInvalid)
	}
	base := b.BaseOffset()
	kept, err := ClampEpochs(epochs, base, b.next)
	if err != nil {
		return nil, Footer{}, err
	}
	if !slices.Equal(kept, b.epochs) {
		return nil, Footer{}, fmt.Errorf("object: epochs %v over [%d, %d) do not match the batches' %v: %w", kept, base, b.next, b.epochs, ErrInvalid)
	}
	f := Footer{
		TopicID:    b.cfg.TopicID,
		Partition:  b.cfg.Partition,
		BaseOffset: base,
		NextOffset: b.next,
		chunks:     append(b.chunks, b.open),
		epochs:     kept,
	}
	f.snapshot = section{
		pos:    int64(len(b.buf)),
		length: int64(len(producerSnapshot)),
		crc:    crc32.Checksum(producerSnapshot, castagnoli),
	}
	f.ObjectSize = f.snapshot.pos + f.snapshot.length + int64(f.footerSize()) + TrailerSize
	out := slices.Grow(b.buf, int(f.ObjectSize)-len(b.buf))
	out = append(out, producerSnapshot...)
	out = appendFooter(out, &f)
	out = appendTrailer(out, f.footerSize())
	*b = Builder{cfg: b.cfg, next: b.next, done: true}
	return out, f, nil
}

// ClampEpochs returns the entries of a leader-epoch chain that cover
// [base, next): the entry in force at base with its start moved up to
// base, then those starting inside the range. It fails (ErrInvalid) if the
// chain does not strictly increase, has a negative epoch, or has no entry
// at or below base.
func ClampEpochs(chain []wal.EpochEntry, base, next wal.Offset) ([]wal.EpochEntry, error) {
	for i, e := range chain {
		if e.Epoch < 0 || i > 0 && (e.Epoch <= chain[i-1].Epoch || e.StartOffset <= chain[i-1].StartOffset) {
			return nil, fmt.Errorf("object: epoch chain entry %d (%d at %d) out of order: %w", i, e.Epoch, e.StartOffset, ErrInvalid)
		}
	}
	// first is the index of the first entry starting above base.
	first, _ := slices.BinarySearchFunc(chain, base+1, func(e wal.EpochEntry, off wal.Offset) int {
		return cmp.Compare(e.StartOffset, off)
	})
	if first == 0 {
		return nil, fmt.Errorf("object: no leader epoch covers base offset %d: %w", base, ErrInvalid)
	}
	end := first
	for end < len(chain) && chain[end].StartOffset < next {
		end++
	}
	kept := make([]wal.EpochEntry, 0, end-first+1)
	kept = append(kept, wal.EpochEntry{Epoch: chain[first-1].Epoch, StartOffset: base})
	return append(kept, chain[first:end]...), nil
}
