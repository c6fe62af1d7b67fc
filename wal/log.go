package wal

// log.go owns the Log: its segment list, end offset, sticky failure and the
// append path (validate, stamp, roll, write, index).
//
// Locks, in the order they may be taken:
//   - wmu serialises the appender's operations: Append, AppendStamped,
//     AppendGroup, Truncate, Maintain, AdvanceStart, SetFencedEpoch,
//     SetConfig, Close, Delete. Fields written only by a
//     wmu holder may be read by a wmu holder without mu.
//   - smu guards the group-commit state (sync.go): syncing, durable.
//   - mu guards the segment list and everything readers look at: segs, start,
//     end, cfg, failed, closed, truncGen, unsynced, dirDirty and the active
//     segment's index. The appender holds it across disk I/O only to shrink
//     a file in Truncate.
//
// Invariant: segs is non-empty while the Log is open; segs[i+1].base ==
// segs[i].idx.next; end == segs[len-1].idx.next; only segs[len-1] is active
// (unsealed).
// Invariant: segs[0].base <= start <= end. Sealed segments wholly below start
// (idx.next <= start) are dead: unreadable, and removed by Maintain; they
// stay in segs only while their files are on disk.
// Invariant: once failed is set it stays set until the Log is reopened.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// Log is the local log of one partition. See the package doc.
type Log struct {
	fs  vfs.FS
	dir string
	log zerolog.Logger

	wmu sync.Mutex

	smu       sync.Mutex
	scond     *sync.Cond
	syncing   bool   // guarded by smu: a sync (or truncation) holds the baton
	syncEnd   Offset // guarded by smu: end offset the running sync covers
	syncStart uint64 // guarded by smu: number of syncs started
	syncDone  uint64 // guarded by smu: number of syncs finished
	durable   Offset // guarded by smu
	durGen    uint64 // guarded by smu; written under wmu too: bumped when Truncate removes bytes, so older journal notes are ignored
	segSynced Offset // guarded by smu: end offset the last fsync of the segments covered

	mu       sync.RWMutex
	cfg      Config       // guarded by mu; written under wmu too
	segs     []*segment   // guarded by mu; written under wmu too
	start    Offset       // guarded by mu; written under wmu too: the log start offset (logstart.go)
	end      Offset       // guarded by mu; written under wmu too
	failed   error        // guarded by mu
	closed   bool         // guarded by mu; written under wmu too
	truncGen uint64       // guarded by mu: bumped when bytes are removed from the tail
	unsynced []*segment   // guarded by mu: sealed since the last sync
	dirDirty bool         // guarded by mu: names created or removed since the last sync
	epochs   []EpochEntry // guarded by mu; written under wmu too: the leader-epoch chain (epochs.go), replaced whole
	fenced   Epoch        // guarded by mu; written under wmu too: the fenced epoch (epochs.go)

	// The journal, when the log was opened with OpenJournaled (journal_log.go).
	jnl    *Journal
	jkey   string
	jbuf   []byte                 // guarded by wmu: records being submitted
	gather []byte                 // guarded by wmu: AppendGroup's write buffer, kept between groups
	jlsn   atomic.Int64           // LSN after the log's last journal record
	hook   atomic.Pointer[func()] // called when the durable end rises or the log fails
}

// StartOffset is the first offset still in the log (Kafka's LogStartOffset).
func (l *Log) StartOffset() Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// EndOffset is the offset the next appended record will get (the log end offset).
func (l *Log) EndOffset() Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// DurableEnd is the end offset covered by the last successful fsync.
func (l *Log) DurableEnd() Offset {
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.durable
}

// Size is the total size in bytes of the segments' .log files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.idx.size
	}
	return n
}

// Append validates batch (one whole v2 record batch), stamps its base offset
// (EndOffset) and partition leader epoch into the caller's slice, and appends
// it, rolling the active segment first if it is too big or too old. The batch
// is not durable until Sync. An epoch above LastEpoch is recorded durably in
// the leader-epoch chain first; one below it is ErrStaleEpoch, one below
// FencedEpoch ErrFencedEpoch. Only one goroutine may append.
func (l *Log) Append(batch []byte, epoch Epoch) (base, last Offset, err error) {
	return l.append(batch, true, epoch)
}

// AppendStamped appends a batch that already carries its base offset (which
// must equal EndOffset) and leader epoch, as a follower copying its leader
// does. Its epoch goes into the leader-epoch chain as with Append, but the
// fenced epoch is not checked: a follower copies older epochs' batches.
func (l *Log) AppendStamped(batch []byte) (base, last Offset, err error) {
	return l.append(batch, false, 0)
}

