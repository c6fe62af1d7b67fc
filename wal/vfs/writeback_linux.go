package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback implements Writebacker with sync_file_range.
func (f osFile) StartWriteback(off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// DataSync implements DataSyncer with fdatasync.
func (f osFile) DataSync() error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// DropCache implements CacheDropper with posix_fadvise(POSIX_FADV_DONTNEED).
func (f osFile) DropCache(off, n int64) error {
	if err := unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED); err != nil {
		return &os.PathError{Op: "fadvise", Path: f.Name(), Err: err}
	}
	return nil
}
