package vfs

import (
	"testing"
	"time"
)

// waitLimit bounds every wait of a test on another goroutine, so a broken
// file system fails in seconds instead of at the package timeout.
const waitLimit = 10 * time.Second

// recvWithin receives from ch, failing the test if nothing arrives within
// waitLimit.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}
