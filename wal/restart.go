package wal

// restart.go owns RestartAt: an empty log moving its start and end forward
// to an offset below which the partition's records are elsewhere (in object
// storage), as when a broker's local log was lost or a replica is new. The
// log then appends from there.
//
// Invariant: RestartAt changes only an empty log (no record bytes in any
// segment), so no record is lost by it. It creates the new active segment
// and checkpoints the new start before it removes the old empty segments,
// so a crash at any point recovers either the old empty log or the new one
// (recover.go removes segments wholly below the checkpointed start).

import (
	"fmt"
)

// RestartAt makes an empty log start and end at off (>= EndOffset). last,
// when its Epoch >= 0, is the leader-epoch entry in force at off-1 (the
// remote log's last one): it joins the chain, starting no later than off-1,
// so the epoch of the log's last offset stays known (a follower's fetch
// names it; replica/epochs.go). It is durable when it returns. It runs as
// the appender.
func (l *Log) RestartAt(off Offset, last EpochEntry) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if l.Size() > 0 {
		return fmt.Errorf("wal: restart at %d: the log holds %d bytes: %w", off, l.Size(), ErrInvalidConfig)
	}
	if off < l.end {
		return fmt.Errorf("wal: restart at %d below the end %d: %w", off, l.end, ErrOffsetOutOfRange)
	}
	if off == l.end {
		return nil
	}
	seg, err := l.createSegment(off)
	if err != nil {
		return l.fail(err)
	}
	if err := seg.file.Sync(); err != nil {
		return l.fail(fmt.Errorf("wal: restart at %d: fsync segment: %w", off, err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("wal: restart at %d: fsync dir %s: %w", off, l.dir, err))
	}
	l.smu.Lock()
	for l.syncing {
		l.scond.Wait()
	}
	l.durGen++
	l.durable, l.segSynced = off, off
	l.smu.Unlock()
	l.mu.Lock()
	old := l.segs[len(l.segs)-1]
	old.sealed = true
	l.segs = append(l.segs, seg)
	l.end = off
	l.truncGen++
	l.mu.Unlock()
	if err := l.setStart(off); err != nil {
		return err
	}
	if n := len(l.epochs); last.Epoch >= 0 && off > 0 && (n == 0 || l.epochs[n-1].Epoch < last.Epoch) {
		if err := l.assignEpoch(last.Epoch, min(last.StartOffset, off-1), false); err != nil {
			return err
		}
	}
	if _, err := l.removeDead(); err != nil {
		return err
	}
	l.log.Info().Int64("start", int64(off)).Msg("wal: empty log restarted")
	return nil
}
