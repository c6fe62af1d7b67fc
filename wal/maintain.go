package wal

// maintain.go owns the operations that remove data: Maintain, the removal
// of whole segments below the log start (removeDead, which DeleteBelow in
// segments.go shares) and Truncate. All run under wmu, as the appender. The
// log decides no deletion: which segments go is decided by tier's retention
// state machine, which reads Segments and calls DeleteBelow, or by
// DeleteRecords, which calls AdvanceStart. Maintain only rolls by age and
// finishes removals those started.
//
// Invariant: a deletion removes whole sealed segments, oldest first, and
// never the active one, so the end offset survives a restart: a roll that
// precedes a deletion is made durable before the deletion starts.
// Invariant: a deletion checkpoints the new log start (logstart.go) before it
// removes a segment, and stops at the first segment it fails to remove, so
// the segments on disk are always a contiguous run that holds the log start
// (recover.go removes the leftovers below it).
// Invariant: Maintain never moves the log start; it removes only sealed
// segments already wholly below it.
// Invariant: Truncate is durable when it returns, and lowers DurableEnd to
// the truncation point before any byte is removed; no journal note for an
// append made before it raises DurableEnd afterwards (Log.durGen).
// Invariant: Truncate removes the leader-epoch entries at or above the
// truncation point after the segments' truncation is durable (epochs.go). It removes later segments only after the removal of
// the kept segment's index files is durable, so a crash never leaves a gap
// after a segment that recovery would trust.

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Maintain rolls a non-empty active segment older than SegmentAge, then
// removes the sealed segments wholly below the log start: those AdvanceStart
// left, and those a DeleteBelow or an earlier Maintain failed to remove. It
// decides no deletion of its own. It returns how many segments it removed.
// A segment it fails to remove stays (unreadable, below the start) for the
// next call; the error is returned but is not sticky.
func (l *Log) Maintain() (deleted int, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	active := l.segs[len(l.segs)-1]
	if active.idx.size > 0 && l.cfg.Now().Sub(active.created) >= l.cfg.SegmentAge {
		if err := l.roll(); err != nil {
			return 0, err
		}
	}
	return l.deleteBelow(0)
}

// deleteBelow removes the sealed segments whose offsets are all below off
// (0: none) and those already wholly below the log start, oldest first,
// never the active one. The log start becomes the base of the first segment
// kept if that is higher. The caller holds wmu and has checked usable.
func (l *Log) deleteBelow(off Offset) (int, error) {
	n := 0
	for n < len(l.segs)-1 && (l.segs[n].idx.next <= l.start || l.segs[n].idx.next <= off) {
		n++
	}
	if n == 0 {
		return 0, nil
	}
	// Make the sealed segments, their indexes and the newest segment's name
	// durable first, so a crash mid-deletion cannot lose the end offset and
	// the checkpoint never exceeds the durable end.
	if _, err := l.sync(true); err != nil {
		return 0, err
	}
	if start := l.segs[n].base(); start > l.start {
		if err := l.setStart(start); err != nil {
			return 0, err
		}
	}
	return l.removeDead()
}

// removeDead removes the sealed segments wholly below the log start, oldest
// first, stopping at the first failure, and makes the removals durable. A
// segment leaves segs only once its files are gone. The caller holds wmu and
// has checkpointed the start.
func (l *Log) removeDead() (int, error) {
	removed := 0
	var rerr error
	for len(l.segs) > 1 && l.segs[0].idx.next <= l.start {
		s := l.segs[0]
		if err := l.removeFiles(s); err != nil {
			l.log.Warn().Err(err).Int64("segment", int64(s.base())).Msg("wal: deletion stopped at a segment it could not remove; retrying at the next DeleteBelow or Maintain")
			rerr = err
			break
		}
		l.mu.Lock()
		l.segs = append([]*segment(nil), l.segs[1:]...)
		s.drop()
		l.mu.Unlock()
		removed++
		l.log.Info().Int64("segment", int64(s.base())).Int64("next", int64(s.idx.next)).
			Int64("bytes", s.idx.size).Msg("wal: deleted segment")
	}
	if removed > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return removed, errors.Join(rerr, l.fail(fmt.Errorf("wal: fsync dir %s: %w", l.dir, err)))
		}
	}
	return removed, rerr
}

// removeFiles removes a segment's files, the .log last: an index without its
// .log is a stray that Open removes, while a .log without its index is only
// rescanned.
func (l *Log) removeFiles(s *segment) error {
	var errs []error
	for _, suffix := range []string{indexSuffix, timeIndexSuffix, logSuffix} {
		err := l.fs.Remove(filepath.Join(l.dir, segmentName(s.base(), suffix)))
		if err != nil && !errorsIsNotExist(err) {
			errs = append(errs, fmt.Errorf("wal: remove segment %d: %w", s.base(), err))
		}
	}
	return errors.Join(errs...)
}

