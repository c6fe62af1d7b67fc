package wal

// recover.go owns Open: turning whatever a crash left in a directory into a
// consistent log.
//
// Invariant: after Open, every remaining segment holds only whole batches
// that passed validation, segments are contiguous, index files exist only for
// sealed segments and match them, and the recovered state is durable.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// Open opens (creating if needed) the log in dir and recovers it: stray files
// are removed, sealed segments keep their index files when those are valid
// (otherwise they are scanned and the indexes rebuilt), and the last segment is
// scanned and truncated at the first torn or corrupt batch. A corrupt sealed
// segment is truncated the same way and every later segment is removed.
func Open(fs vfs.FS, dir string, cfg Config, log zerolog.Logger) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Log{
		fs:  fs,
		dir: dir,
		log: log.With().Str("component", "wal").Str("dir", dir).Logger(),
		cfg: cfg.WithDefaults(),
	}
	l.scond = sync.NewCond(&l.smu)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if err := fs.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("wal: open %s: sync parent: %w", dir, err)
	}
	bases, err := l.cleanDir()
	if err != nil {
		return nil, err
	}
	if err := l.recoverSegments(bases); err != nil {
		l.closeAll()
		return nil, err
	}
	if len(l.segs) == 0 {
		seg, err := l.createSegment(l.end)
		if err != nil {
			return nil, err
		}
		l.segs = []*segment{seg}
	}
	if err := l.activateLast(); err != nil {
		l.closeAll()
		return nil, err
	}
	l.dirDirty = true
	if _, err := l.sync(true); err != nil {
		l.closeAll()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	l.log.Debug().Int64("start", int64(l.StartOffset())).Int64("end", int64(l.end)).Int("segments", len(l.segs)).Msg("wal: opened")
	return l, nil
}

// cleanDir removes stray files and returns the base offsets of the .log files.
func (l *Log) cleanDir() ([]Offset, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", l.dir, err)
	}
	logs := map[Offset]bool{}
	for _, n := range names {
		if base, suffix, ok := parseSegmentName(n); ok && suffix == logSuffix {
			logs[base] = true
		}
	}
	for _, n := range names {
		base, suffix, ok := parseSegmentName(n)
		stray := strings.HasSuffix(n, vfs.TmpSuffix) ||
			(ok && (suffix == indexSuffix || suffix == timeIndexSuffix) && !logs[base])
		if !stray {
			if !ok || (suffix != logSuffix && suffix != indexSuffix && suffix != timeIndexSuffix) {
				l.log.Warn().Str("file", n).Msg("wal: unknown file in log directory left alone")
			}
			continue
		}
		l.log.Warn().Str("file", n).Msg("wal: removing stray file")
		if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !errorsIsNotExist(err) {
			return nil, fmt.Errorf("wal: remove stray %s: %w", n, err)
		}
	}
	bases := make([]Offset, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// recoverSegments opens and checks each segment in order, stopping (and
// removing the rest) at the first that is corrupt or not contiguous.
func (l *Log) recoverSegments(bases []Offset) error {
	for i, base := range bases {
		if len(l.segs) > 0 && base != l.end {
			l.log.Warn().Int64("segment", int64(base)).Int64("expected", int64(l.end)).
				Msg("wal: segment not contiguous with the previous one; removing it and all later segments")
			return l.removeSegmentFiles(bases[i:])
		}
		seg, intact, err := l.recoverSegment(base, i == len(bases)-1)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, seg)
		l.end = seg.idx.next
		if !intact && i < len(bases)-1 {
			l.log.Warn().Int64("segment", int64(base)).Msg("wal: sealed segment was torn; removing all later segments")
			return l.removeSegmentFiles(bases[i+1:])
		}
	}
	if len(bases) > 0 && len(l.segs) == 0 {
		return fmt.Errorf("wal: no segment recovered in %s", l.dir)
	}
	if len(bases) == 0 {
		l.end = 0
	}
	return nil
}

// recoverSegment opens one segment, trusting its index files when it is not
// the last and they check out, scanning it otherwise. intact is false when the
// scan found a torn or corrupt batch and truncated the file there.
func (l *Log) recoverSegment(base Offset, last bool) (seg *segment, intact bool, err error) {
	path := filepath.Join(l.dir, segmentName(base, logSuffix))
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("wal: open segment %d: %w", base, err)
	}
	seg = &segment{file: f, path: path, created: l.cfg.Now(), sealed: !last}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, false, fmt.Errorf("wal: size of segment %d: %w", base, err)
	}
	if !last {
		x, ierr := loadSealedIndex(l.fs, f, path, base, size)
		if ierr == nil {
			seg.idx = x
			return seg, true, nil
		}
		l.log.Info().Int64("segment", int64(base)).Err(ierr).Msg("wal: rebuilding index of sealed segment")
	}
	res, err := scanSegment(f, base, size, l.cfg.IndexIntervalBytes)
	if err != nil {
		_ = f.Close()
		return nil, false, err
	}
	seg.idx = res.idx
	if res.stop != nil {
		l.log.Warn().Int64("segment", int64(base)).Int64("offset", int64(res.idx.next)).
			Int64("position", res.idx.size).Int64("dropped_bytes", size-res.idx.size).Err(res.stop).
			Msg("wal: truncating segment at torn or corrupt batch")
		if err := f.Truncate(res.idx.size); err != nil {
			_ = f.Close()
			return nil, false, fmt.Errorf("wal: truncate segment %d at byte %d: %w", base, res.idx.size, err)
		}
	}
	if !last {
		l.unsynced = append(l.unsynced, seg) // rewrite its index files
	}
	return seg, res.stop == nil, nil
}

// activateLast makes the last segment the active one: it has no index files
// on disk while active. A truncated sealed segment that ended the recovery
// becomes active here too.
func (l *Log) activateLast() error {
	last := l.segs[len(l.segs)-1]
	last.sealed = false
	kept := l.unsynced[:0]
	for _, s := range l.unsynced {
		if s != last {
			kept = append(kept, s)
		}
	}
	l.unsynced = kept
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		err := l.fs.Remove(last.indexPath(suffix))
		if err != nil && !errorsIsNotExist(err) {
			return fmt.Errorf("wal: remove index of active segment %d: %w", last.base(), err)
		}
	}
	return nil
}

// removeSegmentFiles removes the files of the segments at bases.
func (l *Log) removeSegmentFiles(bases []Offset) error {
	var errs []error
	for _, b := range bases {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			err := l.fs.Remove(filepath.Join(l.dir, segmentName(b, suffix)))
			if err != nil && !errorsIsNotExist(err) {
				errs = append(errs, fmt.Errorf("wal: remove segment %d: %w", b, err))
			}
		}
	}
	l.dirDirty = true
	return errors.Join(errs...)
}

// closeAll closes the files of a Log that failed to open. Open returns the
// error that got it here, so close errors are not reported.
func (l *Log) closeAll() {
	for _, s := range l.segs {
		_ = s.close()
	}
	l.segs = nil
}
