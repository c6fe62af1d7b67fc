package wal

// epochs.go owns the leader-epoch chain (Kafka's leader-epoch-checkpoint) and
// the fenced epoch of a Log, and their file, epochs, in the log directory
// (see doc.go for its bytes). Replication uses the chain to answer
// OffsetForLeaderEpoch (EndOffsetForEpoch), so a follower can find where its
// log diverges from its leader's, and the fenced epoch to keep the promise a
// replica makes to the controller when it accepts a fence.
//
// Invariant: entries have strictly increasing Epoch and strictly increasing
// StartOffset, every Epoch >= 0. Entry (E, S) means the first batch with
// leader epoch E in this log is at offset S; every batch in [S, next entry's
// S) has epoch E.
// Invariant: every entry's StartOffset is below the log end. Only the first
// entry may start below the log start (it covers it); entries wholly below
// the log start are dropped.
// Invariant: an entry is durable before the first batch of its epoch is
// written to a segment, so no crash leaves a batch whose epoch the recovered
// chain lacks (Open drops the entries whose batches a crash lost).
// Invariant: the fenced epoch only grows, and is durable before
// SetFencedEpoch returns.
// Invariant: the file is replaced whole (temporary file, fsync, rename,
// directory fsync), so it is the old or the new chain, never torn.
//
// Truncate's order: the segments are truncated durably first, then the file
// is rewritten without the entries at or above the truncation point, then
// (journaled logs) the truncation record is journaled. A crash before the
// file is rewritten leaves entries above the recovered end, which Open drops;
// a crash before the journal record is durable lets replay append the
// removed batches again (journal_log.go), and their AppendStamped re-adds
// their entries. Either way the chain recovered matches the log recovered.
//
// Log.epochs and Log.fenced are guarded by Log.mu and written under Log.wmu
// too; a new chain replaces the slice, never edits it in place.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// UndefinedEpoch and UndefinedOffset are Kafka's UNDEFINED_EPOCH and
// UNDEFINED_EPOCH_OFFSET: what EndOffsetForEpoch returns when it knows nothing.
const (
	UndefinedEpoch  Epoch  = -1
	UndefinedOffset Offset = -1
)

// EpochEntry says that the first batch with leader epoch Epoch in the log is
// at StartOffset.
type EpochEntry struct {
	Epoch       Epoch
	StartOffset Offset
}

// Epochs file layout (see doc.go).
const (
	epochsName        = "epochs"
	epochsMagic       = "SLEP"
	epochsVersion     = 1
	epochsHeaderSize  = 20
	epochEntrySize    = 12
	epochsCRCFieldPos = 16
	// maxEpochsFileBytes bounds what Open reads: about 1.4 million leader
	// changes, far more than a log keeps (entries below its start go).
	maxEpochsFileBytes = 16 << 20
)

// epochState is what the epochs file holds.
type epochState struct {
	fenced  Epoch
	entries []EpochEntry
}

// encodeEpochs returns the epochs file's bytes for s.
func encodeEpochs(s epochState) []byte {
	b := make([]byte, epochsHeaderSize+len(s.entries)*epochEntrySize)
	copy(b, epochsMagic)
	binary.BigEndian.PutUint16(b[4:], epochsVersion)
	binary.BigEndian.PutUint32(b[8:], uint32(s.fenced))
	binary.BigEndian.PutUint32(b[12:], uint32(len(s.entries)))
	p := epochsHeaderSize
	for _, e := range s.entries {
		binary.BigEndian.PutUint32(b[p:], uint32(e.Epoch))
		binary.BigEndian.PutUint64(b[p+4:], uint64(e.StartOffset))
		p += epochEntrySize
	}
	binary.BigEndian.PutUint32(b[epochsCRCFieldPos:], epochsCRC(b))
	return b
}

func epochsCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:epochsCRCFieldPos])
	return crc32.Update(c, castagnoli, b[epochsHeaderSize:])
}

