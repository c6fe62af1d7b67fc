package meta

// Bounded waits for tests: every wait of a test on a watcher or another
// goroutine has its own deadline (testTimeout), so a watch that never closes
// or never delivers fails the test with what it waited for, not at the
// package timeout.

import (
	"sync"
	"testing"
	"time"
)

// recvWithin receives from ch (ok is false if it was closed), failing the
// test if nothing arrives within testTimeout.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) (v T, ok bool) {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", testTimeout, what)
		panic("unreachable")
	}
}

// drainWithin discards what ch delivers until it closes, failing the test
// if it is still open after testTimeout.
func drainWithin[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", testTimeout, what)
		}
	}
}

// waitGroupWithin waits for wg, failing the test after testTimeout.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recvWithin(t, done, what)
}
