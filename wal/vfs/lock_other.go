//go:build !unix

package vfs

import "io"

// Lock implements Locker where flock(2) is not available: it cannot lock
// and says nothing; Sluice's brokers run on Unix systems, where the lock is
// real (lock_unix.go).
func (osFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
