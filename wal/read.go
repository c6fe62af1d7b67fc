package wal

// read.go owns the read paths, Read and FindTimestamp. They run on any
// goroutine concurrently with the appender: under Log.mu (read) they take a
// snapshot of the segments they need (visible size and index) and a
// reference on each, then read with ReadAt without holding the lock.
//
// Invariant: a reader never sees bytes beyond the visible size it took under
// Log.mu, so it sees only whole appended batches.
// If Truncate removed bytes while a read ran (truncGen changed), the read is
// retried, so a reader never returns bytes that are no longer in the log.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// view is a reader's snapshot of one segment.
type view struct {
	seg     *segment
	base    Offset
	next    Offset
	size    int64
	offsets []offsetEntry
	times   []timeEntry
}

const readRetries = 3

// Read returns whole batches starting with the one that contains from, only
// batches whose base offset is below limit, concatenated up to maxBytes, but
// always at least the first batch. It returns (nil, nil) when from ==
// EndOffset or no batch starts below limit, and ErrOffsetOutOfRange when from
// is outside [StartOffset, EndOffset]. The result is the caller's to keep.
func (l *Log) Read(from, limit Offset, maxBytes int) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		views, gen, err := l.snapshotFrom(from, int64(maxBytes))
		if err != nil || views == nil {
			return nil, err
		}
		data, err := readViews(views, from, limit, maxBytes)
		if l.retry(views, gen, attempt) {
			continue
		}
		return data, err
	}
}

// retry releases views and reports whether the tail was truncated meanwhile.
func (l *Log) retry(views []view, gen uint64, attempt int) bool {
	for _, v := range views {
		v.seg.release()
	}
	l.mu.RLock()
	changed := l.truncGen != gen
	l.mu.RUnlock()
	return changed && attempt < readRetries
}

// snapshotFrom returns views of the segment holding from and the following
// ones, enough to cover want bytes, with references taken. It returns nil
// views when from == EndOffset.
func (l *Log) snapshotFrom(from Offset, want int64) ([]view, uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, 0, ErrClosed
	}
	start := l.start
	if from < start || from > l.end {
		return nil, 0, fmt.Errorf("wal: read at offset %d, log has [%d, %d): %w", from, start, l.end, ErrOffsetOutOfRange)
	}
	if from == l.end {
		return nil, l.truncGen, nil
	}
	i := l.segmentFor(from)
	var views []view
	var covered int64
	for _, s := range l.segs[i:] {
		s.acquire()
		views = append(views, view{seg: s, base: s.base(), next: s.idx.next, size: s.idx.size,
			offsets: s.idx.offsets, times: s.idx.times})
		covered += s.idx.size
		if covered > want+BatchHeaderSize && len(views) > 1 {
			break
		}
	}
	return views, l.truncGen, nil
}

