package wal

// journal_log.go owns a Log's side of the journal: opening with replay,
// journaling appends and truncations, and learning of durability from the
// journal's rounds instead of its own fsyncs.
//
// Invariant: a journaled Log's durable end only covers batches whose journal
// records are fsynced (journalDurable), or that its segments hold after an
// fsync of their own (sync, at checkpoints, deletions and Close). A note for
// records submitted before a truncation never raises it (durGen).
// Invariant: replay never journals again; the records it applies stay in the
// journal until a checkpoint has fsynced this Log.
// jnl and jkey are set before OpenJournaled returns and never change; jbuf
// is guarded by wmu; jlsn and hook are atomics read by any goroutine.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// OpenJournaled opens the log in dir as Open does, replays the journal's
// records for key above what its segments hold, and journals every later
// append and truncation: its appends become durable with the journal's
// group commits (Sync waits for one) rather than with fsyncs of its own.
// key names the log in the journal (at most 255 bytes, unique per journal).
// Open every journaled log before calling Journal.Start.
func OpenJournaled(fs vfs.FS, dir string, cfg Config, j *Journal, key string, log zerolog.Logger) (*Log, error) {
	if key == "" || len(key) > maxJournalKey {
		return nil, fmt.Errorf("wal: journal key of %d bytes, want 1 to %d: %w", len(key), maxJournalKey, ErrInvalidConfig)
	}
	l, err := Open(fs, dir, cfg, log)
	if err != nil {
		return nil, err
	}
	refs, files := j.register(l, key)
	if err := l.replay(j, files, refs); err != nil {
		j.unregister(l)
		_ = l.closeFiles() // the replay error is the one to report
		return nil, fmt.Errorf("wal: replay journal into %s: %w", dir, err)
	}
	l.jnl, l.jkey = j, key
	return l, nil
}

// replay applies the recovered records of this log in journal order.
//
// Truncate journals its record only once the segments are truncated
// durably, so a truncation record never needs redoing: it only marks the
// appends before it that it removed as dead, to be skipped whatever the
// segments hold at their offsets now (later appends, or nothing). A crash
// before the record is durable leaves the truncation undone, as if Truncate
// had not been called (it had not returned): its appends are replayed
// again. That is safe for the one caller, a follower cutting a divergent
// tail, which checks for divergence again after every restart.
func (l *Log) replay(j *Journal, files []journalFile, refs []recordRef) error {
	dead := make([]bool, len(refs))
	cut := Offset(1<<63 - 1)
	for i := len(refs) - 1; i >= 0; i-- {
		switch r := refs[i]; {
		case r.kind == recTruncate:
			dead[i] = true
			cut = min(cut, r.base)
		case r.base >= cut:
			dead[i] = true
		}
	}
	applied, skipped := 0, 0
	for i, ref := range refs {
		if dead[i] {
			skipped++
			continue
		}
		b, err := j.readRecord(files, ref)
		if err != nil {
			return err
		}
		rec, _, err := decodeRecord(b, ref.lsn)
		if err != nil {
			return errors.Join(err, ErrCorrupt)
		}
		end := l.EndOffset()
		switch {
		case rec.last < end:
			skipped++ // the segments kept it
		case rec.base == end:
			if _, _, err := l.AppendStamped(rec.payload); err != nil {
				return fmt.Errorf("batch [%d, %d]: %w", rec.base, rec.last, err)
			}
			applied++
		default:
			return fmt.Errorf("batch [%d, %d] does not continue the log at %d: %w", rec.base, rec.last, end, ErrCorrupt)
		}
	}
	if applied > 0 {
		if _, err := l.sync(true); err != nil {
			return err
		}
		l.log.Info().Int("applied", applied).Int("skipped", skipped).Int64("end", int64(l.EndOffset())).
			Msg("wal: replayed journal records")
	}
	return nil
}

// SetDurableHook sets fn to be called, on the journal's goroutine, each time
// the durable end of a journaled log rises or the log fails. fn must not
// block; a partition owner uses it to wake up. Set it before appending.
func (l *Log) SetDurableHook(fn func()) { l.hook.Store(&fn) }

// Failed returns the log's sticky failure, or nil.
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

// Journaled reports whether the log's appends go through a journal.
func (l *Log) Journaled() bool { return l.jnl != nil }

// journalDurable is the journal telling the log that its records up to end
// are fsynced, or that they never will be. A note submitted before a
// truncation (gen older than durGen) is ignored: its end may count offsets
// that were removed and that new, unsynced appends now reuse.
func (l *Log) journalDurable(end Offset, gen uint64, err error) {
	if err != nil {
		_ = l.fail(fmt.Errorf("wal: journal: %w", err))
	} else {
		l.smu.Lock()
		if gen == l.durGen && end > l.durable {
			l.durable = end
		}
		l.smu.Unlock()
	}
	if fn := l.hook.Load(); fn != nil {
		(*fn)()
	}
}

// writebackChunk is how many bytes a journaled log's active segment gathers
// before it asks the kernel to start writing them back. The journal carries
// durability, so the segments are fsynced only at checkpoints; without this,
// a checkpoint's fsyncs would find the whole interval's bytes dirty and
// write them in one burst that journal fsyncs queue behind.
const writebackChunk = 1 << 20

// startWriteback starts writeback of the active segment's bytes written
// since the last call, once there are writebackChunk of them. The caller
// holds wmu.
func (l *Log) startWriteback(s *segment) {
	if n := s.idx.size - s.wbPos; n >= writebackChunk {
		if err := vfs.StartWriteback(s.file, s.wbPos, n); err != nil {
			l.log.Debug().Err(err).Msg("wal: start writeback")
		}
		s.wbPos = s.idx.size
	}
}

// journalBatches submits the batches just written (stamped) to the journal.
// The caller holds wmu; end is the log end after them.
func (l *Log) journalBatches(batches [][]byte, end Offset) error {
	l.startWriteback(l.segs[len(l.segs)-1])
	l.jbuf = l.jbuf[:0]
	for _, b := range batches {
		l.jbuf = appendRecordHeader(l.jbuf, recAppend, l.jkey, b)
	}
	// durGen is written under wmu too, which the caller holds.
	lsn, err := l.jnl.submitBatches(l.jbuf, len(l.jkey), batches, journalNote{log: l, end: end, gen: l.durGen})
	if err != nil {
		return l.fail(fmt.Errorf("wal: journal: %w", err))
	}
	l.jlsn.Store(lsn)
	return nil
}

// journalTruncate records a truncation and waits until it is durable, so a
// replay never resurrects the removed batches. The caller holds wmu.
func (l *Log) journalTruncate(to Offset) error {
	rec := appendRecord(nil, recTruncate, l.jkey, binary.BigEndian.AppendUint64(nil, uint64(to)))
	lsn, err := l.jnl.submit(rec, journalNote{})
	if err == nil {
		err = l.jnl.waitDurable(lsn)
	}
	if err != nil {
		return l.fail(fmt.Errorf("wal: journal truncation to %d: %w", to, err))
	}
	l.jlsn.Store(lsn)
	return nil
}

// syncJournaled waits until the journal has fsynced everything this log
// submitted.
func (l *Log) syncJournaled() (Offset, error) {
	if err := l.state(); err != nil {
		return l.DurableEnd(), err
	}
	if err := l.jnl.waitDurable(l.jlsn.Load()); err != nil {
		return l.DurableEnd(), l.fail(fmt.Errorf("wal: journal: %w", err))
	}
	return l.DurableEnd(), l.state()
}
