//go:build !linux

package cluster

// tmpfs_other.go: elsewhere there is no tmpfs to mount; Start fails with
// ErrNoMount when Config.DataDirBytes is set.

import "errors"

var errNotLinux = errors.New("tmpfs data dirs are supported on Linux only")

func mountTmpfs(string, int64) error { return errNotLinux }

func unmountTmpfs(string) error { return errNotLinux }

func freeBytes(string) (int64, int64, error) { return 0, 0, errNotLinux }
