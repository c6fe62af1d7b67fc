package loadgen_test

// Smoke runs of every scenario against a real sluiced process (built in
// TestMain, started once on free loopback ports, stopped after the tests),
// and of the JetStream peer when nats-server is on PATH. They assert that
// records flowed and the figures are sane; never how fast.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/loadgen"
)

const (
	readyTimeout = 60 * time.Second
	stopGrace    = 20 * time.Second
	runTimeout   = 90 * time.Second
)

var (
	sluicedPath  string // set by TestMain
	sluicedErr   error  // why sluiced could not be built
	brokerOnce   sync.Once
	brokerAddr   string
	brokerHTTP   string // the shared sluiced's HTTP API, http://host:port
	brokerErr    error
	brokerStop   func()
	joinGroupKey = int16(11)
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := runMain(m)
	os.Exit(code)
}

func runMain(m *testing.M) int {
	if p := os.Getenv("SLUICE_LOADGEN_SLUICED"); p != "" {
		sluicedPath = p
	} else if !testing.Short() {
		dir, err := os.MkdirTemp("", "loadgen-test-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: temp dir:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		sluicedPath = filepath.Join(dir, "sluiced")
		cmd := exec.Command("go", "build", "-o", sluicedPath, "./cmd/sluiced")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			sluicedErr = fmt.Errorf("go build ./cmd/sluiced: %w\n%s", err, out)
		}
	}
	defer func() {
		if brokerStop != nil {
			brokerStop()
		}
	}()
	return m.Run()
}

func freePort(t testing.TB) string {
	t.Helper()
	return freeport.Must(t)
}

// broker returns the address of the shared sluiced, starting it on first use.
func broker(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("smoke runs against a real broker are skipped in -short mode")
	}
	if sluicedErr != nil {
		t.Fatal(sluicedErr)
	}
	brokerOnce.Do(func() { brokerAddr, brokerErr = startSluiced(t) })
	if brokerErr != nil {
		t.Fatal(brokerErr)
	}
	return brokerAddr
}

func startSluiced(t *testing.T) (string, error) {
	dir, err := os.MkdirTemp("", "loadgen-sluiced-")
	if err != nil {
		return "", err
	}
	kafka, httpAddr := freePort(t), freePort(t)
	logPath := filepath.Join(dir, "sluiced.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(sluicedPath, "--data-dir", filepath.Join(dir, "data"), "--kafka-listen", kafka,
		"--http-listen", httpAddr, "--inter-broker-listen", freePort(t),
		"--etcd-listen-client", freePort(t), "--etcd-listen-peer", freePort(t),
		"--default-partitions", "3")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start sluiced: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	brokerStop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopGrace):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				brokerHTTP = "http://" + httpAddr
				return kafka, nil
			}
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("sluiced exited before ready: %w\n%s", err, tail(log))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("sluiced not ready after %v\n%s", readyTimeout, tail(log))
		}
	}
}

func tail(b []byte) string {
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(len(lines)-40, 0):], "\n")
}

// requireGroups skips when the broker's ApiVersions lacks JoinGroup (key 11).
func requireGroups(t *testing.T, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Err != nil {
			t.Fatal(v.Err)
		}
		if _, ok := v.KeyMaxVersion(joinGroupKey); !ok {
			t.Skip("the broker does not serve JoinGroup (ApiVersions lacks key 11): consumer groups have not landed; this test runs once they do")
		}
	}
}

func smokeConfig(scenario string) loadgen.Config {
	cfg := loadgen.DefaultConfig()
	cfg.Scenario = scenario
	cfg.Partitions = 3
	cfg.Producers = 2
	cfg.Consumers = 2
	cfg.Rate = 2000
	cfg.Duration = 1500 * time.Millisecond
	cfg.DrainTimeout = 30 * time.Second
	cfg.Interval = 250 * time.Millisecond
	cfg.Progress = false
	return cfg
}

func execute(t *testing.T, cfg loadgen.Config) *loadgen.Result {
	t.Helper()
	r, err := loadgen.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	res, err := r.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = loadgen.WriteTable(&buf, res)
	t.Logf("\n%s", buf.String())
	return res
}

