package broker

// Bounded waits for tests: every wait of a test on another goroutine has its
// own deadline, so a broker that never answers fails the test in seconds with
// what it waited for, not at the package timeout.
//
// Invariant: a test never blocks on a bare channel receive or WaitGroup.Wait
// whose other side is the code under test.

import (
	"sync"
	"testing"
	"time"
)

// stopLimit bounds how long a broker's Run may take to return once its
// context is cancelled; a clean stop takes well under a second.
const stopLimit = 30 * time.Second

// recvWithin receives from ch, failing the test if nothing arrives within d.
func recvWithin[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", d, what)
		panic("unreachable")
	}
}

// waitGroupWithin waits for wg, failing the test if it is not done within d.
func waitGroupWithin(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recvWithin(t, done, d, what)
}

// awaitStop waits for the result of a Run whose context was cancelled and
// reports an error, or a Run still going after stopLimit, with t.Errorf:
// stop functions run in cleanups and on other goroutines, where Fatal is
// not allowed.
func awaitStop(t testing.TB, errc <-chan error, what string) {
	t.Helper()
	timer := time.NewTimer(stopLimit)
	defer timer.Stop()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("%s run: %v", what, err)
		}
	case <-timer.C:
		t.Errorf("%s: Run did not return within %v of its cancel", what, stopLimit)
	}
}
