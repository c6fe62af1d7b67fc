package workload

// Integration tests: the workload against one real sluiced process (built
// once in TestMain), its history checked by chaos/checker.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/history"
)

// sluicedPath is the broker binary; set by TestMain unless -short.
var sluicedPath string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	if p := os.Getenv("SLUICE_E2E_SLUICED"); p != "" {
		sluicedPath = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "sluice-workload-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "workload: make temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sluiced")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluiced")
	cmd.Dir = filepath.Join("..", "..") // the module root, from chaos/workload
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "workload: FAIL: go build -o %s ./cmd/sluiced: %v\n%s\n", bin, err, out)
		return 1
	}
	sluicedPath = bin
	return m.Run()
}

const (
	readyTimeout = 60 * time.Second
	pollEvery    = 50 * time.Millisecond
)

// startSluiced starts one broker on free loopback ports with a temporary
// data dir and returns its Kafka address; it is killed when the test ends.
// Ports picked free may be taken before the broker binds them, so a broker
// that exits before it is ready is started again on fresh ports.
func startSluiced(t *testing.T) string {
	t.Helper()
	var lastErr error
	for attempt := range 3 {
		addr, err := launchSluiced(t, attempt)
		if err == nil {
			return addr
		}
		lastErr = err
		t.Logf("sluiced attempt %d: %v", attempt, err)
	}
	t.Fatalf("sluiced did not start: %v", lastErr)
	return ""
}

func launchSluiced(t *testing.T, attempt int) (string, error) {
	dir := t.TempDir()
	ports := freePorts(t, 5)
	kafka, httpAddr := ports[0], ports[1]
	logPath := filepath.Join(dir, "sluiced.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sluicedPath,
		"--node-id", "1", "--az", "az1",
		"--data-dir", filepath.Join(dir, "data"),
		"--kafka-listen", kafka, "--kafka-advertise", kafka,
		"--http-listen", httpAddr, "--inter-broker-listen", ports[4],
		"--etcd-listen-client", ports[2], "--etcd-listen-peer", ports[3],
		"--retention-check-interval", "200ms",
		"--group-min-session-timeout", "1s",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sluiced: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
		logFile.Close()
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			printTail(t, logPath, attempt)
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		if resp, err := hc.Get("http://" + httpAddr + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return kafka, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not ready after %v", readyTimeout)
		}
		select {
		case <-exited:
			return "", errors.New("exited before it was ready")
		case <-time.After(pollEvery):
		}
	}
}

func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		addrs = append(addrs, freeport.Must(t))
	}
	return addrs
}

func printTail(t *testing.T, path string, attempt int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 60 {
			lines = lines[1:]
		}
	}
	t.Logf("sluiced log (attempt %d), last lines:\n%s", attempt, strings.Join(lines, "\n"))
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pollEvery)
	}
}

// run is one workload run against a fresh broker, with its history file.
type run struct {
	t     *testing.T
	w     *Workload
	rec   *history.Recorder
	file  *os.File
	path  string
	watch *watcher
}

// watcher follows a history as the Recorder writes it (after a Flush), so
// a test can wait for what one process did.
type watcher struct {
	mu      sync.Mutex
	partial []byte                  // guarded by mu: the line being written
	read    map[history.Process]int // guarded by mu: records polled per process
}

func (w *watcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := w.partial[:i]
		w.partial = w.partial[i+1:]
		if ev, err := history.UnmarshalEvent(line); err == nil {
			if p, ok := ev.(history.Poll); ok {
				w.read[p.Process] += len(p.Records)
			}
		}
	}
}

// polled is the number of records process has polled, as far as recorded.
func (r *run) polled(process history.Process) int {
	if err := r.rec.Flush(); err != nil {
		r.t.Fatalf("flush history: %v", err)
	}
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	return r.watch.read[process]
}