// decodeEpochs parses an epochs file. A version other than epochsVersion is
// ErrUnknownVersion (checked before the size, which a newer version may
// change); anything else wrong is ErrCorrupt: the file is replaced by an
// atomic rename of a synced file, so a torn one is not a crash artefact.
func decodeEpochs(b []byte) (epochState, error) {
	var s epochState
	if len(b) < 8 || string(b[:4]) != epochsMagic {
		return s, fmt.Errorf("wal: %s: bad magic or size %d: %w", epochsName, len(b), ErrCorrupt)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != epochsVersion {
		return s, fmt.Errorf("wal: %s: version %d, this build reads %d: %w", epochsName, v, epochsVersion, ErrUnknownVersion)
	}
	if len(b) < epochsHeaderSize || binary.BigEndian.Uint16(b[6:]) != 0 {
		return s, fmt.Errorf("wal: %s: short header or reserved bits set: %w", epochsName, ErrCorrupt)
	}
	n := int64(binary.BigEndian.Uint32(b[12:]))
	if int64(len(b)) != epochsHeaderSize+n*epochEntrySize {
		return s, fmt.Errorf("wal: %s: says %d entries in %d bytes: %w", epochsName, n, len(b), ErrCorrupt)
	}
	if got, want := binary.BigEndian.Uint32(b[epochsCRCFieldPos:]), epochsCRC(b); got != want {
		return s, fmt.Errorf("wal: %s: crc %08x, computed %08x: %w", epochsName, got, want, ErrCorrupt)
	}
	s.fenced = Epoch(binary.BigEndian.Uint32(b[8:]))
	if s.fenced < 0 {
		return s, fmt.Errorf("wal: %s: fenced epoch %d: %w", epochsName, s.fenced, ErrCorrupt)
	}
	s.entries = make([]EpochEntry, 0, n)
	for p := epochsHeaderSize; p < len(b); p += epochEntrySize {
		e := EpochEntry{Epoch: Epoch(binary.BigEndian.Uint32(b[p:])), StartOffset: Offset(binary.BigEndian.Uint64(b[p+4:]))}
		k := len(s.entries)
		if e.Epoch < 0 || e.StartOffset < 0 ||
			k > 0 && (e.Epoch <= s.entries[k-1].Epoch || e.StartOffset <= s.entries[k-1].StartOffset) {
			return s, fmt.Errorf("wal: %s: entry %d (epoch %d at %d) out of order: %w", epochsName, k, e.Epoch, e.StartOffset, ErrCorrupt)
		}
		s.entries = append(s.entries, e)
	}
	return s, nil
}

// cutEpochs returns the entries that start below end.
func cutEpochs(entries []EpochEntry, end Offset) []EpochEntry {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].StartOffset >= end })
	return entries[:i]
}

// trimEpochs returns the entries without those wholly below start: it keeps
// the last entry that starts at or below start, which covers it.
func trimEpochs(entries []EpochEntry, start Offset) []EpochEntry {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].StartOffset > start })
	if i > 1 {
		return entries[i-1:]
	}
	return entries
}

// Epochs returns a copy of the leader-epoch chain, oldest first.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs...)
}

// LastEpoch is the leader epoch of the log's last batch (the chain's last
// entry), or UndefinedEpoch when the chain is empty.
func (l *Log) LastEpoch() Epoch {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := len(l.epochs); n > 0 {
		return l.epochs[n-1].Epoch
	}
	return UndefinedEpoch
}

// EndOffsetForEpoch answers Kafka's OffsetForLeaderEpoch for epoch e: the
// largest epoch <= e in the chain and its end offset, which is the start of
// the next entry, or the log end for the last entry (so any e at or above
// LastEpoch gets (LastEpoch, EndOffset)). As in Kafka, an e below the first
// entry's epoch gets (e, first entry's start): every batch of this log
// from there on is of a later epoch, so a follower's batches of epoch e
// diverge at the latest there. A negative e or an empty chain gets
// (UndefinedEpoch, UndefinedOffset).
func (l *Log) EndOffsetForEpoch(e Epoch) (Epoch, Offset) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if e < 0 || len(l.epochs) == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	// i is the first entry with an epoch above e.
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].Epoch > e })
	switch {
	case i == 0:
		return e, l.epochs[0].StartOffset
	case i == len(l.epochs):
		return l.epochs[i-1].Epoch, l.end
	default:
		return l.epochs[i-1].Epoch, l.epochs[i].StartOffset
	}
}

// FencedEpoch is the epoch below which this replica has promised never to
// lead or follow again (0 when no fence was accepted).
func (l *Log) FencedEpoch() Epoch {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.fenced
}

