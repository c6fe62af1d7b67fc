package wal

// segments.go owns what the log shows of its segments to the code that
// decides deletions (tier's retention state machine), and the one deletion
// that machine asks for: DeleteBelow. The log itself decides nothing about
// which data may go.
//
// Invariant: DeleteBelow removes only whole sealed segments, oldest first,
// never the active one, and only those whose every offset is below the
// offset it is given or below the log start; it checkpoints the new start
// (the base of the first segment kept) before removing any file, and stops
// at the first file it fails to remove (maintain.go).

import "time"

// SegmentInfo describes one segment of the log.
type SegmentInfo struct {
	Base Offset // first offset
	Next Offset // offset after its last batch
	Size int64  // bytes of whole batches
	// MaxTimestamp is the largest batch max timestamp, -1 when empty.
	MaxTimestamp int64
	// Created is when the segment became active, by the log's clock (at
	// open, for segments recovered from disk).
	Created time.Time
	Sealed  bool // false for the active segment, the last one
}

// Segments lists the log's segments in offset order; the last is the active
// one. Segments wholly below StartOffset that wait for removal are listed
// too: their bytes are still on disk.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.idx.base, Next: s.idx.next, Size: s.idx.size,
			MaxTimestamp: s.idx.maxTS, Created: s.created, Sealed: i < len(l.segs)-1}
	}
	return out
}

// DeleteBelow deletes the sealed segments whose offsets are all below off,
// oldest first, and those already wholly below the log start; never the
// active segment. StartOffset becomes the base of the first segment kept if
// that is higher. It returns how many segments it removed. A segment it
// fails to remove stays (unreadable, below the start) for the next
// DeleteBelow or Maintain; the error is not sticky. It runs as the appender.
func (l *Log) DeleteBelow(off Offset) (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	return l.deleteBelow(off)
}
