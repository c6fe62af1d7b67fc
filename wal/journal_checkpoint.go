package wal

// journal_checkpoint.go owns the journal's checkpoints and its lifecycle
// after open: Start, the checkpoint loop and Close.
//
// A checkpoint reads the journal's LSN, fsyncs every registered Log's
// segments (each holds whatever it submitted below that LSN, by the
// segment-before-journal invariant of journal.go), then durably records the
// LSN in CHECKPOINT and removes the journal files wholly below it. A crash
// at any point leaves the previous checkpoint in force; replay is idempotent
// (records a segment already holds are skipped), so redoing it is safe.
//
// Invariant: no checkpoint runs while recovered records are unclaimed
// before Start: they would be dropped with their files.

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// Start ends recovery: records of keys no Log claimed (logs deleted while
// the broker was down) are forgotten and go with the next checkpoint, and
// checkpoints begin, every CheckpointEvery or CheckpointBytes.
func (j *Journal) Start() {
	j.mu.Lock()
	if j.started {
		j.mu.Unlock()
		return
	}
	j.started = true
	for key, refs := range j.recovered {
		j.log.Info().Str("key", key).Int("records", len(refs)).
			Msg("wal: journal records of a log that was not opened are dropped at the next checkpoint")
	}
	j.recovered = map[string][]recordRef{}
	j.mu.Unlock()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		j.checkpointLoop()
	}()
}

func (j *Journal) checkpointLoop() {
	t := time.NewTicker(j.cfg.CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		case <-j.ckptKick:
		}
		j.mu.Lock()
		idle := j.sinceCkpt == 0 && j.lsn == j.ckptLSN
		j.mu.Unlock()
		if idle {
			continue
		}
		if err := j.Checkpoint(); err != nil {
			j.log.Error().Err(err).Msg("wal: journal checkpoint failed; the journal keeps growing until one succeeds")
		}
	}
}

// Checkpoint makes every registered Log's segments durable and moves the
// journal's replay point past what they hold. It does nothing before Start
// while recovered records are unclaimed.
func (j *Journal) Checkpoint() error {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	if j.failed != nil {
		j.mu.Unlock()
		return j.failed
	}
	if !j.started && len(j.recovered) > 0 {
		j.mu.Unlock()
		return nil
	}
	lsn, written := j.lsn, j.sinceCkpt
	logs := make([]*Log, 0, len(j.logs))
	for l := range j.logs {
		logs = append(logs, l)
	}
	j.mu.Unlock()

	began := time.Now()
	for _, l := range logs {
		if err := l.syncSegments(); err != nil && !errors.Is(err, ErrClosed) {
			return fmt.Errorf("wal: checkpoint: sync %s: %w", l.dir, err)
		}
	}
	if err := vfs.WriteFileDurable(j.fs, filepath.Join(j.dir, checkpointName), encodeCheckpoint(lsn)); err != nil {
		return fmt.Errorf("wal: write journal checkpoint: %w", err)
	}
	j.mu.Lock()
	j.ckptLSN = lsn
	j.sinceCkpt = max(0, j.sinceCkpt-written)
	var victims []journalFile
	for len(j.files) > 1 && j.files[1].start <= lsn {
		victims = append(victims, j.files[0])
		j.files = j.files[1:]
	}
	j.mu.Unlock()
	for _, f := range victims {
		if err := j.recycle(f); err != nil {
			return err
		}
	}
	if len(victims) > 0 {
		if err := j.fs.SyncDir(j.dir); err != nil {
			return fmt.Errorf("wal: fsync journal dir: %w", err)
		}
	}
	j.log.Debug().Int64("lsn", lsn).Int("logs", len(logs)).Int("files_removed", len(victims)).
		Int64("took_ms", time.Since(began).Milliseconds()).Msg("wal: journal checkpoint")
	return nil
}

// Close writes what is pending, stops the committer and the checkpoints,
// and, if nothing failed, checkpoints so the next open replays nothing of
// the Logs closed before it. Close the Logs first.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		return nil
	}
	j.closing = true
	j.work.Broadcast()
	j.mu.Unlock()
	close(j.stop)
	j.wg.Wait()
	var err error
	if j.Err() == nil {
		err = j.Checkpoint()
	}
	if cerr := j.file.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("wal: close journal file: %w", cerr))
	}
	return err
}