func (l *Log) append(batch []byte, stamp bool, epoch Epoch) (Offset, Offset, error) {
	h, err := validateBatch(batch)
	if err != nil {
		return 0, 0, err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, 0, err
	}
	if stamp {
		h.BaseOffset, h.LeaderEpoch = l.end, epoch
	} else if h.BaseOffset != l.end {
		return 0, 0, fmt.Errorf("wal: stamped batch base offset %d, log end %d: %w", h.BaseOffset, l.end, ErrInvalidBatch)
	}
	// Durable before the batch is written (epochs.go).
	if err := l.assignEpoch(h.LeaderEpoch, h.BaseOffset, stamp); err != nil {
		return 0, 0, err
	}
	if stamp {
		stampBatch(batch, l.end, epoch)
	}
	active := l.segs[len(l.segs)-1]
	if l.needsRoll(active, active.idx.size, h, len(batch)) {
		if err := l.roll(); err != nil {
			return 0, 0, err
		}
		active = l.segs[len(l.segs)-1]
	}
	if _, err := active.file.Write(batch); err != nil {
		return 0, 0, l.fail(fmt.Errorf("wal: append at offset %d to segment %d: %w", h.BaseOffset, active.base(), err))
	}
	l.mu.Lock()
	active.idx.add(h, len(batch), l.cfg.IndexIntervalBytes)
	l.end = active.idx.next
	end := l.end
	l.mu.Unlock()
	if l.jnl != nil {
		if err := l.journalBatches([][]byte{batch}, end); err != nil {
			return 0, 0, err
		}
	}
	return h.BaseOffset, h.LastOffset(), nil
}

// usable reports why the appender may not write. The caller holds wmu.
func (l *Log) usable() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// fail records err as the sticky failure (keeping the first) and returns it.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = err
		l.log.Error().Err(err).Msg("wal: log failed; appends and syncs refused until reopened")
	}
	return l.failed
}

// needsRoll reports whether a batch of n bytes with header h must go into a
// new segment, when the active segment holds size bytes (written or about
// to be). The caller holds wmu.
func (l *Log) needsRoll(active *segment, size int64, h BatchHeader, n int) bool {
	x := &active.idx
	if size == 0 {
		return false
	}
	return size+int64(n) > l.cfg.SegmentBytes ||
		size+int64(n) > MaxSegmentBytes ||
		h.LastOffset()-x.base > maxRelativeOffset ||
		l.cfg.Now().Sub(active.created) >= l.cfg.SegmentAge
}

// roll seals the active segment and starts a new one at the end offset. The
// sealed segment's index files are written by the next sync. The caller holds wmu.
func (l *Log) roll() error {
	seg, err := l.createSegment(l.end)
	if err != nil {
		return l.fail(err)
	}
	l.mu.Lock()
	old := l.segs[len(l.segs)-1]
	old.sealed = true
	l.unsynced = append(l.unsynced, old)
	l.segs = append(l.segs, seg)
	l.dirDirty = true
	l.mu.Unlock()
	l.log.Debug().Int64("base", int64(seg.base())).Int64("sealed", int64(old.base())).Msg("wal: rolled segment")
	return nil
}

// createSegment creates an empty .log file for a segment at base.
func (l *Log) createSegment(base Offset) (*segment, error) {
	path := filepath.Join(l.dir, segmentName(base, logSuffix))
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: create segment %d: %w", base, err)
	}
	return &segment{file: f, path: path, created: l.cfg.Now(), idx: newSegIndex(base)}, nil
}

// SetConfig changes the tunables; they apply from the next append or Maintain.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.cfg = cfg.WithDefaults()
	return nil
}

// Close syncs what was appended (unless the log has failed) and closes the
// files. Reads in progress finish first; later calls return ErrClosed.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.isClosed() {
		return nil
	}
	var err error
	if l.usable() == nil {
		_, err = l.sync(true)
	}
	if l.jnl != nil {
		// Synced, so the journal's records of it are no longer needed.
		l.jnl.unregister(l)
	}
	return errors.Join(err, l.closeFiles())
}

func (l *Log) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

// closeFiles marks the log closed and drops every segment. The caller holds wmu.
func (l *Log) closeFiles() error {
	l.smu.Lock()
	for l.syncing {
		l.scond.Wait()
	}
	l.mu.Lock()
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.unsynced = nil
	l.mu.Unlock()
	l.scond.Broadcast()
	l.smu.Unlock()
	var errs []error
	for _, s := range segs {
		s.drop()
		if s.refs.Load() == 0 {
			if err := s.close(); err != nil {
				errs = append(errs, fmt.Errorf("wal: close segment %d: %w", s.base(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// TrashDirName is the directory, next to a log's directory, that Delete
// moves the log into before removing it.
const TrashDirName = ".trash"

// Delete is DeleteTo with the trash directory TrashDirName next to the log's
// directory.
func (l *Log) Delete() error {
	return l.DeleteTo(filepath.Join(filepath.Dir(l.dir), TrashDirName))
}

// DeleteTo closes the log without syncing and removes its directory durably
// (vfs.RemoveAllDurable): the directory is renamed into trashDir, which must be
// on the same file system, before anything in it is removed, so a crash
// leaves the log whole or gone, never a log with segments missing. Whatever
// a crash leaves in trashDir is for vfs.EmptyTrash.
func (l *Log) DeleteTo(trashDir string) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.isClosed() {
		if err := l.closeFiles(); err != nil {
			l.log.Warn().Err(err).Msg("wal: close before delete")
		}
	}
	if l.jnl != nil {
		l.jnl.unregister(l)
	}
	if err := vfs.RemoveAllDurable(l.fs, l.dir, trashDir); err != nil {
		return fmt.Errorf("wal: delete %s: %w", l.dir, err)
	}
	return nil
}
