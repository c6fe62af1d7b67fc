package wal

// segment.go owns one segment: its open .log file, its in-memory index, its
// reference count, and the scan that validates a .log file batch by batch.
//
// Invariant: a segment's .log holds whole batches in [idx.base, idx.next),
// contiguous in offset order, in exactly idx.size bytes; only the active
// (last) segment grows.
// Invariant: the file is closed once, after the segment is dropped from the
// log and no reader holds a reference.
// idx and sealed are guarded by Log.mu; refs and dropped are atomic.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	baseDigits      = 20
)

// segmentName is the file name of a segment's file with the given suffix.
func segmentName(base Offset, suffix string) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, suffix)
}

// parseSegmentName splits a segment file name into base offset and suffix.
func parseSegmentName(name string) (Offset, string, bool) {
	i := strings.IndexByte(name, '.')
	if i != baseDigits {
		return 0, "", false
	}
	base, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || base < 0 {
		return 0, "", false
	}
	return Offset(base), name[i:], true
}

type segment struct {
	file    vfs.File
	path    string    // of the .log file
	created time.Time // when this segment became active (wall clock), for SegmentAge
	idx     segIndex  // guarded by Log.mu while active
	sealed  bool      // guarded by Log.mu
	wbPos   int64     // guarded by Log.wmu: writeback was started below this position
	// cacheDropped: the page cache was dropped below this position
	// (cache.go); guarded by the sync baton (Log.syncing).
	cacheDropped int64

	refs      atomic.Int32
	dropped   atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

func (s *segment) base() Offset { return s.idx.base }

func (s *segment) indexPath(suffix string) string {
	return filepath.Join(filepath.Dir(s.path), segmentName(s.base(), suffix))
}

// acquire takes a reference; the caller must hold Log.mu (read or write) and
// the segment must still be in the log.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference, closing the file if the segment was dropped.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 && s.dropped.Load() {
		_ = s.close() // kept in closeErr; see drop
	}
}

// drop marks the segment as gone from the log; the file closes when the last
// reference is released. The caller must hold Log.mu for writing. The close
// error is kept in closeErr, which closeFiles reports; a segment dropped by
// a deletion or truncation has no data left to lose.
func (s *segment) drop() {
	s.dropped.Store(true)
	if s.refs.Load() == 0 {
		_ = s.close()
	}
}

func (s *segment) close() error {
	s.closeOnce.Do(func() { s.closeErr = s.file.Close() })
	return s.closeErr
}

// scanResult is what scanning a .log file found.
type scanResult struct {
	idx segIndex
	// stop is nil when the whole file is valid batches; otherwise why the
	// scan stopped at idx.size (a torn or corrupt batch).
	stop error
}

// scanner reads a file sequentially through a window buffer.
type scanner struct {
	f     vfs.File
	size  int64
	buf   []byte
	start int64 // file position of buf[0]
}

const scanWindow = 1 << 20

// window returns n bytes at pos, or io.ErrUnexpectedEOF past the end.
func (sc *scanner) window(pos int64, n int) ([]byte, error) {
	if pos+int64(n) > sc.size {
		return nil, io.ErrUnexpectedEOF
	}
	if pos >= sc.start && pos+int64(n) <= sc.start+int64(len(sc.buf)) {
		return sc.buf[pos-sc.start : pos-sc.start+int64(n)], nil
	}
	want := max(n, scanWindow)
	if rest := sc.size - pos; int64(want) > rest {
		want = int(rest)
	}
	if cap(sc.buf) < want {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:want]
	if _, err := sc.f.ReadAt(sc.buf, pos); err != nil && !errors.Is(err, io.EOF) {
		sc.buf = sc.buf[:0]
		return nil, err
	}
	sc.start = pos
	return sc.buf[:n], nil
}

// scanSegment validates the first size bytes of f batch by batch (length,
// magic, CRC, offset continuity from base) and builds the index. A structural
// problem ends the scan and is reported in stop; an I/O error is returned.
func scanSegment(f vfs.File, base Offset, size int64, interval int) (scanResult, error) {
	res := scanResult{idx: newSegIndex(base)}
	sc := &scanner{f: f, size: size}
	for pos := int64(0); pos < size; {
		hb, err := sc.window(pos, BatchHeaderSize)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			res.stop = fmt.Errorf("torn batch header at byte %d: %w", pos, ErrCorrupt)
			return res, nil
		} else if err != nil {
			return res, fmt.Errorf("wal: scan segment %d at byte %d: %w", base, pos, err)
		}
		h, err := ParseBatchHeader(hb)
		if err == nil {
			err = checkStored(h, res.idx.next, pos)
		}
		if err != nil {
			res.stop = err
			return res, nil
		}
		b, err := sc.window(pos, h.Size())
		if errors.Is(err, io.ErrUnexpectedEOF) {
			res.stop = fmt.Errorf("torn batch at offset %d byte %d: %w", h.BaseOffset, pos, ErrCorrupt)
			return res, nil
		} else if err != nil {
			return res, fmt.Errorf("wal: scan segment %d at byte %d: %w", base, pos, err)
		}
		if err := CheckCRC(b); err != nil {
			res.stop = err
			return res, nil
		}
		res.idx.add(h, h.Size(), interval)
		pos += int64(h.Size())
	}
	return res, nil
}

