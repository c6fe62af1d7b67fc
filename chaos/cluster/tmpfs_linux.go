//go:build linux

package cluster

// tmpfs_linux.go: mounting, unmounting and measuring the brokers' tmpfs
// data dirs (disk.go).

import (
	"errors"
	"fmt"
	"syscall"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (which exists).
func mountTmpfs(dir string, size int64) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=755", size))
}

// unmountTmpfs unmounts dir, detaching it lazily if it is still busy.
func unmountTmpfs(dir string) error {
	err := syscall.Unmount(dir, 0)
	if err == nil {
		return nil
	}
	if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
		return errors.Join(err, fmt.Errorf("detach: %w", derr))
	}
	return nil
}

// freeBytes is the space an unprivileged writer may still take on dir's
// file system, and its block size.
func freeBytes(dir string) (free, block int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, st.Bsize, nil
}
