package e2e

// This file owns the test of deploy/cluster.sh, the script that runs a
// three-broker cluster by hand: a broker killed with SIGKILL is brought
// back with `restart DIR N`, `status` shows it running and ready, its log
// still holds what the killed run wrote, and a stale pid file that names
// an unrelated live process gets no signal from `stop`.
//
// Invariant: every broker the script starts for a test is gone when the
// test's cleanup returns: the script's stop first, then SIGKILL for any pid
// still running as a broker of the test's directory (checked in
// /proc/<pid>/cmdline, so no other process is signalled).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scriptTimeout bounds one run of the script: it waits up to 120 s for
// each broker it starts to become ready.
const scriptTimeout = 6 * time.Minute

// clusterScript runs deploy/cluster.sh on one directory and port range.
type clusterScript struct {
	t      *testing.T
	script string   // absolute path of deploy/cluster.sh
	dir    string   // the cluster's DIR
	env    []string // the script's environment: binary, ports, store
}

// newClusterScript picks a free port range and a fresh directory, and
// registers the cleanup that stops whatever the script started there.
func newClusterScript(t *testing.T) *clusterScript {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "deploy", "cluster.sh"))
	if err != nil {
		t.Fatalf("find deploy/cluster.sh: %v", err)
	}
	// The script names directories by their real path; so does the test.
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatalf("resolve the temp dir: %v", err)
	}
	base := freePortBase(t)
	s := &clusterScript{t: t, script: script, dir: filepath.Join(work, "cluster")}
	s.env = append(os.Environ(),
		"SLUICED="+sluicedPath,
		"KAFKA_BASE="+strconv.Itoa(base),
		"HTTP_BASE="+strconv.Itoa(base+10),
		"INTER_BROKER_BASE="+strconv.Itoa(base+20),
		"ETCD_BASE="+strconv.Itoa(base+30), // base+30 … base+51
		// A directory for the shared store, so the test needs no S3 server.
		"OBJECT_STORE=file://"+filepath.Join(work, "objects"),
		"SLUICED_ARGS=--log-level "+logLevel(),
	)
	t.Cleanup(s.cleanup)
	return s
}

// freePortBase returns a base B whose ports the script would use (Kafka
// B+1…3, HTTP B+11…13, inter-broker B+21…23, etcd B+30, 31, 40, 41, 50,
// 51) were all free a moment ago. B is below Linux's ephemeral range, so
// no outgoing connection takes one of them meanwhile.
func freePortBase(t *testing.T) int {
	t.Helper()
	offsets := []int{1, 2, 3, 11, 12, 13, 21, 22, 23, 30, 31, 40, 41, 50, 51}
	for range 50 {
		base := 20000 + 100*rand.IntN(120) // 20000 … 31900
		var lns []net.Listener
		free := true
		for _, off := range offsets {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				free = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no free range of ports for the script's cluster in 50 tries")
	return 0
}

// run runs the script with args and returns its output and exit code; an
// exit code other than 0 or 3 (status: not all ready) fails the test.
func (s *clusterScript) run(args ...string) (string, int) {
	s.t.Helper()
	out, code, err := s.exec(args...)
	if err != nil || (code != 0 && code != 3) {
		s.t.Fatalf("deploy/cluster.sh %s: exit %d, %v\n%s", strings.Join(args, " "), code, err, out)
	}
	return out, code
}

func (s *clusterScript) exec(args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.script, args...)
	cmd.Dir = ".." // the module root, as make runs it
	cmd.Env = s.env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode(), nil
	}
	return out.String(), 0, err
}

// brokerDataDir is broker n's --data-dir under the script's layout.
func (s *clusterScript) brokerDataDir(n int) string {
	return filepath.Join(s.dir, fmt.Sprintf("n%d", n), "data")
}

func (s *clusterScript) logPath(n int) string {
	return filepath.Join(s.dir, fmt.Sprintf("n%d", n), "sluiced.log")
}

// pidFile returns the pid in broker n's pid file, 0 without one.
func (s *clusterScript) pidFile(n int) int {
	s.t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dir, fmt.Sprintf("n%d", n), "pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		s.t.Fatalf("read broker %d's pid file: %v", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		s.t.Fatalf("broker %d's pid file: %v", n, err)
	}
	return pid
}

// isBroker reports whether pid is a running sluiced of broker n of this
// cluster (a zombie's command line is empty).
func (s *clusterScript) isBroker(pid, n int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	if !strings.Contains(filepath.Base(args[0]), "sluiced") {
		return false
	}
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) && args[i+1] == s.brokerDataDir(n) {
			return true
		}
	}
	return false
}

// cleanup stops the cluster with the script, then kills any broker of
// this directory that survived it, and prints the logs' tails on failure.
func (s *clusterScript) cleanup() {
	if out, code, err := s.exec("stop", s.dir); err != nil || code != 0 {
		s.t.Errorf("cleanup: deploy/cluster.sh stop: exit %d, %v\n%s", code, err, out)
	}
	for n := 1; n <= clusterSize; n++ {
		if pid := s.pidFile(n); pid > 0 && s.isBroker(pid, n) {
			s.t.Errorf("cleanup: broker %d (pid %d) outlived the script's stop; killing it", n, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if s.t.Failed() {
			if data, err := os.ReadFile(s.logPath(n)); err == nil {
				s.t.Logf("broker %d log tail:\n%s", n, strings.Join(lastLines(data, logTailLines), "\n"))
			}
		}
	}
}

// statusRow is one broker's line of `deploy/cluster.sh status`.
type statusRow struct {
	pid                            int
	process, healthz, readyz, role string
	line                           string
}

// status runs the script's status and returns broker n's row.
func (s *clusterScript) status(n int) (statusRow, string) {
	s.t.Helper()
	out, _ := s.run("status", s.dir)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] != strconv.Itoa(n) {
			continue
		}
		row := statusRow{process: f[3], healthz: f[4], line: line}
		row.pid, _ = strconv.Atoi(f[2])
		// READYZ is one word but for "not ready"; ROLE follows it.
		rest := f[5:]
		if rest[0] == "not" {
			row.readyz, rest = "not ready", rest[2:]
		} else {
			row.readyz, rest = rest[0], rest[1:]
		}
		row.role = rest[0]
		return row, out
	}
	s.t.Fatalf("deploy/cluster.sh status has no line for broker %d:\n%s", n, out)
	return statusRow{}, out
}