// SetFencedEpoch durably records the promise that this replica will never
// lead or follow an epoch below e: it returns once the promise survives a
// crash. A value at or below FencedEpoch changes nothing. From then on
// Append and AppendGroup refuse an epoch below it (ErrFencedEpoch);
// AppendStamped, which copies a leader's batches of older epochs, does not
// check it. A failed write is sticky. It runs as the appender.
func (l *Log) SetFencedEpoch(e Epoch) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if e <= l.fenced {
		return nil
	}
	if err := l.writeEpochs(epochState{fenced: e, entries: l.epochs}); err != nil {
		return l.fail(fmt.Errorf("wal: fence at epoch %d: %w", e, err))
	}
	l.mu.Lock()
	l.fenced = e
	l.mu.Unlock()
	// Debug: every replica of a partition fences at every election; the
	// controller logs the election once at info.
	l.log.Debug().Int32("epoch", int32(e)).Msg("wal: fenced")
	return nil
}

// assignEpoch makes the chain cover a batch of epoch e at offset start (the
// log end) before the batch is written: an epoch above the last one gets a
// new entry, written durably. leading is set for Append and AppendGroup,
// which lead epoch e and so may not lead one below the fence. The caller
// holds wmu.
func (l *Log) assignEpoch(e Epoch, start Offset, leading bool) error {
	if e < 0 {
		return fmt.Errorf("wal: batch at offset %d has leader epoch %d: %w", start, e, ErrInvalidBatch)
	}
	if leading && e < l.fenced {
		return fmt.Errorf("wal: append at epoch %d, fenced at %d: %w", e, l.fenced, ErrFencedEpoch)
	}
	n := len(l.epochs)
	if n > 0 && e <= l.epochs[n-1].Epoch {
		if e < l.epochs[n-1].Epoch {
			return fmt.Errorf("wal: batch at offset %d has leader epoch %d, the log is at epoch %d since %d: %w",
				start, e, l.epochs[n-1].Epoch, l.epochs[n-1].StartOffset, ErrStaleEpoch)
		}
		return nil
	}
	entries := make([]EpochEntry, 0, n+1)
	entries = append(entries, l.epochs...)
	if n > 0 && entries[n-1].StartOffset >= start {
		// No batch of that epoch was written (its first write failed):
		// the new epoch starts where it would have.
		entries = entries[:n-1]
	}
	entries = trimEpochs(append(entries, EpochEntry{Epoch: e, StartOffset: start}), l.start)
	if err := l.writeEpochs(epochState{fenced: l.fenced, entries: entries}); err != nil {
		return l.fail(fmt.Errorf("wal: record leader epoch %d at offset %d: %w", e, start, err))
	}
	l.mu.Lock()
	l.epochs = entries
	l.mu.Unlock()
	l.log.Debug().Int32("epoch", int32(e)).Int64("start", int64(start)).Msg("wal: new leader epoch") // debug, as "wal: fenced"
	return nil
}

// truncateEpochs durably removes the entries at or above to, after Truncate
// removed their batches durably (see the file comment for the order). The
// caller holds wmu.
func (l *Log) truncateEpochs(to Offset) error {
	entries := cutEpochs(l.epochs, to)
	if len(entries) == len(l.epochs) {
		return nil
	}
	entries = trimEpochs(entries, l.start)
	if err := l.writeEpochs(epochState{fenced: l.fenced, entries: entries}); err != nil {
		return l.fail(fmt.Errorf("wal: truncate leader epochs to %d: %w", to, err))
	}
	l.mu.Lock()
	l.epochs = entries
	l.mu.Unlock()
	return nil
}

// writeEpochs replaces the epochs file with s, durably.
func (l *Log) writeEpochs(s epochState) error {
	return vfs.WriteFileDurable(l.fs, filepath.Join(l.dir, epochsName), encodeEpochs(s))
}

