package wal

// journal_spares.go owns the journal's spare files: journal files that a
// checkpoint no longer needs, kept (renamed) instead of removed, from which
// new journal files are made. A round then overwrites blocks that already
// exist, and its fdatasync changes no file-system metadata: one device
// flush, with no file-system journal commit queued behind other files'
// metadata. A new journal directory starts with initialSpares zero-filled
// ones, written at open before anything is served; after that, spares come
// only from recycling. Zero-filling spares in the background while serving
// was measured and rejected: the bursts of zeroes delayed the rounds'
// fsyncs more than preallocation saved (docs/durability.md).
//
// Invariant: a recycled journal file may hold records of its previous life
// after the current ones; they carry older LSNs, so a reader stops at them
// (decodeRecord).
//
// The committer takes spares (newFile); checkpoints make them (recycle).
// spares and spareSeq are guarded by Journal.mu.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// maxSpares is how many spare files the journal keeps: enough for the files
// written between two checkpoints, so that after the first checkpoint every
// new journal file is a recycled one.
func (j *Journal) maxSpares() int {
	return int(max(2, j.cfg.CheckpointBytes/j.cfg.FileBytes+1))
}

// initialSpares is how many spares a new journal directory starts with,
// zero-filled at open: the files written before the first checkpoint
// recycles any. Writing them costs a fresh broker a fraction of a second at
// start, instead of slower fsyncs (file-system journal commits for every
// append) during its first CheckpointBytes.
const initialSpares = 4

// preallocate writes n zero-filled spares of FileBytes and makes them durable.
func (j *Journal) preallocate(n int) error {
	zero := make([]byte, 1<<20)
	for range n {
		name := j.nextSpareName()
		tmp := filepath.Join(j.dir, name+vfs.TmpSuffix)
		f, err := j.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("wal: create journal spare: %w", err)
		}
		for off := int64(0); off < j.cfg.FileBytes && err == nil; off += int64(len(zero)) {
			_, err = f.WriteAt(zero[:min(int64(len(zero)), j.cfg.FileBytes-off)], off)
		}
		if err == nil {
			err = vfs.DataSync(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = j.fs.Rename(tmp, filepath.Join(j.dir, name))
		}
		if err != nil {
			return fmt.Errorf("wal: write journal spare %s: %w", name, err)
		}
		j.mu.Lock()
		j.spares = append(j.spares, name)
		j.mu.Unlock()
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return fmt.Errorf("wal: fsync journal dir: %w", err)
	}
	return nil
}

// takeSpare returns the name of a ready spare and forgets it, or "".
func (j *Journal) takeSpare() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.spares) == 0 {
		return ""
	}
	name := j.spares[0]
	j.spares = j.spares[1:]
	return name
}

// nextSpareName reserves a name for a spare.
func (j *Journal) nextSpareName() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.spareSeq++
	return fmt.Sprintf("%020d%s", j.spareSeq, spareSuffix)
}

// recycle turns a journal file a checkpoint no longer needs into a spare,
// or removes it when enough spares are ready. The caller syncs the directory.
func (j *Journal) recycle(f journalFile) error {
	j.mu.Lock()
	keep := len(j.spares) < j.maxSpares()
	j.mu.Unlock()
	path := filepath.Join(j.dir, f.name)
	if !keep {
		if err := j.fs.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("wal: remove journal file %s: %w", f.name, err)
		}
		return nil
	}
	name := j.nextSpareName()
	if err := j.fs.Rename(path, filepath.Join(j.dir, name)); err != nil {
		return fmt.Errorf("wal: recycle journal file %s: %w", f.name, err)
	}
	j.mu.Lock()
	j.spares = append(j.spares, name)
	j.mu.Unlock()
	return nil
}