// checkSane asserts what every scenario must show.
func checkSane(t *testing.T, res *loadgen.Result, produced bool) {
	t.Helper()
	if produced {
		if res.Produced.Records == 0 || res.Produced.MsgsPerSec <= 0 || res.Produced.MBPerSec <= 0 {
			t.Errorf("nothing produced: %+v", res.Produced)
		}
		if a := res.AckLatency; a.Count != res.Produced.Records || a.P50Ms <= 0 || a.P99Ms < a.P50Ms || a.MaxMs < a.P999Ms {
			t.Errorf("ack latency %+v for %d records", a, res.Produced.Records)
		}
		if e := res.E2ELatency; e.Count == 0 || e.P50Ms <= 0 || e.P99Ms < e.P50Ms {
			t.Errorf("end-to-end latency %+v", e)
		}
		if res.Produced.Failed != 0 {
			t.Errorf("%d failed publishes: %v", res.Produced.Failed, res.Errors)
		}
	}
	if res.Consumers > 0 {
		if !res.Lag.CaughtUp || res.Lag.Final != 0 {
			t.Errorf("consumers did not catch up: %+v", res.Lag)
		}
		if res.Consumed.Records == 0 || res.Consumed.MsgsPerSec <= 0 {
			t.Errorf("nothing consumed: %+v", res.Consumed)
		}
		if produced && res.Consumed.Records != res.Produced.Records {
			t.Errorf("consumed %d unique records, produced %d", res.Consumed.Records, res.Produced.Records)
		}
	}
	if len(res.Series) == 0 {
		t.Errorf("no per-interval samples")
	}
}

func TestSmokeKafka(t *testing.T) {
	addr := broker(t)
	tests := []struct {
		name   string
		mod    func(*loadgen.Config)
		groups bool
		check  func(*testing.T, *loadgen.Result)
	}{
		{name: "steady", mod: func(c *loadgen.Config) { c.ConsumerMode = loadgen.ConsumerAssign }},
		{name: "steady-max-rate", mod: func(c *loadgen.Config) {
			c.ConsumerMode, c.Rate, c.Duration = loadgen.ConsumerAssign, 0, time.Second
		}},
		{name: "peak", mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode, c.Rate, c.Duration, c.PeakDuration = loadgen.ScenarioPeak, loadgen.ConsumerAssign, 1000, time.Second, 500*time.Millisecond
		}, check: func(t *testing.T, r *loadgen.Result) {
			if r.Peak == nil || !r.Peak.Drained || r.Peak.PeakRate != 3000 {
				t.Errorf("peak %+v", r.Peak)
			}
		}},
		{name: "hot-key", mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode = loadgen.ScenarioHotKey, loadgen.ConsumerAssign
		}},
		{name: "large-payloads", mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode, c.Rate = loadgen.ScenarioLargePayloads, loadgen.ConsumerAssign, 100
		}, check: func(t *testing.T, r *loadgen.Result) {
			if per := r.Produced.Bytes / max(r.Produced.Records, 1); per < 64<<10 {
				t.Errorf("mean payload %d B, want >= 64 KiB", per)
			}
		}},
		{name: "replay", mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode, c.Prefill = loadgen.ScenarioReplay, loadgen.ConsumerAssign, 20000
		}, check: checkReplay},
		{name: "steady-group", groups: true, mod: func(c *loadgen.Config) { c.ConsumerMode = loadgen.ConsumerGroup }},
		{name: "replay-group", groups: true, mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode, c.Prefill = loadgen.ScenarioReplay, loadgen.ConsumerGroup, 20000
		}, check: checkReplay},
		{name: "consumer-crash", groups: true, mod: func(c *loadgen.Config) {
			c.Scenario, c.ConsumerMode, c.Consumers = loadgen.ScenarioConsumerCrash, loadgen.ConsumerGroup, 3
			c.Duration, c.CrashAfter, c.CommitInterval = 2*time.Second, 700*time.Millisecond, time.Second
		}, check: checkCrash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.groups {
				requireGroups(t, addr)
			}
			cfg := smokeConfig(loadgen.ScenarioSteady)
			cfg.Brokers = []string{addr}
			tt.mod(&cfg)
			res := execute(t, cfg)
			checkSane(t, res, cfg.Scenario != loadgen.ScenarioReplay)
			if tt.check != nil {
				tt.check(t, res)
			}
		})
	}
}