// segmentFor returns the index of the last segment with base <= off. The
// caller holds mu.
func (l *Log) segmentFor(off Offset) int {
	lo, hi := 0, len(l.segs)
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if l.segs[m].base() <= off {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// locate returns the position of the batch containing off in v, walking
// batch headers from the nearest index entry.
func locate(v view, off Offset) (int64, error) {
	pos := lookupOffset(v.base, v.offsets, off)
	for pos < v.size {
		h, err := readHeader(v.seg.file, pos, v.size)
		if err != nil {
			return 0, fmt.Errorf("wal: segment %d: %w", v.base, err)
		}
		if h.LastOffset() >= off {
			if h.BaseOffset > off {
				return 0, fmt.Errorf("wal: segment %d: offset %d missing at byte %d: %w", v.base, off, pos, ErrCorrupt)
			}
			return pos, nil
		}
		pos += int64(h.Size())
	}
	return v.size, nil
}

// readViews gathers the batches of a Read from the snapshotted segments.
func readViews(views []view, from, limit Offset, maxBytes int) ([]byte, error) {
	var out []byte
	first := true
	for i, v := range views {
		pos := int64(0)
		if i == 0 {
			var err error
			if pos, err = locate(v, from); err != nil {
				return nil, err
			}
		}
		budget := maxBytes - len(out)
		if !first && budget <= 0 {
			break
		}
		chunk, done, err := readSegment(v, pos, limit, budget, first)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = chunk
		} else {
			out = append(out, chunk...)
		}
		if len(out) > 0 {
			first = false
		}
		if done {
			break
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// readSegment reads whole batches from v at pos while their base is below
// limit and they fit budget (the first batch of a Read always fits). done is
// set when the read must not continue into the next segment.
func readSegment(v view, pos int64, limit Offset, budget int, first bool) (data []byte, done bool, err error) {
	if pos >= v.size {
		return nil, false, nil
	}
	want := v.size - pos
	if want > int64(max(budget, BatchHeaderSize)) {
		want = int64(max(budget, BatchHeaderSize))
	}
	buf := make([]byte, want)
	if _, err := v.seg.file.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, true, fmt.Errorf("wal: read segment %d at byte %d: %w", v.base, pos, err)
	}
	off := 0
	for off < len(buf) {
		if off+BatchHeaderSize > len(buf) {
			done = true // budget ends inside a header
			break
		}
		h, err := ParseBatchHeader(buf[off:])
		if err != nil || pos+int64(off)+int64(h.Size()) > v.size {
			return nil, true, fmt.Errorf("wal: segment %d at byte %d: bad stored batch: %w", v.base, pos+int64(off), ErrCorrupt)
		}
		if h.BaseOffset >= limit {
			return buf[:off], true, nil
		}
		if off+h.Size() > len(buf) {
			if first && off == 0 { // Kafka: the first batch is returned even above maxBytes
				whole := make([]byte, h.Size())
				if _, err := v.seg.file.ReadAt(whole, pos); err != nil && !errors.Is(err, io.EOF) {
					return nil, true, fmt.Errorf("wal: read segment %d at byte %d: %w", v.base, pos, err)
				}
				return whole, true, nil
			}
			done = true
			break
		}
		off += h.Size()
	}
	return buf[:off], done || off < len(buf), nil
}

// FindTimestamp returns (a copy of) the first batch in offset order whose
// maxTimestamp is >= ts and that holds an offset at or above StartOffset, or
// (nil, nil) if there is none.
func (l *Log) FindTimestamp(ts int64) ([]byte, error) {
	minBase := Offset(0)
	for attempt := 0; ; attempt++ {
		v, start, gen, ok, err := l.snapshotForTime(ts, minBase)
		if err != nil || !ok {
			return nil, err
		}
		batch, err := findInView(v, ts, start)
		if l.retry([]view{v}, gen, attempt) {
			continue
		}
		if err != nil || batch != nil {
			return batch, err
		}
		// Only batches below the log start reach ts in this segment.
		minBase = v.next
	}
}

// snapshotForTime returns a view of the first segment based at or above
// minBase and not below the log start whose max timestamp reaches ts, with a
// reference taken, and the log start.
func (l *Log) snapshotForTime(ts int64, minBase Offset) (view, Offset, uint64, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return view{}, 0, 0, false, ErrClosed
	}
	for _, s := range l.segs {
		if s.base() >= minBase && s.idx.size > 0 && s.idx.maxTS >= ts && s.idx.next > l.start {
			s.acquire()
			return view{seg: s, base: s.base(), next: s.idx.next, size: s.idx.size,
				offsets: s.idx.offsets, times: s.idx.times}, l.start, l.truncGen, true, nil
		}
	}
	return view{}, 0, 0, false, nil
}

// findInView scans v from the time index's hint for the first batch whose
// maxTimestamp >= ts and whose last offset is at or above start.
func findInView(v view, ts int64, start Offset) ([]byte, error) {
	from := max(lookupTime(v.base, v.times, ts), start)
	pos := lookupOffset(v.base, v.offsets, from)
	for pos < v.size {
		h, err := readHeader(v.seg.file, pos, v.size)
		if err != nil {
			return nil, fmt.Errorf("wal: segment %d: %w", v.base, err)
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= start {
			b := make([]byte, h.Size())
			if _, err := v.seg.file.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("wal: read segment %d at byte %d: %w", v.base, pos, err)
			}
			if Offset(binary.BigEndian.Uint64(b)) != h.BaseOffset {
				return nil, fmt.Errorf("wal: segment %d changed under read: %w", v.base, ErrCorrupt)
			}
			return b, nil
		}
		pos += int64(h.Size())
	}
	return nil, nil
}

// BytesFrom returns how many bytes of the log lie at and above the batch
// holding off: the backlog, in bytes, of a reader positioned at off.
func (l *Log) BytesFrom(off Offset) (int64, error) {
	views, gen, err := l.snapshotFrom(off, math.MaxInt64/2) // every segment from off on
	if err != nil || views == nil {
		return 0, err
	}
	defer l.retry(views, gen, readRetries)
	pos, err := locate(views[0], off)
	if err != nil {
		return 0, err
	}
	total := views[0].size - pos
	for _, v := range views[1:] {
		total += v.size
	}
	return total, nil
}
