package wal

// sync.go owns group commit: concurrent Sync callers coalesce on one fsync
// round, and a caller whose data the running round does not cover waits for
// the next one. One round fsyncs the segments sealed since the previous round
// (and writes their index files), then the active segment, then the directory
// if names changed.
//
// Invariant: durable only grows, except in Truncate, which holds the baton
// (syncing) so no round runs concurrently with it.
// Invariant: a failed round is sticky (Log.failed); durable never covers data
// a failed round was to sync.
// State is guarded by Log.smu, taken before Log.mu.

import (
	"fmt"
	"path/filepath"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// Sync makes everything appended so far durable and returns the durable end
// offset. Concurrent callers share fsyncs. After a failed write or fsync it
// returns that error until the Log is reopened.
func (l *Log) Sync() (durableEnd Offset, err error) {
	if l.jnl != nil {
		return l.syncJournaled()
	}
	return l.sync(false)
}

// syncSnapshot is what one round must make durable.
type syncSnapshot struct {
	sealed     []*segment
	active     *segment
	activeSize int64 // the active segment's bytes the round makes durable
	dirDirty   bool
	end        Offset
}

// sync runs or joins a round. With force it runs a round that starts after
// the call even when nothing new was appended (to make a roll or removal
// durable).
func (l *Log) sync(force bool) (Offset, error) {
	l.smu.Lock()
	defer l.smu.Unlock()
	if err := l.state(); err != nil {
		return l.durable, err
	}
	target := l.EndOffset()
	need := l.syncStart + 1
	if !force {
		if !l.syncing && l.durable >= target {
			return l.durable, nil
		}
		if l.syncing && l.syncEnd >= target {
			need = l.syncStart
		}
	}
	for {
		if err := l.state(); err != nil {
			return l.durable, err
		}
		if l.syncDone >= need {
			return l.durable, nil
		}
		if !l.syncing {
			break
		}
		l.scond.Wait()
	}
	snap := l.takeSyncSnapshot()
	l.syncing, l.syncEnd = true, snap.end
	l.syncStart++
	l.smu.Unlock()
	err := l.runSync(snap)
	l.smu.Lock()
	l.syncing = false
	l.syncDone++
	if err == nil {
		l.segSynced = snap.end
		if snap.end > l.durable {
			l.durable = snap.end
		}
	}
	l.scond.Broadcast()
	return l.durable, err
}

// syncSegments fsyncs the segments unless nothing was written, rolled or
// removed since they were last fsynced: a checkpoint calls it for every
// journaled log, most of them idle.
func (l *Log) syncSegments() error {
	l.smu.Lock()
	synced := l.segSynced
	l.smu.Unlock()
	l.mu.RLock()
	clean := l.end == synced && len(l.unsynced) == 0 && !l.dirDirty
	l.mu.RUnlock()
	if clean {
		return nil
	}
	_, err := l.sync(true)
	return err
}

// state reports ErrClosed or the sticky failure.
func (l *Log) state() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// takeSyncSnapshot claims the work of one round, taking references on its
// segments. The caller holds smu and the Log is open.
func (l *Log) takeSyncSnapshot() syncSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	snap := syncSnapshot{
		sealed:   l.unsynced,
		active:   l.segs[len(l.segs)-1],
		dirDirty: l.dirDirty,
		end:      l.end,
	}
	snap.activeSize = snap.active.idx.size
	l.unsynced, l.dirDirty = nil, false
	for _, s := range snap.sealed {
		s.acquire()
	}
	snap.active.acquire()
	return snap
}

// runSync performs one round without holding any lock; a failure is sticky.
func (l *Log) runSync(snap syncSnapshot) error {
	defer func() {
		for _, s := range snap.sealed {
			s.release()
		}
		snap.active.release()
	}()
	dirDirty := snap.dirDirty
	for _, s := range snap.sealed {
		if err := s.file.Sync(); err != nil {
			return l.fail(fmt.Errorf("wal: fsync segment %d: %w", s.base(), err))
		}
		if s.dropped.Load() {
			continue
		}
		if err := l.writeIndexFiles(s); err != nil {
			return l.fail(err)
		}
		dirDirty = true
	}
	if err := snap.active.file.Sync(); err != nil {
		return l.fail(fmt.Errorf("wal: fsync segment %d: %w", snap.active.base(), err))
	}
	if dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("wal: fsync dir %s: %w", l.dir, err))
		}
	}
	l.dropColdPages(snap)
	return nil
}

// writeIndexFiles writes a sealed segment's offset and time index files
// (each through a synced temporary file and a rename).
func (l *Log) writeIndexFiles(s *segment) error {
	for _, k := range []struct {
		kind   uint16
		suffix string
	}{{indexKindOffset, indexSuffix}, {indexKindTime, timeIndexSuffix}} {
		path := filepath.Join(l.dir, segmentName(s.base(), k.suffix))
		if err := vfs.WriteFile(l.fs, path, encodeIndex(&s.idx, k.kind)); err != nil {
			return fmt.Errorf("wal: write index of segment %d: %w", s.base(), err)
		}
	}
	return nil
}