// checkStored checks a stored batch header against the offset and position
// it must have.
func checkStored(h BatchHeader, want Offset, pos int64) error {
	switch {
	case h.BaseOffset != want:
		return fmt.Errorf("batch at byte %d has base offset %d, want %d: %w", pos, h.BaseOffset, want, ErrCorrupt)
	case h.LastOffsetDelta < 0:
		return fmt.Errorf("batch at byte %d has lastOffsetDelta %d: %w", pos, h.LastOffsetDelta, ErrCorrupt)
	case pos+int64(h.Size()) > MaxSegmentBytes:
		return fmt.Errorf("batch at byte %d overflows the segment: %w", pos, ErrCorrupt)
	}
	return nil
}

// readHeader reads the batch header at pos of a segment whose visible size is
// size, checking its structure.
func readHeader(f vfs.File, pos, size int64) (BatchHeader, error) {
	if pos+BatchHeaderSize > size {
		return BatchHeader{}, fmt.Errorf("wal: batch header at byte %d beyond segment size %d: %w", pos, size, ErrCorrupt)
	}
	var hb [BatchHeaderSize]byte
	if _, err := f.ReadAt(hb[:], pos); err != nil {
		return BatchHeader{}, fmt.Errorf("wal: read batch header at byte %d: %w", pos, err)
	}
	h, err := ParseBatchHeader(hb[:])
	if err != nil {
		return h, fmt.Errorf("wal: stored batch at byte %d: %w", pos, errors.Join(err, ErrCorrupt))
	}
	if pos+int64(h.Size()) > size || h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("wal: stored batch at byte %d: length %d beyond segment size %d: %w", pos, h.Length, size, ErrCorrupt)
	}
	return h, nil
}

// readFile reads a whole small file.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	b, err := vfs.ReadFile(fs, path, MaxSegmentBytes)
	if errors.Is(err, vfs.ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", err, ErrCorrupt)
	}
	return b, err
}

// loadSealedIndex reads and checks a sealed segment's index files against its
// .log of size bytes, returning the index or an error if it cannot be trusted.
func loadSealedIndex(fs vfs.FS, f vfs.File, logPath string, base Offset, size int64) (segIndex, error) {
	dir := filepath.Dir(logPath)
	x := newSegIndex(base)
	ob, err := readFile(fs, filepath.Join(dir, segmentName(base, indexSuffix)))
	if err != nil {
		return x, err
	}
	if err := decodeIndex(ob, indexKindOffset, &x); err != nil {
		return x, err
	}
	t := newSegIndex(base)
	tb, err := readFile(fs, filepath.Join(dir, segmentName(base, timeIndexSuffix)))
	if err != nil {
		return x, err
	}
	if err := decodeIndex(tb, indexKindTime, &t); err != nil {
		return x, err
	}
	if t.next != x.next || t.size != x.size || t.maxTS != x.maxTS {
		return x, fmt.Errorf("wal: offset and time index of segment %d disagree: %w", base, ErrCorrupt)
	}
	if x.size != size {
		return x, fmt.Errorf("wal: index says %d bytes, segment %d has %d: %w", x.size, base, size, ErrCorrupt)
	}
	x.times = t.times
	// Spot-check the first and last indexed batch against the log itself.
	if size > 0 {
		if h, err := readHeader(f, 0, size); err != nil || h.BaseOffset != base {
			return x, fmt.Errorf("wal: segment %d first batch does not match index: %w", base, ErrCorrupt)
		}
	}
	if n := len(x.offsets); n > 0 {
		e := x.offsets[n-1]
		if h, err := readHeader(f, int64(e.pos), size); err != nil || h.BaseOffset != base+Offset(e.rel) || h.LastOffset() >= x.next {
			return x, fmt.Errorf("wal: segment %d last index entry does not match the log: %w", base, ErrCorrupt)
		}
	}
	x.sinceIndex = 0
	return x, nil
}

// errorsIsNotExist reports a missing file.
func errorsIsNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
