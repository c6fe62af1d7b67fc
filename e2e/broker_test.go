package e2e

// This file owns the process harness: building sluiced once (TestMain),
// starting brokers on free loopback ports, waiting for /readyz, stopping,
// killing and restarting them, and printing their logs when a test fails.
//
// Invariant: every broker a test starts is stopped or killed by t.Cleanup,
// and its exit is waited for, so no process outlives its test.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	readyTimeout   = 60 * time.Second // process start until /readyz answers 200
	stopGrace      = 20 * time.Second // SIGTERM until SIGKILL
	pollInterval   = 50 * time.Millisecond
	logTailLines   = 80
	defaultTimeout = 60 * time.Second // default deadline for one step of a test
)

// sluicedPath is the binary every test starts; set once by TestMain.
var sluicedPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if p := os.Getenv("SLUICE_E2E_SLUICED"); p != "" {
		sluicedPath = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: make temp dir for sluiced: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	bin := filepath.Join(dir, "sluiced")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluiced")
	cmd.Dir = ".." // go test runs in the package directory; the module root is its parent
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: go build -o %s ./cmd/sluiced: %v\n%s\n", bin, err, out)
		return 1
	}
	sluicedPath = bin
	return m.Run()
}

// brokerOptions are the knobs a test may turn; the zero value is a normal
// single broker with auto-creation on.
type brokerOptions struct {
	nodeID            int
	az                string
	noAutoCreate      bool
	defaultPartitions int
	// saslListener makes the Kafka listener SASL_PLAINTEXT (--listeners)
	// instead of --kafka-listen's PLAINTEXT.
	saslListener bool
	extraArgs    []string
	// dataDir replaces the test's temporary data directory (the README
	// examples want make run's ./data under their working directory).
	dataDir string
}

// broker is one sluiced process. Its ports and data dir stay the same
// across Restart.
type broker struct {
	t       testing.TB
	opts    brokerOptions
	dataDir string
	logPath string

	kafkaAddr, httpAddr, etcdClientAddr, etcdPeerAddr string
	interBrokerAddr                                   string // replica fetches and election messages

	mu       sync.Mutex
	cmd      *exec.Cmd     // guarded by mu
	exited   chan struct{} // closed when cmd has been waited for; guarded by mu
	waitErr  error         // set before exited is closed
	logFile  *os.File      // guarded by mu
	restarts int           // guarded by mu
}

// startBroker starts a broker, waits until it is ready and registers its
// cleanup: SIGTERM, a clean exit expected, and the log tail if the test failed.
func startBroker(t testing.TB, opts brokerOptions) *broker {
	t.Helper()
	if opts.nodeID == 0 {
		opts.nodeID = 1
	}
	if opts.az == "" {
		opts.az = "az1"
	}
	if opts.defaultPartitions == 0 {
		opts.defaultPartitions = 1
	}
	dir := t.TempDir()
	b := &broker{
		t:       t,
		opts:    opts,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "sluiced.log"),
	}
	if opts.dataDir != "" {
		b.dataDir = opts.dataDir
	}
	t.Cleanup(func() {
		if b.running() {
			if err := b.stop(); err != nil {
				t.Errorf("broker %d: clean shutdown on SIGTERM: %v", b.opts.nodeID, err)
			}
		}
		if t.Failed() {
			b.printLogTail()
		}
		b.mu.Lock()
		if b.logFile != nil {
			b.logFile.Close()
		}
		b.mu.Unlock()
	})
	// A port picked free can be taken by another process (a connection's
	// own ephemeral port) before the broker binds it: a broker on a data
	// directory of its own starts again on fresh ports and a fresh
	// directory, as startCluster does.
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 5)
		b.kafkaAddr, b.httpAddr, b.etcdClientAddr, b.etcdPeerAddr, b.interBrokerAddr = ports[0], ports[1], ports[2], ports[3], ports[4]
		if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
			t.Fatalf("make data dir: %v", err)
		}
		b.launch()
		err := b.awaitReady()
		if err == nil {
			return b
		}
		if attempt == startAttempts || opts.dataDir != "" || !b.lostPortRace() {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; starting again on fresh ports", attempt, err)
		if err := os.RemoveAll(b.dataDir); err != nil {
			t.Fatalf("remove the data dir of the failed start: %v", err)
		}
		b.mu.Lock()
		b.restarts++
		b.mu.Unlock()
	}
}

// lostPortRace reports whether the broker's last start failed to bind a
// port (its log since the last start marker says so).
func (b *broker) lostPortRace() bool {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return false
	}
	last := string(data)
	if i := strings.LastIndex(last, "=== e2e: start #"); i >= 0 {
		last = last[i:]
	}
	return strings.Contains(last, "bind: address already in use")
}

// freePorts returns n distinct loopback addresses that were free a moment ago.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		addrs = append(addrs, freeport.Must(t))
	}
	return addrs
}

func (b *broker) args() []string {
	o := b.opts
	args := []string{
		"--node-id", strconv.Itoa(o.nodeID),
		"--az", o.az,
		"--data-dir", b.dataDir,
		"--http-listen", b.httpAddr,
		"--inter-broker-listen", b.interBrokerAddr,
		"--etcd-listen-client", b.etcdClientAddr,
		"--etcd-listen-peer", b.etcdPeerAddr,
		"--auto-create-topics=" + strconv.FormatBool(!o.noAutoCreate),
		"--default-partitions", strconv.Itoa(o.defaultPartitions),
		"--retention-check-interval", "200ms",
		"--log-level", logLevel(),
	}
	if o.saslListener {
		args = append(args, "--listeners", "SASL_PLAINTEXT://"+b.kafkaAddr)
	} else {
		args = append(args, "--kafka-listen", b.kafkaAddr, "--kafka-advertise", b.kafkaAddr)
	}
	return append(args, o.extraArgs...)
}

