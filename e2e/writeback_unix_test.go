//go:build unix

package e2e

import "syscall"

// flushWriteback writes every dirty page of the machine to disk (sync(2)),
// so that data a test's set-up wrote is not written back by the kernel
// (about 30 s later, in one burst) in the middle of a latency measurement,
// where it would delay the broker's fsyncs.
func flushWriteback() { syscall.Sync() }
