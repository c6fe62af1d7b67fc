package cluster

// process.go owns one child process across its runs: starting a run with
// its output appended to the process's log file, signalling it, reaping it
// (recording an exit nobody asked for), and reading what a run wrote.
// process.mu guards cur, paused, expected, starts and crashes; a run's
// fields are fixed once started, except err, which its reaper writes before
// closing exited.
//
// Invariant: at most one run of a process is alive; start refuses while the
// current one has not been reaped.
// Invariant: a run's err is read only after its exited channel is closed.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errNotRunning is returned by operations on a process that has no live run.
var errNotRunning = errors.New("not running")

// run is one execution of a process.
type run struct {
	num      int // 1 for the first start
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd has been reaped
	err      error         // cmd.Wait's result; written before exited closes
	logStart int64         // offset in the log file where this run's output begins
}

func (r *run) alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// process is a child program started again and again with the same
// arguments and environment.
type process struct {
	name    string // "broker 2", "versitygw": for errors
	path    string
	args    []string
	env     []string
	logPath string
	spawn   *spawner

	mu       sync.Mutex
	cur      *run    // guarded by mu; nil before the first start
	paused   bool    // guarded by mu: SIGSTOPped and not SIGCONTed since
	expected bool    // guarded by mu: the current run was told to end by us
	starts   int     // guarded by mu: runs started so far
	crashes  []error // guarded by mu: runs that ended without being told to, with their log tails
}

// start begins a new run. It does not wait for the program to be ready.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && p.cur.alive() {
		return fmt.Errorf("%s: start: still running (pid %d)", p.name, p.cur.cmd.Process.Pid)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", p.name, err)
	}
	defer func() { _ = f.Close() }() // the child holds its own descriptor
	p.starts++
	header := fmt.Sprintf("=== chaos/cluster: start #%d at %s: %s %s\n",
		p.starts, time.Now().UTC().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	if _, err := f.WriteString(header); err != nil {
		return fmt.Errorf("%s: write log: %w", p.name, err)
	}
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: stat log: %w", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := p.spawn.start(cmd); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.name, p.path, err)
	}
	r := &run{num: p.starts, cmd: cmd, exited: make(chan struct{}), logStart: info.Size()}
	p.cur, p.paused, p.expected = r, false, false
	go p.reap(r)
	return nil
}

// reap waits for run r and records its exit if nobody asked for it. It
// reads expected before closing exited, and start resets expected only
// after exited is closed, so the flag it reads is r's.
func (p *process) reap(r *run) {
	err := r.cmd.Wait()
	r.err = err
	p.mu.Lock()
	expected := p.expected
	p.mu.Unlock()
	if !expected {
		if err == nil {
			err = errors.New("exit status 0")
		}
		crash := p.withTail(r, fmt.Errorf("%s (run #%d, pid %d) exited on its own: %w", p.name, r.num, r.cmd.Process.Pid, err))
		p.mu.Lock()
		p.crashes = append(p.crashes, crash)
		p.mu.Unlock()
	}
	close(r.exited)
}

// current is the latest run, or nil.
func (p *process) current() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// running reports whether the latest run is alive (paused or not).
func (p *process) running() bool {
	r := p.current()
	return r != nil && r.alive()
}

// up reports whether the latest run is alive and not paused.
func (p *process) up() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil && p.cur.alive() && !p.paused
}

// pid is the process id of the live run, or 0.
func (p *process) pid() int {
	r := p.current()
	if r == nil || !r.alive() {
		return 0
	}
	return r.cmd.Process.Pid
}

// signal sends sig to the live run.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalLocked(sig)
}

func (p *process) signalLocked(sig syscall.Signal) error {
	if p.cur == nil || !p.cur.alive() {
		return fmt.Errorf("%s: %v: %w", p.name, sig, errNotRunning)
	}
	if err := p.cur.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.name, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	case syscall.SIGKILL, syscall.SIGTERM:
		p.expected = true
	}
	return nil
}

// sendKill sends SIGKILL to the live run without waiting for it.
func (p *process) sendKill() (*run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.signalLocked(syscall.SIGKILL); err != nil {
		return nil, err
	}
	p.paused = false // a killed process is not paused; a stopped one dies too
	return p.cur, nil
}

// kill sends SIGKILL and waits until the run has been reaped.
func (p *process) kill() error {
	r, err := p.sendKill()
	if err != nil {
		return err
	}
	<-r.exited
	return nil
}

// terminate ends the live run: SIGCONT if paused, SIGTERM, and SIGKILL if it
// has not exited within grace. It returns an error unless the run exited 0
// on SIGTERM; without a live run it returns nil.
func (p *process) terminate(grace time.Duration) error {
	p.mu.Lock()
	r := p.cur
	if r == nil || !r.alive() {
		p.mu.Unlock()
		return nil
	}
	if p.paused {
		_ = p.signalLocked(syscall.SIGCONT) // fails only if it just exited
	}
	err := p.signalLocked(syscall.SIGTERM)
	p.mu.Unlock()
	if err != nil {
		if errors.Is(err, errNotRunning) {
			<-r.exited
			return nil
		}
		return err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-r.exited:
		if r.err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", p.name, r.err)
		}
		return nil
	case <-timer.C:
		_ = r.cmd.Process.Kill() // fails only if it exited meanwhile
		<-r.exited
		return fmt.Errorf("%s: still running %v after SIGTERM; killed", p.name, grace)
	}
}

// unexpectedExits lists the runs that ended without being told to (a
// crash, or a start that failed), oldest first.
func (p *process) unexpectedExits() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.crashes)
}

// maxTailBytes bounds how much of a log tail reads.
const maxTailBytes = 64 << 10

// output is what run r has written to the log so far, or its last limit
// bytes if limit > 0.
func (p *process) output(r *run, limit int64) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", p.name, err)
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: stat log: %w", p.name, err)
	}
	from := r.logStart
	if limit > 0 && info.Size()-limit > from {
		from = info.Size() - limit
	}
	b, err := io.ReadAll(io.NewSectionReader(f, from, info.Size()-from))
	if err != nil {
		return nil, fmt.Errorf("%s: read log: %w", p.name, err)
	}
	return b, nil
}

// outputContains reports whether the latest run's output contains s.
func (p *process) outputContains(s string) bool {
	b, err := p.output(p.current(), 0)
	return err == nil && bytes.Contains(b, []byte(s))
}

// logTailLines is how much of a log an error quotes.
const logTailLines = 20

// tail is the last n lines of run r's output, for error messages.
func (p *process) tail(r *run, n int) string {
	b, err := p.output(r, maxTailBytes)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// withTail adds the end of run r's log to err.
func (p *process) withTail(r *run, err error) error {
	return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.logPath, p.tail(r, logTailLines))
}

// withLatestTail adds the end of the latest run's log to err.
func (p *process) withLatestTail(err error) error {
	return p.withTail(p.current(), err)
}
