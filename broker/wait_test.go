package broker

// Bounded waits for tests: every wait of a test on another goroutine has its
// own deadline, so a broker that never answers fails the test in seconds with
// what it waited for, not at the package timeout.
//
// Invariant: a test never blocks on a bare channel receive or WaitGroup.Wait
// whose other side is the code under test.

import (
	"testing"
	"time"
)

// stopLimit bounds how long a broker's Run may take to return once its
// context is cancelled; a clean stop takes well under a second.
const stopLimit = 30 * time.Second

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
