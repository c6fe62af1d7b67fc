//go:build unix

package s3test

// pause_unix.go owns Pause and Resume: a stopped (SIGSTOP) process keeps its
// socket open and answers nothing, the way a hung service does.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Pause freezes the server: connections are accepted by the kernel and never
// answered. Resume (or Stop) undoes it. It returns once every thread of the
// server is stopped (where /proc shows it): the signal is delivered
// asynchronously, and a thread still running could answer one more request
// (a CI run saw a Put succeed right after Pause).
func (s *Server) Pause() error {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("s3test: pause: %w", err)
	}
	for deadline := time.Now().Add(5 * time.Second); !allStopped(s.cmd.Process.Pid); {
		if time.Now().After(deadline) {
			return fmt.Errorf("s3test: pause: process %d not stopped after 5s", s.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// allStopped reports whether every thread of pid is stopped; true where
// /proc does not say (the signal alone must do there).
func allStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return true
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that ended
		}
		// The state follows the command name, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume lets a paused server run again.
func (s *Server) Resume() error {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("s3test: resume: %w", err)
	}
	return nil
}