func startRun(t *testing.T, seed uint64, opts ...func(*Config)) *run {
	t.Helper()
	addr := startSluiced(t)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	watch := &watcher{read: make(map[history.Process]int)}
	rec, err := history.NewRecorder(io.MultiWriter(f, watch), history.Header{Topic: "chaos", Seed: int64(seed)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(); _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{
		Bootstrap:         []string{addr},
		Topic:             "chaos",
		Partitions:        4,
		ReplicationFactor: 1,
		TopicConfigs:      map[string]string{"retention.ms": "-1"},
		Producers:         2,
		Rate:              400,
		Group:             "chaos-group",
		Members:           2,
		Readers:           true,
		SessionTimeout:    2 * time.Second,
		StopTimeout:       10 * time.Second,
		Recorder:          rec,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Seed:              seed,
	}
	for _, o := range opts {
		o(&cfg)
	}
	w, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(w.Stop)
	return &run{t: t, w: w, rec: rec, file: f, path: path, watch: watch}
}

// finish stops the workload, drains, closes the history and checks it.
func (r *run) finish() ([]history.Event, checker.Report) {
	t := r.t
	t.Helper()
	r.w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.w.Drain(ctx); err != nil {
		t.Errorf("Drain: %v", err)
	}
	if err := errors.Join(r.rec.Close(), r.file.Close()); err != nil {
		t.Fatalf("close history: %v", err)
	}
	_, evs, err := history.ReadFile(r.path)
	if err != nil {
		t.Fatalf("read history: %v", err)
	}
	if dir := os.Getenv("CHAOS_KEEP_HISTORY"); dir != "" { // for rerunning the checker or reading the run
		keep := filepath.Join(dir, t.Name()+".jsonl")
		if b, err := os.ReadFile(r.path); err != nil || os.WriteFile(keep, b, 0o644) != nil {
			t.Errorf("keep history in %s: %v", keep, err)
		}
		t.Logf("history kept in %s", keep)
	}
	rep := checker.Check(evs)
	s := r.w.Stats()
	t.Logf("stats: %+v", s)
	t.Logf("checker:\n%s", rep.String())
	if !rep.OK() {
		t.Errorf("checker found %d anomalies, %d unchecked", rep.Total(), len(rep.Unchecked))
	}
	if rep.Stats.Acked < 300 {
		t.Errorf("%d acknowledged sends, want at least 300", rep.Stats.Acked)
	}
	if s.RecordErrors != 0 {
		t.Errorf("%d events refused by the recorder", s.RecordErrors)
	}
	return evs, rep
}

// consumed counts, per consumer kind, the records polled.
func consumed(evs []history.Event) map[history.Consumer]int {
	n := make(map[history.Consumer]int)
	for _, ev := range evs {
		if p, ok := ev.(history.Poll); ok {
			n[p.Consumer] += len(p.Records)
		}
	}
	return n
}

func TestWorkloadAgainstBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	r := startRun(t, 1)
	eventually(t, 20*time.Second, "600 acknowledged sends and 20 accepted commits", func() bool {
		s := r.w.Stats()
		return s.SendsOK >= 600 && s.CommitsOK >= 20
	})
	evs, rep := r.finish()
	n := consumed(evs)
	if n[history.ConsumerGroup] == 0 || n[history.ConsumerReader] == 0 || n[history.ConsumerDrain] < rep.Stats.Acked {
		t.Errorf("records read: group %d, reader %d, drain %d (acked %d)", n[history.ConsumerGroup], n[history.ConsumerReader], n[history.ConsumerDrain], rep.Stats.Acked)
	}
	if rep.Stats.Commits == 0 {
		t.Error("no commit recorded")
	}
}

// TestWorkloadLibrdkafkaProducer: a librdkafka producer (confluent-kafka-
// python) beside a kgo one; its sends are recorded from its reports, every
// one acknowledged, and the checker holds them like kgo's (the drain reads
// every acknowledged send back once, at its offset).
func TestWorkloadLibrdkafkaProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	if err := CheckLibrdkafka(DefaultPython); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	r := startRun(t, 2, func(c *Config) { c.Producers, c.LibrdkafkaProducers = 1, 1 })
	eventually(t, 20*time.Second, "300 acknowledged librdkafka sends", func() bool {
		return r.w.Stats().LibrdkafkaOK >= 300
	})
	evs, _ := r.finish()
	s := r.w.Stats()
	if s.LibrdkafkaNotOK != 0 || s.SendsFailed != 0 || s.SendsUnknown != 0 {
		t.Errorf("librdkafka: %d sends not acknowledged; all: %d failed, %d unknown", s.LibrdkafkaNotOK, s.SendsFailed, s.SendsUnknown)
	}
	processes := map[history.Process]int{}
	for _, ev := range evs {
		if snd, ok := ev.(history.Send); ok && snd.Outcome == history.OK {
			processes[snd.Process]++
		}
	}
	if len(processes) != 2 {
		t.Errorf("acknowledged sends by process: %v, want two producers", processes)
	}
}

func TestWorkloadMemberCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	r := startRun(t, 2)
	eventually(t, 20*time.Second, "both members committing", func() bool {
		s := r.w.Stats()
		return s.SendsOK >= 200 && s.CommitsOK >= 10 && s.Assigns >= 2
	})
	before := r.w.Stats()
	process, err := r.w.RestartMember(0)
	if err != nil {
		t.Fatalf("RestartMember: %v", err)
	}
	// The crashed member's session times out; the survivor and the new
	// member are assigned a new generation and commit again.
	eventually(t, 20*time.Second, "a rebalance with the new member, which polls records", func() bool {
		return r.w.Stats().Assigns >= before.Assigns+2 && r.polled(process) > 0
	})
	after := r.w.Stats()
	eventually(t, 10*time.Second, "commits after the rebalance", func() bool {
		return r.w.Stats().CommitsOK >= after.CommitsOK+20
	})
	evs, _ := r.finish()
	var assigned, polled bool
	for _, ev := range evs {
		switch e := ev.(type) {
		case history.Assign:
			assigned = assigned || (e.Process == process && len(e.Partitions) > 0)
		case history.Poll:
			polled = polled || (e.Process == process && len(e.Records) > 0)
		}
	}
	if !assigned || !polled {
		t.Errorf("new member (process %d): assigned partitions %v, polled records %v", process, assigned, polled)
	}
}