// Truncate removes every batch at and above to, which must be a batch
// boundary in [StartOffset, EndOffset], and the leader-epoch entries that
// start there or later. It is durable when it returns.
func (l *Log) Truncate(to Offset) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if to < l.start || to > l.end {
		return fmt.Errorf("wal: truncate to %d, log has [%d, %d]: %w", to, l.start, l.end, ErrOffsetOutOfRange)
	}
	if to == l.end {
		return nil
	}
	// Hold the sync baton: no fsync round may run while bytes disappear.
	l.smu.Lock()
	for l.syncing {
		l.scond.Wait()
	}
	l.syncing, l.syncEnd = true, -1 // callers arriving now wait for a round after it
	l.smu.Unlock()
	err := l.truncate(to)
	if err == nil {
		// After the segments: see epochs.go for why.
		err = l.truncateEpochs(to)
	}
	if err == nil && l.jnl != nil {
		// After the segments: see replay (journal_log.go) for why.
		err = l.journalTruncate(to)
	}
	l.smu.Lock()
	l.syncing = false
	if l.durable > to {
		l.durable = to
	}
	if err == nil {
		l.segSynced = to // Truncate fsyncs what it keeps
	} else if l.segSynced > to {
		l.segSynced = -1 // unknown: the next checkpoint syncs
	}
	l.scond.Broadcast()
	l.smu.Unlock()
	return err
}

// truncate does Truncate's work while holding wmu and the sync baton.
func (l *Log) truncate(to Offset) error {
	k := l.segmentFor(to)
	keep := l.segs[k]
	pos := int64(0)
	if to > keep.base() {
		v := view{seg: keep, base: keep.base(), next: keep.idx.next, size: keep.idx.size, offsets: keep.idx.offsets}
		p, err := locate(v, to)
		if err != nil {
			return err
		}
		h, err := readHeader(keep.file, p, v.size)
		if err != nil {
			return fmt.Errorf("wal: truncate to %d: %w", to, err)
		}
		if h.BaseOffset != to {
			return fmt.Errorf("wal: truncate to %d: inside batch [%d, %d]: %w", to, h.BaseOffset, h.LastOffset(), ErrNotBatchBoundary)
		}
		pos = p
	} else if k > 0 {
		k--
		keep = l.segs[k]
		pos = keep.idx.size
	}
	// Rebuild the kept segment's index from the bytes that stay, before
	// touching the file.
	res, err := scanSegment(keep.file, keep.base(), pos, l.cfg.IndexIntervalBytes)
	if err != nil {
		return l.fail(err)
	}
	if res.stop != nil || res.idx.next != to {
		return l.fail(fmt.Errorf("wal: segment %d rescans to %d before truncation to %d: %w", keep.base(), res.idx.next, to,
			errors.Join(res.stop, ErrCorrupt)))
	}
	// From here bytes disappear. The durable end drops to the truncation
	// point now, and journal notes for appends made before it are stale
	// (journalDurable ignores them): a round in flight must not report as
	// durable the offsets that new appends will reuse.
	l.smu.Lock()
	l.durGen++
	l.durable = min(l.durable, to)
	l.smu.Unlock()
	// The file shrinks under mu, with truncGen bumped, so a reader either
	// snapshots the new state or retries its read (read.go).
	l.mu.Lock()
	if err := keep.file.Truncate(pos); err != nil {
		l.mu.Unlock()
		return l.fail(fmt.Errorf("wal: truncate segment %d at byte %d: %w", keep.base(), pos, err))
	}
	victims := append([]*segment(nil), l.segs[k+1:]...)
	l.segs = l.segs[:k+1]
	for _, s := range victims {
		s.drop()
	}
	keep.idx, keep.sealed, keep.created = res.idx, false, l.cfg.Now()
	kept := l.unsynced[:0]
	for _, s := range l.unsynced {
		if s.base() < keep.base() {
			kept = append(kept, s)
		}
	}
	l.unsynced = kept
	l.end = to
	l.truncGen++
	l.mu.Unlock()
	return l.finishTruncate(keep, victims)
}

// finishTruncate makes a truncation durable: the file, the removal of the
// kept segment's index files (durable before any later segment goes, see the
// file comment), then the removal of later segments.
func (l *Log) finishTruncate(keep *segment, victims []*segment) error {
	if err := keep.file.Sync(); err != nil {
		return l.fail(fmt.Errorf("wal: fsync segment %d: %w", keep.base(), err))
	}
	for _, s := range append([]*segment{keep}, victims...) {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			err := l.fs.Remove(filepath.Join(l.dir, segmentName(s.base(), suffix)))
			if err != nil && !errorsIsNotExist(err) {
				return l.fail(fmt.Errorf("wal: truncate: remove index of segment %d: %w", s.base(), err))
			}
		}
	}
	if len(victims) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("wal: fsync dir %s: %w", l.dir, err))
		}
	}
	for _, s := range victims {
		if err := l.fs.Remove(s.path); err != nil && !errorsIsNotExist(err) {
			return l.fail(fmt.Errorf("wal: truncate: remove segment %d: %w", s.base(), err))
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("wal: fsync dir %s: %w", l.dir, err))
	}
	l.log.Debug().Int64("to", int64(keep.idx.next)).Int("segments_removed", len(victims)).Msg("wal: truncated") // the caller logs it at info
	return nil
}