func checkReplay(t *testing.T, r *loadgen.Result) {
	t.Helper()
	if r.Replay == nil || r.Replay.Prefilled != 20000 || r.Consumed.Records != 20000 || r.Replay.ReadMsgsPerSec <= 0 {
		t.Errorf("replay %+v, consumed %+v", r.Replay, r.Consumed)
	}
}

func checkCrash(t *testing.T, r *loadgen.Result) {
	t.Helper()
	if r.Crash == nil || !r.Crash.Resumed || r.Crash.PauseSeconds <= 0 || r.Crash.KilledAtSeconds <= 0 {
		t.Errorf("crash %+v", r.Crash)
	}
}

// A group run against a broker without groups fails with ErrGroupsUnsupported
// instead of hanging; with groups it succeeds.
func TestSmokeGroupModeDetection(t *testing.T) {
	addr := broker(t)
	cfg := smokeConfig(loadgen.ScenarioSteady)
	cfg.Brokers, cfg.ConsumerMode, cfg.Duration = []string{addr}, loadgen.ConsumerGroup, 500*time.Millisecond
	r, err := loadgen.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	_, err = r.Execute(ctx)
	if err != nil && !errors.Is(err, loadgen.ErrGroupsUnsupported) {
		t.Fatalf("group run: %v", err)
	}
}

// Run writes the JSON report and the CSV and SVG files.
func TestSmokeRunOutputs(t *testing.T) {
	addr := broker(t)
	dir := t.TempDir()
	cfg := smokeConfig(loadgen.ScenarioSteady)
	cfg.Brokers, cfg.ConsumerMode, cfg.Duration = []string{addr}, loadgen.ConsumerAssign, time.Second
	cfg.JSON, cfg.Progress = true, true
	cfg.CSVPath, cfg.SVGPath = filepath.Join(dir, "run.csv"), filepath.Join(dir, "run.svg")
	r, err := loadgen.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	r.SetOutput(&stdout, &stderr)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stderr.String(), "acked") {
		t.Errorf("no progress line on stderr: %q", stderr.String())
	}
	for _, p := range []string{cfg.CSVPath, cfg.SVGPath} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// The JetStream peer, when nats-server is installed.
func TestSmokeJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is not on PATH; .ci/run installs it with go install")
		}
		t.Skip("nats-server is not on PATH (scripts/bench.sh and .ci/run install it)")
	}
	dir := t.TempDir()
	addr := freePort(t)
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listen: %s\njetstream { store_dir: %q }\n", addr, filepath.Join(dir, "js"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	deadline := time.Now().Add(readyTimeout)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not listening: %v", err)
		}
		<-time.After(20 * time.Millisecond)
	}
	for _, sc := range []string{loadgen.ScenarioSteady, loadgen.ScenarioPeak, loadgen.ScenarioReplay, loadgen.ScenarioConsumerCrash} {
		t.Run(sc, func(t *testing.T) {
			cfg := smokeConfig(sc)
			cfg.System, cfg.NATSURL = loadgen.SystemJetStream, "nats://"+addr
			cfg.Prefill = 20000
			if sc == loadgen.ScenarioPeak {
				cfg.Rate, cfg.Duration, cfg.PeakDuration = 1000, time.Second, 500*time.Millisecond
			}
			if sc == loadgen.ScenarioConsumerCrash {
				cfg.Consumers, cfg.CrashAfter, cfg.SessionTimeout = 3, 500*time.Millisecond, time.Second
			}
			res := execute(t, cfg)
			checkSane(t, res, sc != loadgen.ScenarioReplay)
			if sc == loadgen.ScenarioConsumerCrash {
				checkCrash(t, res)
			}
		})
	}
}