func logLevel() string {
	if l := os.Getenv("SLUICE_E2E_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// launch starts the process without waiting for readiness.
func (b *broker) launch() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logFile == nil {
		f, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			b.t.Fatalf("open broker log: %v", err)
		}
		b.logFile = f
	}
	fmt.Fprintf(b.logFile, "=== e2e: start #%d: %s %s\n", b.restarts, sluicedPath, strings.Join(b.args(), " "))
	cmd := exec.Command(sluicedPath, b.args()...)
	cmd.Stdout = b.logFile
	cmd.Stderr = b.logFile
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start sluiced: %v", err)
	}
	exited := make(chan struct{})
	b.cmd = cmd
	b.exited = exited
	go func() {
		err := cmd.Wait()
		b.mu.Lock()
		b.waitErr = err
		b.mu.Unlock()
		close(exited)
	}()
}

// waitReady polls GET /readyz until it answers 200, the process exits, or
// the deadline passes, and fails the test on either of the last two.
func (b *broker) waitReady() {
	b.t.Helper()
	if err := b.awaitReady(); err != nil {
		b.t.Fatal(err)
	}
}

func (b *broker) exitErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waitErr
}

// running reports whether the current process has not exited.
func (b *broker) running() bool {
	b.mu.Lock()
	exited := b.exited
	b.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, waits up to stopGrace, then SIGKILLs. It returns an
// error unless the process exited 0 on its own after SIGTERM.
func (b *broker) stop() error {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		if err := b.exitErr(); err != nil {
			return fmt.Errorf("process had already exited: %w", err)
		}
		return errors.New("process had already exited with status 0")
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("send SIGTERM: %w", err)
	}
	select {
	case <-exited:
		if err := b.exitErr(); err != nil {
			return fmt.Errorf("exit after SIGTERM: %w", err)
		}
		return nil
	case <-time.After(stopGrace):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("still running %v after SIGTERM; killed", stopGrace)
	}
}

// Stop shuts the broker down with SIGTERM and fails the test unless it
// exits 0 in time.
func (b *broker) Stop() {
	b.t.Helper()
	if err := b.stop(); err != nil {
		b.t.Fatalf("broker %d: stop: %v", b.opts.nodeID, err)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (b *broker) Kill() {
	b.t.Helper()
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.t.Fatalf("broker %d: SIGKILL: %v", b.opts.nodeID, err)
	}
	<-exited
}

// Restart starts the broker again with the same data dir and ports, after
// a Stop or Kill, and waits until it is ready.
func (b *broker) Restart() {
	b.t.Helper()
	if b.running() {
		b.t.Fatalf("broker %d: Restart while still running", b.opts.nodeID)
	}
	b.mu.Lock()
	b.restarts++
	b.mu.Unlock()
	b.launch()
	b.waitReady()
}

// Alive fails t (which may be a subtest) if the process has exited.
func (b *broker) Alive(t testing.TB) {
	t.Helper()
	if !b.running() {
		t.Fatalf("broker %d exited: %v", b.opts.nodeID, b.exitErr())
	}
}

// printLogTail writes the last lines of the broker's log to the test log.
func (b *broker) printLogTail() {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		b.t.Logf("broker %d: read log %s: %v", b.opts.nodeID, b.logPath, err)
		return
	}
	lines := lastLines(data, logTailLines)
	b.t.Logf("broker %d: last %d lines of %s:\n%s", b.opts.nodeID, len(lines), b.logPath, strings.Join(lines, "\n"))
}

func lastLines(data []byte, n int) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

// newClient returns a franz-go client for b, closed at cleanup.
func newClient(t testing.TB, b *broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.kafkaAddr),
		kgo.ClientID("sluice-e2e"),
		kgo.RetryTimeout(30 * time.Second),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client over its own franz-go client.
func newAdmin(t testing.TB, b *broker) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, b))
}

// createTopic creates a topic with replication factor 1 and fails the test
// on any error.
func createTopic(t testing.TB, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err != nil {
		t.Fatalf("create topic %q (%d partitions, configs %v): %v %s", topic, partitions, fmtConfigs(configs), err, resp.ErrMessage)
	}
	waitTopicReady(t, adm, topic, partitions)
}

// waitTopicReady polls metadata until every partition of topic has a leader.
func waitTopicReady(t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	eventually(t, defaultTimeout, "topic "+topic+" ready", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		td, ok := tds[topic]
		switch {
		case !ok:
			return false, "topic missing from metadata"
		case td.Err != nil:
			return false, td.Err.Error()
		case int32(len(td.Partitions)) != partitions:
			return false, fmt.Sprintf("%d partitions in metadata, want %d", len(td.Partitions), partitions)
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false, fmt.Sprintf("partition %d: leader %d err %v", p.Partition, p.Leader, p.Err)
			}
		}
		return true, ""
	})
}

// eventually polls cond until it reports done or timeout passes; then it
// fails the test with what and cond's last explanation.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (done bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, why := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %s", what, timeout, why)
		}
		<-tick.C
	}
}

func fmtConfigs(configs map[string]*string) string {
	var parts []string
	for k, v := range configs {
		if v == nil {
			parts = append(parts, k+"=<nil>")
		} else {
			parts = append(parts, k+"="+*v)
		}
	}
	return strings.Join(parts, ",")
}

func strp(s string) *string { return &s }

// requireCI decides whether a missing external client skips or fails.
// requireTool returns the path of the named program, skipping the test
// outside CI when it is missing (requireCI).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		requireCI(t, name, err)
	}
	return path
}

func requireCI(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required in CI but unavailable: %v", what, err)
	}
	t.Skipf("%s unavailable (%v); set CI=true to make this a failure", what, err)
}
