package vfs

// lock.go owns exclusive locks on lock files: one process (one holder) per
// data directory. On the OS the lock is flock(2) on an open file, so it dies
// with its process (kill -9 included) and never needs clearing by hand; Mem
// keeps its locks in memory.

import (
	"errors"
	"io"
)

// ErrLocked is returned by Lock for a lock another holder has.
var ErrLocked = errors.New("vfs: locked by another holder")

// Locker is implemented by file systems that can lock a file exclusively.
type Locker interface {
	// Lock takes the lock of path (creating the file if needed) without
	// waiting, or fails with ErrLocked; closing the result releases it.
	Lock(path string) (io.Closer, error)
}

// Lock takes the exclusive lock of path on fs. A file system that cannot
// lock reports an error rather than pretending.
func Lock(fs FS, path string) (io.Closer, error) {
	if l, ok := fs.(Locker); ok {
		return l.Lock(path)
	}
	return nil, errors.New("vfs: this file system cannot lock files")
}
