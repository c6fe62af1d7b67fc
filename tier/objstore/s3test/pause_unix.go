//go:build unix

package s3test

// pause_unix.go owns Pause and Resume: a stopped (SIGSTOP) process keeps its
// socket open and answers nothing, the way a hung service does.

import (
	"fmt"
	"syscall"
)

// Pause freezes the server: connections are accepted by the kernel and never
// answered. Resume (or Stop) undoes it.
func (s *Server) Pause() error {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("s3test: pause: %w", err)
	}
	return nil
}

// Resume lets a paused server run again.
func (s *Server) Resume() error {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("s3test: resume: %w", err)
	}
	return nil
}