// TestClusterScriptRestartAfterKill: deploy/cluster.sh brings back a broker
// killed with SIGKILL (`restart DIR 2`), its status shows it running and
// ready under a new pid, its log keeps the killed run's lines, and `stop`
// leaves alone a live process that a stale pid file names.
func TestClusterScriptRestartAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster through deploy/cluster.sh")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the script's pid checks read /proc")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		requireCI(t, "curl (deploy/cluster.sh waits for /readyz with it)", err)
	}
	_, kcatErr := exec.LookPath("kcat")

	s := newClusterScript(t)
	if out, _ := s.run("start", s.dir); !strings.Contains(out, "three brokers ready") {
		t.Fatalf("deploy/cluster.sh start: %s", out)
	}
	killed := s.pidFile(2)
	if !s.isBroker(killed, 2) {
		t.Fatalf("broker 2's pid file names pid %d, which is not broker 2", killed)
	}
	if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 broker 2 (pid %d): %v", killed, err)
	}
	eventually(t, defaultTimeout, "the killed broker 2 is gone", func() (bool, string) {
		return !s.isBroker(killed, 2), fmt.Sprintf("pid %d still runs", killed)
	})
	before, err := os.ReadFile(s.logPath(2))
	if err != nil {
		t.Fatalf("read broker 2's log: %v", err)
	}
	if !bytes.Contains(before, []byte("broker ready")) {
		t.Fatalf("broker 2's log lacks the killed run's %q line:\n%s", "broker ready", before)
	}

	s.run("restart", s.dir, "2")

	var row statusRow
	eventually(t, defaultTimeout, "status shows broker 2 back", func() (bool, string) {
		var out string
		row, out = s.status(2)
		ok := row.process == "running" && row.healthz == "ok" && row.readyz == "ready" &&
			row.pid > 0 && row.pid != killed && s.isBroker(row.pid, 2)
		if kcatErr == nil { // role and leaders come from kcat's Metadata
			ok = ok && (row.role == "broker" || row.role == "controller")
		}
		return ok, out
	})
	if got := s.pidFile(2); got != row.pid {
		t.Errorf("status shows pid %d for broker 2, its pid file %d", row.pid, got)
	}
	after, err := os.ReadFile(s.logPath(2))
	if err != nil {
		t.Fatalf("read broker 2's log: %v", err)
	}
	if !bytes.HasPrefix(after, before) {
		t.Errorf("broker 2's log lost the killed run's lines: it was %d bytes, now %d and not starting with them", len(before), len(after))
	}
	for _, pid := range []int{killed, row.pid} {
		if sep := fmt.Sprintf("deploy/cluster.sh: broker 2 starts (pid %d)", pid); !bytes.Contains(after, []byte(sep)) {
			t.Errorf("broker 2's log lacks the separator %q", sep)
		}
	}

	// A stale pid file: broker 2 stopped, its pid now an unrelated process.
	s.run("stop", s.dir, "2")
	if s.isBroker(row.pid, 2) {
		t.Fatalf("deploy/cluster.sh stop DIR 2 returned with broker 2 (pid %d) running", row.pid)
	}
	bystander := exec.Command("sleep", "60")
	if err := bystander.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	waited := make(chan struct{})
	go func() {
		_ = bystander.Wait() // its status is read from ProcessState
		close(waited)
	}()
	t.Cleanup(func() {
		_ = bystander.Process.Kill()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Errorf("sleep (pid %d) did not exit after SIGKILL", bystander.Process.Pid)
		}
	})
	stale := filepath.Join(s.dir, "n2", "pid")
	if err := os.WriteFile(stale, []byte(strconv.Itoa(bystander.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatalf("write a stale pid file: %v", err)
	}
	if row, out := s.status(2); row.process != "stopped" || !strings.Contains(row.line, "stale pid file") {
		t.Errorf("status of broker 2 with a stale pid file: want stopped and the stale file named, got:\n%s", out)
	}
	others := []int{s.pidFile(1), s.pidFile(3)}
	s.run("stop", s.dir)
	for i, pid := range others {
		if n := []int{1, 3}[i]; s.isBroker(pid, n) {
			t.Errorf("deploy/cluster.sh stop returned with broker %d (pid %d) running", n, pid)
		}
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale pid file is still there after stop (stat: %v)", err)
	}
	// SIGKILL it now: had stop sent SIGTERM, the process would already be
	// dying of that signal and its wait status would say so.
	select {
	case <-waited:
		t.Fatalf("the process of a stale pid file is gone after stop (%v): stop signalled it", bystander.ProcessState)
	default:
	}
	if err := bystander.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the process of a stale pid file: %v", err)
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatalf("sleep (pid %d) did not exit after SIGKILL", bystander.Process.Pid)
	}
	ws, _ := bystander.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the process of a stale pid file ended with %v, not by the test's SIGKILL: stop signalled it", bystander.ProcessState)
	}
}
