package vfs

// dir.go owns durable directory creation and removal on top of any FS: the
// fsyncs that make a directory's own name (not just its entries) survive a
// crash, and deletion of a tree that a crash cannot leave half done.
//
// Invariant: when MkdirAllDurable returns nil, every directory it created is
// named durably in its parent (each parent was fsynced after the creation).
// Invariant: when RemoveAllDurable returns nil, path is durably gone from its
// parent; a crash before that leaves it whole at path or whole in the trash
// directory, never half removed at path.
// These functions hold no state; callers serialise operations on one path.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// MkdirAllDurable creates dir and any missing parents, fsyncing each created
// directory's parent after creating it, so that the whole chain survives a
// crash. Directories that already exist are taken as durable: their creator
// was responsible for them.
func MkdirAllDurable(fs FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string // deepest first
	for d := dir; ; d = filepath.Dir(d) {
		st, err := fs.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("vfs: mkdir %s: %s is not a directory", dir, d)
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("vfs: mkdir %s: %w", dir, err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break // a missing root; MkdirAll reports it
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		if err := fs.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("vfs: mkdir %s: %w", d, err)
		}
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("vfs: mkdir %s: fsync parent: %w", d, err)
		}
	}
	return nil
}

// RemoveAllDurable removes path (a file or a directory tree) so that a crash
// never leaves it half removed: it renames path into trashDir (which must be
// on the same file system and not inside path; it is created durably if
// missing), fsyncs path's parent and trashDir, and only then removes the
// tree from the trash. If removing the tree fails, or a crash interrupts it,
// the leftovers stay in trashDir until EmptyTrash. When it returns nil the
// trash entry's removal is durable too. A path that does not exist
// is not an error (its parent is still fsynced, in case an earlier removal
// was interrupted before that).
func RemoveAllDurable(fs FS, path, trashDir string) error {
	path, trashDir = filepath.Clean(path), filepath.Clean(trashDir)
	if trashDir == path || isUnder(trashDir, path) {
		return fmt.Errorf("vfs: remove %s: trash directory %s is inside it", path, trashDir)
	}
	parent := filepath.Dir(path)
	if _, err := fs.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := fs.SyncDir(parent); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("vfs: remove %s: fsync parent: %w", path, err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("vfs: remove %s: %w", path, err)
	}
	if err := MkdirAllDurable(fs, trashDir); err != nil {
		return fmt.Errorf("vfs: remove %s: %w", path, err)
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:]) // never fails (crypto/rand)
	target := filepath.Join(trashDir, filepath.Base(path)+"."+hex.EncodeToString(suffix[:]))
	if err := fs.Rename(path, target); err != nil {
		return fmt.Errorf("vfs: remove %s: move to trash: %w", path, err)
	}
	if err := fs.SyncDir(parent); err != nil {
		return fmt.Errorf("vfs: remove %s: fsync parent: %w", path, err)
	}
	if err := fs.SyncDir(trashDir); err != nil {
		return fmt.Errorf("vfs: remove %s: fsync trash: %w", path, err)
	}
	if err := removeTree(fs, target); err != nil {
		return fmt.Errorf("vfs: remove %s from trash: %w", path, err)
	}
	if err := fs.SyncDir(trashDir); err != nil {
		return fmt.Errorf("vfs: remove %s: fsync trash: %w", path, err)
	}
	return nil
}

// EmptyTrash removes everything in trashDir (left by interrupted
// RemoveAllDurable calls), keeping the directory. A missing trashDir is empty.
func EmptyTrash(fs FS, trashDir string) error {
	names, err := fs.ReadDir(trashDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vfs: empty trash %s: %w", trashDir, err)
	}
	var errs []error
	for _, n := range names {
		if err := removeTree(fs, filepath.Join(trashDir, n)); err != nil {
			errs = append(errs, fmt.Errorf("vfs: empty trash %s: %w", trashDir, err))
		}
	}
	if len(names) > 0 {
		if err := fs.SyncDir(trashDir); err != nil {
			errs = append(errs, fmt.Errorf("vfs: empty trash %s: fsync: %w", trashDir, err))
		}
	}
	return errors.Join(errs...)
}

// removeTree removes p and, if it is a directory, everything in it. It tries
// Remove first and lists p only when that fails, so it never follows a
// symbolic link into another tree.
func removeTree(fs FS, p string) error {
	err := fs.Remove(p)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	names, lerr := fs.ReadDir(p)
	if lerr != nil {
		return err // not a directory we can list: the Remove error says why
	}
	for _, n := range names {
		if err := removeTree(fs, filepath.Join(p, n)); err != nil {
			return err
		}
	}
	if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
