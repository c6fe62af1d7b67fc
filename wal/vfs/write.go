package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// TmpSuffix marks a file being written by WriteFile; a crash can leave one
// behind, and its owner removes it on recovery.
const TmpSuffix = ".tmp"

// WriteFile replaces path with b: it writes a temporary file, fsyncs it and
// renames it over path. The rename is durable only once the directory is
// synced; WriteFileDurable does that too.
func WriteFile(fs FS, path string, b []byte) error {
	tmp := path + TmpSuffix
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Rename(tmp, path)
}

// WriteFileDurable is WriteFile followed by a sync of path's directory,
// creating the directory first if needed, durably (MkdirAllDurable).
func WriteFileDurable(fs FS, path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := MkdirAllDurable(fs, dir); err != nil {
		return err
	}
	if err := WriteFile(fs, path, b); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// ErrTooLarge is returned by ReadFile for a file over its limit.
var ErrTooLarge = errors.New("vfs: file too large")

// ReadFile returns the contents of path, refusing files over limit bytes.
func ReadFile(fs FS, path string, limit int64) (_ []byte, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%s: %d bytes, limit %d: %w", path, n, limit, ErrTooLarge)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}
