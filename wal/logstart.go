package wal

// logstart.go owns the log-start checkpoint: the file logstart in the log
// directory, which holds the log start offset (see doc.go for its bytes).
// DeleteBelow and AdvanceStart (Kafka's DeleteRecords) move the start forward
// through it, and recovery uses it to tell the leftovers of an interrupted
// deletion (segments wholly below it: removed) from lost data (a gap above
// it: the log refuses to open).
//
// Invariant: the checkpoint is written durably before StartOffset reports
// its value and before any segment wholly below it is removed.
// Invariant: the checkpoint never exceeds the durable end: it is written
// only after a sync covering it.
// Log.start is guarded by Log.mu and written under Log.wmu too.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-mq/sluice/wal/vfs"
)

const (
	logStartName    = "logstart"
	logStartMagic   = "SLLS"
	logStartVersion = 1
)

// encodeLogStart returns the checkpoint file's bytes for start (stamp.go).
func encodeLogStart(start Offset) []byte {
	return encodeStamp(logStartMagic, logStartVersion, int64(start))
}

// decodeLogStart parses a checkpoint file. Bad bytes are ErrCorrupt (the file
// is replaced by an atomic rename of a synced file, so a torn one is not a
// crash artefact); a newer version is ErrUnknownVersion.
func decodeLogStart(b []byte) (Offset, error) {
	start, err := decodeStamp(b, logStartMagic, logStartVersion, true, logStartName)
	return Offset(start), err
}

// readLogStart returns the checkpointed start, and false when there is no
// checkpoint (a new log, or one written before checkpoints existed).
func (l *Log) readLogStart() (Offset, bool, error) {
	b, err := vfs.ReadFile(l.fs, filepath.Join(l.dir, logStartName), 4096)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("wal: read %s: %w", logStartName, err)
	}
	start, err := decodeLogStart(b)
	if err != nil {
		return 0, false, fmt.Errorf("wal: open %s: %w", l.dir, err)
	}
	return start, true, nil
}

// setStart durably checkpoints start and then publishes it. A failed write
// is sticky. The caller holds wmu (or is Open) and has synced up to start.
func (l *Log) setStart(start Offset) error {
	if err := vfs.WriteFileDurable(l.fs, filepath.Join(l.dir, logStartName), encodeLogStart(start)); err != nil {
		return l.fail(fmt.Errorf("wal: checkpoint log start %d: %w", start, err))
	}
	l.mu.Lock()
	l.start = start
	// Entries wholly below the start go from memory; the file loses them
	// at its next rewrite, and Open trims them anyway (epochs.go).
	l.epochs = trimEpochs(l.epochs, start)
	l.mu.Unlock()
	return nil
}

// AdvanceStart moves the log start offset forward to to, as Kafka's
// DeleteRecords does: offsets below it become unreadable at once (Read
// returns ErrOffsetOutOfRange), StartOffset reports it, and it survives a
// restart (it is durable when AdvanceStart returns). Segments wholly below
// it are deleted by the next Maintain or DeleteBelow. to may be inside a batch; at or below
// StartOffset nothing changes; above EndOffset is ErrOffsetOutOfRange. At
// EndOffset the active segment is rolled first, so every old segment can go.
// It returns the new StartOffset. It runs as the appender.
func (l *Log) AdvanceStart(to Offset) (Offset, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	if to > l.end {
		return l.start, fmt.Errorf("wal: advance start to %d, log has [%d, %d]: %w", to, l.start, l.end, ErrOffsetOutOfRange)
	}
	if to <= l.start {
		return l.start, nil
	}
	if active := l.segs[len(l.segs)-1]; to == l.end && active.idx.size > 0 {
		if err := l.roll(); err != nil {
			return l.start, err
		}
	}
	// The checkpoint must never name an offset a crash could take back.
	if _, err := l.sync(true); err != nil {
		return l.start, err
	}
	if err := l.setStart(to); err != nil {
		return l.start, err
	}
	l.log.Info().Int64("start", int64(to)).Msg("wal: log start advanced")
	return to, nil
}
