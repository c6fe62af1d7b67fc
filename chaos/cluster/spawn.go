package cluster

// spawn.go owns the spawner: one goroutine, locked to its OS thread for its
// whole life, that forks every child of a Cluster. The thread matters
// because Linux delivers a child's parent-death signal (Pdeathsig) when the
// thread that forked it ends, not when the process does; a child forked
// from an ordinary goroutine's thread would be killed the day the Go
// runtime retires that thread.
//
// Invariant: the spawner's goroutine runs until close; close is called only
// once every child it started has been reaped, because returning from a
// locked goroutine ends its thread and with it the children.

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
)

// ErrStopped is returned by every operation of a Cluster after Stop.
var ErrStopped = errors.New("chaos/cluster: the cluster is stopped")

type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

// spawner forks children from one locked OS thread.
type spawner struct {
	requests chan spawnRequest
	done     chan struct{} // closed when the goroutine has returned

	mu     sync.Mutex
	closed bool // guarded by mu
}

func newSpawner() *spawner {
	s := &spawner{requests: make(chan spawnRequest), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	defer close(s.done)
	// Never unlocked: the thread ends with this goroutine, after close.
	runtime.LockOSThread()
	for req := range s.requests {
		req.reply <- req.cmd.Start()
	}
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStopped
	}
	reply := make(chan error, 1)
	s.requests <- spawnRequest{cmd: cmd, reply: reply}
	return <-reply
}

// close ends the spawner's goroutine and waits for it. Idempotent.
func (s *spawner) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.requests)
	}
	s.mu.Unlock()
	<-s.done
}