// readEpochs returns the epochs file's contents, and false when there is no
// file (a log never appended to, or one written before the file existed).
func (l *Log) readEpochs() (epochState, bool, error) {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, epochsName), maxEpochsFileBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return epochState{}, false, nil
	case errors.Is(err, vfs.ErrTooLarge):
		return epochState{}, false, fmt.Errorf("wal: open %s: %w: %w", l.dir, err, ErrCorrupt)
	case err != nil:
		return epochState{}, false, fmt.Errorf("wal: read %s: %w", epochsName, err)
	}
	s, err := decodeEpochs(b)
	if err != nil {
		return s, false, fmt.Errorf("wal: open %s: %w", l.dir, err)
	}
	return s, true, nil
}

// recoverEpochs sets the chain and fence from the file read by Open, once the
// segments are recovered: entries at or above the recovered end are dropped
// (a crash lost their batches), and so are those wholly below the start. A
// non-empty log without the file (written before it existed) gets its chain
// rebuilt from its batch headers. The file is rewritten, durably, if that
// changed anything.
func (l *Log) recoverEpochs(s epochState, found bool) error {
	entries := s.entries
	if !found {
		var err error
		if entries, err = l.rebuildEpochs(); err != nil {
			return err
		}
	}
	kept := trimEpochs(cutEpochs(entries, l.end), l.start)
	l.epochs, l.fenced = kept, s.fenced
	if found && len(kept) == len(s.entries) || !found && len(kept) == 0 {
		return nil
	}
	if found {
		l.log.Info().Int("entries", len(s.entries)).Int("kept", len(kept)).Int64("end", int64(l.end)).
			Msg("wal: dropped leader epochs the recovered log does not reach")
	} else {
		l.log.Info().Int("entries", len(kept)).Msg("wal: rebuilt the leader-epoch chain from the segments")
	}
	if err := l.writeEpochs(epochState{fenced: l.fenced, entries: kept}); err != nil {
		return fmt.Errorf("wal: rewrite %s: %w", epochsName, err)
	}
	return nil
}

// rebuildEpochs reads the chain from the batch headers of the segments, for
// a log written before the epochs file existed. Leader epochs never
// decrease along a log, so two batches of the same epoch have only batches
// of that epoch between them: it reads the header at each position the
// segment's sparse offset index holds and walks batch by batch only between
// two that differ, and after the last one. A batch whose epoch is negative
// or below the previous one (a log no writer checked) is skipped and
// logged, as Kafka's epoch cache does.
func (l *Log) rebuildEpochs() ([]EpochEntry, error) {
	var b epochBuilder
	for _, s := range l.segs {
		if err := b.addSegment(s); err != nil {
			return nil, fmt.Errorf("wal: rebuild leader epochs of %s: segment %d: %w", l.dir, s.base(), err)
		}
	}
	if b.skipped > 0 {
		l.log.Warn().Int("batches", b.skipped).Msg("wal: batches with a decreasing or negative leader epoch left out of the rebuilt chain")
	}
	return b.entries, nil
}

// epochBuilder collects a chain from batch headers in offset order.
type epochBuilder struct {
	entries []EpochEntry
	skipped int
}

func (b *epochBuilder) see(h BatchHeader) {
	n := len(b.entries)
	switch {
	case h.LeaderEpoch < 0 || n > 0 && h.LeaderEpoch < b.entries[n-1].Epoch:
		b.skipped++
	case n == 0 || h.LeaderEpoch > b.entries[n-1].Epoch:
		b.entries = append(b.entries, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
	}
}

// addSegment adds the epochs of one recovered segment's batches.
func (b *epochBuilder) addSegment(s *segment) error {
	size := s.idx.size
	if size == 0 {
		return nil
	}
	prevPos := int64(0)
	prev, err := readHeader(s.file, 0, size)
	if err != nil {
		return err
	}
	b.see(prev)
	for i := 0; i <= len(s.idx.offsets); i++ {
		to := size
		var next BatchHeader
		if i < len(s.idx.offsets) {
			to = int64(s.idx.offsets[i].pos)
			if next, err = readHeader(s.file, to, size); err != nil {
				return err
			}
			if next.LeaderEpoch == prev.LeaderEpoch {
				prev, prevPos = next, to
				continue
			}
		}
		for pos := prevPos + int64(prev.Size()); pos < to; {
			h, err := readHeader(s.file, pos, size)
			if err != nil {
				return err
			}
			b.see(h)
			pos += int64(h.Size())
		}
		if i < len(s.idx.offsets) {
			b.see(next)
			prev, prevPos = next, to
		}
	}
	return nil
}
