package wal

// journal_spares.go owns the journal's spare files: journal files that a
// checkpoint no longer needs, kept (renamed) instead of removed, from which
// new journal files are made. A round then overwrites blocks that already
// exist, and its fdatasync changes no file-system metadata: one device
// flush, with no file-system journal commit queued behind other files'
// metadata. Until the first checkpoint, new files are created empty and
// grow. Zero-filling spares ahead of time was measured and rejected: the
// bursts of zeroes delayed the rounds' fsyncs more than preallocation saved
// (docs/durability.md).
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
)

// maxSpares is how many spare files the journal keeps ready.
const maxSpares = 2

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
	keep := len(j.spares) < maxSpares
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
