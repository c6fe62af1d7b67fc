package vfs

// Faulty owns no state of its own beyond its inner FS and inject function; the
// inject function is called from whichever goroutine performs the operation
// and must be safe for concurrent use.

import (
	"io"
	"os"
	"sync/atomic"
)

// ErrInjected is the error the helper injectors return.
var ErrInjected = injectedError{}

type injectedError struct{}

func (injectedError) Error() string { return "vfs: injected fault" }

// NewFaulty wraps inner so that inject is called before every operation with
// the operation and the path it concerns (for File operations, the path the
// file was opened with). A non-nil result fails the operation with that error
// without performing it.
func NewFaulty(inner FS, inject func(op Op, path string) error) FS {
	return &faulty{inner: inner, inject: inject}
}

// FailNth returns an inject function that fails the nth (1-based) call of op
// whose path satisfies match (nil matches every path) with ErrInjected, and
// every matching call after it when sticky is set.
func FailNth(op Op, n int64, match func(path string) bool, sticky bool) func(Op, string) error {
	var calls atomic.Int64
	return func(o Op, path string) error {
		if o != op || (match != nil && !match(path)) {
			return nil
		}
		c := calls.Add(1)
		if c == n || (sticky && c > n) {
			return ErrInjected
		}
		return nil
	}
}

type faulty struct {
	inner  FS
	inject func(Op, string) error
}

func (f *faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.inject(OpOpen, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f, name: name}, nil
}

func (f *faulty) Create(name string) (File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

func (f *faulty) Open(name string) (File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

func (f *faulty) Remove(name string) error {
	if err := f.inject(OpRemove, name); err != nil {
		return pathErr("remove", name, err)
	}
	return f.inner.Remove(name)
}

func (f *faulty) Rename(oldname, newname string) error {
	if err := f.inject(OpRename, oldname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.inner.Rename(oldname, newname)
}

func (f *faulty) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.inject(OpMkdir, dir); err != nil {
		return pathErr("mkdir", dir, err)
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *faulty) ReadDir(dir string) ([]string, error) {
	if err := f.inject(OpReadDir, dir); err != nil {
		return nil, pathErr("readdir", dir, err)
	}
	return f.inner.ReadDir(dir)
}

func (f *faulty) Stat(name string) (os.FileInfo, error) {
	if err := f.inject(OpStat, name); err != nil {
		return nil, pathErr("stat", name, err)
	}
	return f.inner.Stat(name)
}

func (f *faulty) SyncDir(dir string) error {
	if err := f.inject(OpSyncDir, dir); err != nil {
		return pathErr("syncdir", dir, err)
	}
	return f.inner.SyncDir(dir)
}

// Lock forwards to the inner file system; locking is not a fault site.
func (f *faulty) Lock(path string) (io.Closer, error) { return Lock(f.inner, path) }

type faultyFile struct {
	File
	fs   *faulty
	name string
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject(OpRead, f.name); err != nil {
		return 0, pathErr("read", f.name, err)
	}
	return f.File.ReadAt(p, off)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.fs.inject(OpWrite, f.name); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	return f.File.Write(p)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.inject(OpWrite, f.name); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	return f.File.WriteAt(p, off)
}

// DataSync is a fault site like Sync.
func (f *faultyFile) DataSync() error {
	if err := f.fs.inject(OpSync, f.name); err != nil {
		return pathErr("sync", f.name, err)
	}
	return DataSync(f.File)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.inject(OpSync, f.name); err != nil {
		return pathErr("sync", f.name, err)
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.inject(OpTruncate, f.name); err != nil {
		return pathErr("truncate", f.name, err)
	}
	return f.File.Truncate(size)
}

func (f *faultyFile) Size() (int64, error) {
	if err := f.fs.inject(OpSize, f.name); err != nil {
		return 0, pathErr("size", f.name, err)
	}
	return f.File.Size()
}

// StartWriteback forwards to the inner file; it changes nothing durable, so
// it is not a fault site.
func (f *faultyFile) StartWriteback(off, n int64) error { return StartWriteback(f.File, off, n) }

func (f *faultyFile) Close() error {
	if err := f.fs.inject(OpClose, f.name); err != nil {
		_ = f.File.Close() // the handle must not leak even when the close "fails"
		return pathErr("close", f.name, err)
	}
	return f.File.Close()
}
