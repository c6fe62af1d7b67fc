package partition

// Bounded waits for tests: every wait of a test on the partition's owner
// goroutine has its own deadline, so an owner that never answers fails the
// test in seconds with what it waited for, not at the package timeout.

import (
	"sync"
	"testing"
	"time"
)

// waitLimit bounds each wait of a test on another goroutine; an answer
// normally takes milliseconds.
const waitLimit = 10 * time.Second

// recvWithin receives from ch, failing the test if nothing arrives within
// waitLimit.
func recvWithin[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// waitGroupWithin waits for wg, failing the test after waitLimit.
func waitGroupWithin(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recvWithin(t, done, what)
}
