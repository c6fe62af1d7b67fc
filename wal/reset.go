package wal

// reset.go owns TruncateFullyAndStartAt (Kafka's name): a follower replica
// whose log ends below its leader's log start drops every record it holds
// and its leader-epoch chain, and continues at an offset of the leader's
// choosing. Nothing it held can be fetched from the leader any more, so
// there is nothing to keep: the leader deleted those records (DeleteRecords,
// retention) and the follower copies them no more.
//
// Invariant: every step leaves a log that opens: first the start moves to
// the end and the sealed segments go (AdvanceStart and Maintain's steps),
// then the epoch chain is emptied, then RestartAt moves the empty log to the
// new offset. A crash between steps recovers an empty log at the old end or
// at the new offset, never a gap.

import "fmt"

// TruncateFullyAndStartAt removes every record and leader-epoch entry and
// makes the empty log start and end at off, which must be at or above
// EndOffset; last, when its Epoch >= 0, is the epoch entry in force at
// off-1, as RestartAt takes it (a replica restarted at the remote end knows
// it; one restarted at its leader's log start does not). The fenced epoch
// is kept. It is durable when it returns. It runs as the appender.
//
// Unlike a Truncate to the log start followed by RestartAt, it works on a
// log whose start lies inside its first segment (AdvanceStart, a follower
// that adopted its leader's log start): the bytes below the start go too.
func (l *Log) TruncateFullyAndStartAt(off Offset, last EpochEntry) error {
	if err := l.dropAll(off); err != nil {
		return err
	}
	return l.RestartAt(off, last)
}

// dropAll empties the log at its end and clears its epoch chain.
func (l *Log) dropAll(off Offset) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if off < l.end {
		return fmt.Errorf("wal: truncate fully and start at %d below the end %d: %w", off, l.end, ErrOffsetOutOfRange)
	}
	if active := l.segs[len(l.segs)-1]; active.idx.size > 0 {
		if err := l.roll(); err != nil {
			return err
		}
	}
	// The checkpoint must never name an offset a crash could take back.
	if _, err := l.sync(true); err != nil {
		return err
	}
	if l.end > l.start {
		if err := l.setStart(l.end); err != nil {
			return err
		}
	}
	if _, err := l.removeDead(); err != nil {
		return err
	}
	if n := l.Size(); n > 0 {
		return fmt.Errorf("wal: truncate fully: %d bytes left below the start %d: %w", n, l.start, ErrInvalidConfig)
	}
	if len(l.epochs) > 0 {
		if err := l.writeEpochs(epochState{fenced: l.fenced}); err != nil {
			return l.fail(fmt.Errorf("wal: truncate fully: clear the leader epochs: %w", err))
		}
		l.mu.Lock()
		l.epochs = nil
		l.mu.Unlock()
	}
	l.log.Info().Int64("end", int64(l.end)).Int64("restart_at", int64(off)).Msg("wal: log truncated fully")
	return nil
}
