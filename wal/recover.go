package wal

// recover.go owns Open: turning whatever a crash left in a directory into a
// consistent log.
//
// Invariant: after Open, every remaining segment holds only whole batches
// that passed validation, segments are contiguous, index files exist only for
// sealed segments and match them, the first segment holds the log start (or
// begins at it), a log-start checkpoint exists, the leader-epoch chain
// matches the recovered segments (epochs.go), and the recovered state is
// durable.
//
// Gaps. A segment whose base does not continue the previous one is resolved
// by what can explain it:
//   - Segments wholly below the checkpointed log start are the leftovers of
//     an interrupted deletion (DeleteBelow and AdvanceStart checkpoint first,
//     then delete oldest first): they are removed, whatever gaps they have.
//   - After a segment whose index files were missing or stale (it was never
//     completely synced: Sync writes index files only after fsyncing the
//     segment), nothing later was durable either: the later segments go, as
//     after a torn segment. Truncate removes the index files of the segment
//     it keeps durably before it removes any later segment, so a crashed
//     truncation lands here too.
//   - After a segment whose index files were valid, or between the
//     checkpoint and the first segment, nothing explains a gap: data that was
//     durable is gone. Open refuses the log with ErrCorrupt rather than drop
//     either side.
//   - A log without a checkpoint (written before checkpoints existed) drops
//     the older side, which is what that version's retention was doing.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	if err := l.makeDir(); err != nil {
		return nil, err
	}
	bases, err := l.cleanDir()
	if err != nil {
		return nil, err
	}
	ckpt, hasCkpt, err := l.readLogStart()
	if err != nil {
		return nil, err
	}
	epochs, hasEpochs, err := l.readEpochs()
	if err != nil {
		return nil, err
	}
	if err := l.recoverSegments(bases, ckpt, hasCkpt); err != nil {
		l.closeAll()
		return nil, err
	}
	if len(l.segs) == 0 {
		l.start, l.end = ckpt, ckpt
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
	if !hasCkpt {
		if err := l.setStart(l.start); err != nil {
			l.closeAll()
			return nil, fmt.Errorf("wal: open %s: %w", dir, err)
		}
	}
	if err := l.recoverEpochs(epochs, hasEpochs); err != nil {
		l.closeAll()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	l.log.Debug().Int64("start", int64(l.StartOffset())).Int64("end", int64(l.end)).Int("segments", len(l.segs)).Msg("wal: opened")
	return l, nil
}

// makeDir creates the log directory, durably: every directory created is
// named durably in its parent. When the directory exists its parent is synced
// anyway, in case an earlier Open crashed between creating it and syncing.
func (l *Log) makeDir() error {
	_, err := l.fs.Stat(l.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = vfs.MkdirAllDurable(l.fs, l.dir)
	case err == nil:
		err = l.fs.SyncDir(filepath.Dir(l.dir))
	}
	if err != nil {
		return fmt.Errorf("wal: open %s: %w", l.dir, err)
	}
	return nil
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
			if n == logStartName || n == epochsName {
				continue
			}
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

// recoverSegments opens and checks each segment in order, resolving gaps as
// the file comment says, and sets start and end.
func (l *Log) recoverSegments(bases []Offset, ckpt Offset, hasCkpt bool) error {
	if hasCkpt {
		var err error
		if bases, err = l.dropBelowStart(bases, ckpt); err != nil {
			return err
		}
	}
	trusted := false // the previous segment's index files were valid
	for i, base := range bases {
		if len(l.segs) > 0 && base != l.end {
			switch {
			case !trusted:
				l.log.Warn().Int64("segment", int64(base)).Int64("expected", int64(l.end)).
					Msg("wal: segment does not continue an incompletely synced one; removing it and all later segments")
				if err := l.removeSegmentFiles(bases[i:]); err != nil {
					return err
				}
				return l.recoveredBounds(true, ckpt, hasCkpt)
			case hasCkpt:
				return fmt.Errorf("wal: open %s: segment %d follows a complete segment ending at %d, above the log start %d: offsets [%d, %d) are missing: %w",
					l.dir, base, l.end, ckpt, l.end, base, ErrCorrupt)
			}
			l.log.Warn().Int64("segment", int64(base)).Int64("expected", int64(l.end)).
				Msg("wal: gap in a log without a start checkpoint; removing the older segments (interrupted deletion)")
			if err := l.dropRecovered(); err != nil {
				return err
			}
		}
		seg, intact, err := l.recoverSegment(base, i == len(bases)-1)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, seg)
		l.end = seg.idx.next
		trusted = seg.sealed && !slices.Contains(l.unsynced, seg)
		if !intact && i < len(bases)-1 {
			l.log.Warn().Int64("segment", int64(base)).Msg("wal: sealed segment was torn; removing all later segments")
			if err := l.removeSegmentFiles(bases[i+1:]); err != nil {
				return err
			}
			break
		}
	}
	return l.recoveredBounds(len(bases) > 0, ckpt, hasCkpt)
}

// recoveredBounds sets start from the recovered segments and the checkpoint,
// and checks that they agree.
func (l *Log) recoveredBounds(hadSegments bool, ckpt Offset, hasCkpt bool) error {
	switch {
	case hadSegments && len(l.segs) == 0:
		return fmt.Errorf("wal: no segment recovered in %s", l.dir)
	case !hadSegments && hasCkpt && ckpt > 0:
		return fmt.Errorf("wal: open %s: no segment, but the log start is %d: %w", l.dir, ckpt, ErrCorrupt)
	case !hadSegments:
		return nil
	case hasCkpt && l.end < ckpt:
		return fmt.Errorf("wal: open %s: log ends at %d, below its start %d: %w", l.dir, l.end, ckpt, ErrCorrupt)
	case hasCkpt:
		l.start = ckpt
	default:
		l.start = l.segs[0].base()
	}
	return nil
}

// dropBelowStart removes the segments wholly below the checkpointed start
// (those followed by a segment based at or below it) and returns the rest,
// which must begin at or below start.
func (l *Log) dropBelowStart(bases []Offset, start Offset) ([]Offset, error) {
	k := 0
	for k+1 < len(bases) && bases[k+1] <= start {
		k++
	}
	if k > 0 {
		l.log.Info().Int("segments", k).Int64("start", int64(start)).
			Msg("wal: removing segments below the log start left by an interrupted deletion")
		if err := l.removeSegmentFiles(bases[:k]); err != nil {
			return nil, err
		}
		bases = bases[k:]
	}
	if len(bases) > 0 && bases[0] > start {
		return nil, fmt.Errorf("wal: open %s: log start is %d but the first segment is %d: offsets [%d, %d) are missing: %w",
			l.dir, start, bases[0], start, bases[0], ErrCorrupt)
	}
	return bases, nil
}

// dropRecovered closes and removes the segments recovered so far.
func (l *Log) dropRecovered() error {
	bases := make([]Offset, 0, len(l.segs))
	for _, s := range l.segs {
		bases = append(bases, s.base())
		_ = s.close() // its files are being removed; nothing was written to it
	}
	l.segs, l.unsynced = nil, nil
	return l.removeSegmentFiles(bases)
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
