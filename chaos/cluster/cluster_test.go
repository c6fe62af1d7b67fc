package cluster_test

// cluster_test.go runs a real cluster through every operation of the
// package once: start, produce and read back, kill a partition's leader and
// see another elected, restart it, pause and resume a follower, kill every
// broker at once and restart them, and read every acknowledged record back.
// It needs sluiced (built once by TestMain, or $SLUICE_CHAOS_SLUICED) and
// versitygw ($SLUICE_VERSITYGW, bin/versitygw or $PATH; `make tools`).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/chaos/cluster"
)

const (
	envSluiced   = "SLUICE_CHAOS_SLUICED"
	envVersityGW = "SLUICE_VERSITYGW"
	pollEvery    = 50 * time.Millisecond
	stepTimeout  = 45 * time.Second // one step: a failover, a read back
)

// Set once by TestMain; binErr says why a binary is missing.
var (
	sluicedPath, versitygwPath string
	binErr                     error
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // the cluster test skips itself; nothing to build
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos/cluster: %v\n", err)
		return 1
	}
	versitygwPath, binErr = findVersityGW(root)
	if p := os.Getenv(envSluiced); p != "" {
		sluicedPath = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-cluster-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos/cluster: make temp dir for sluiced: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "sluiced")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluiced")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos/cluster: FAIL: go build -o %s ./cmd/sluiced: %v\n%s\n", bin, err, out)
		return 1
	}
	sluicedPath = bin
	return m.Run()
}

// moduleRoot is the nearest directory at or above the working directory
// holding a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// findVersityGW looks in $SLUICE_VERSITYGW, then <root>/bin, then $PATH.
func findVersityGW(root string) (string, error) {
	if p := os.Getenv(envVersityGW); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", envVersityGW, p, err)
		}
		return p, nil
	}
	p := filepath.Join(root, "bin", "versitygw")
	if _, err := exec.LookPath(p); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("versitygw not found in $%s, %s or $PATH; run `make tools` to install it into bin/", envVersityGW, p)
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three sluiced processes and versitygw")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	const (
		topic      = "smoke"
		partitions = 3
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		Dir:       t.TempDir(),
		Sluiced:   sluicedPath,
		VersityGW: versitygwPath,
		Logger:    zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			for id := int32(1); id <= cluster.Size; id++ {
				logTail(t, c.Broker(id))
			}
		}
	})
	t.Logf("cluster ready in %v: %v, S3 %s", time.Since(begin).Round(time.Millisecond), c.Bootstrap(), c.S3().Endpoint)

	adm := kadm.NewClient(newClient(t, c))
	// Upload at once, so the test sees the brokers reach the S3 gateway.
	uploadNow := "0"
	configs := map[string]*string{"remote.upload.max.delay.ms": &uploadNow}
	if _, err := adm.CreateTopic(ctx, partitions, cluster.Size, configs, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for p := range int32(partitions) {
		waitLeader(t, c, topic, p, func(leader, _ int32) bool { return leader > 0 })
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(stepTimeout), kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	acked := map[string]position{}
	produce(t, prod, topic, "start", []int32{0, 1, 2}, 9, acked)
	readBack(t, c, topic, acked)

	// Kill partition 0's leader: another replica takes over at a higher epoch.
	old, epoch := waitLeader(t, c, topic, 0, func(leader, _ int32) bool { return leader > 0 })
	oldPID := c.Broker(old).PID()
	killedAt := time.Now()
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	if pid := c.Broker(old).PID(); pid != 0 || slices.Contains(c.Up(), old) {
		t.Fatalf("broker %d killed, yet PID %d and up %v", old, pid, c.Up())
	}
	leader, newEpoch := waitLeader(t, c, topic, 0, func(leader, e int32) bool { return leader > 0 && leader != old && e > epoch })
	t.Logf("broker %d (leader of %s/0 at epoch %d) killed; broker %d leads at epoch %d %v later",
		old, topic, epoch, leader, newEpoch, time.Since(killedAt).Round(time.Millisecond))
	produce(t, prod, topic, "one-down", []int32{0}, 6, acked)

	if err := c.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	if pid := c.Broker(old).PID(); pid == 0 || pid == oldPID {
		t.Fatalf("broker %d restarted with PID %d (was %d)", old, pid, oldPID)
	}
	if up := c.Up(); len(up) != cluster.Size {
		t.Fatalf("up after the restart: %v", up)
	}

	// Pause a follower of partition 0 (shorter than its lease) and resume it.
	leader, _ = waitLeader(t, c, topic, 0, func(leader, _ int32) bool { return leader > 0 })
	follower := int32(1)
	for follower == leader {
		follower++
	}
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(c.Up(), follower) {
		t.Fatalf("broker %d paused, yet up: %v", follower, c.Up())
	}
	produce(t, prod, topic, "paused", []int32{0}, 3, acked)
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}
	if up := c.Up(); len(up) != cluster.Size {
		t.Fatalf("up after the resume: %v", up)
	}
	checkMetrics(t, c, topic, acked)
	if ctl, err := c.Controller(ctx); err != nil || ctl < 1 || ctl > cluster.Size {
		t.Fatalf("controller %d, %v", ctl, err)
	}

	// Every broker at once; every acknowledged record survives.
	if err := c.KillAll(); err != nil {
		t.Fatal(err)
	}
	if up := c.Up(); len(up) != 0 {
		t.Fatalf("up after KillAll: %v", up)
	}
	if _, _, err := c.Leader(ctx, topic, 0); !errors.Is(err, cluster.ErrNoBrokerUp) {
		t.Fatalf("Leader with every broker killed: %v, want ErrNoBrokerUp", err)
	}
	restartAt := time.Now()
	if err := c.RestartAll(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("all brokers killed and restarted; ready %v later", time.Since(restartAt).Round(time.Millisecond))
	readBack(t, c, topic, acked)

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := c.Kill(1); !errors.Is(err, cluster.ErrStopped) {
		t.Fatalf("Kill after Stop: %v, want ErrStopped", err)
	}
	t.Logf("%d records acknowledged and read back; whole test %v", len(acked), time.Since(begin).Round(time.Millisecond))
}

// position is where an acknowledged record was written.
type position struct {
	partition int32
	offset    int64
}

func newClient(t *testing.T, c *cluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.ClientID("chaos-cluster-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitLeader polls Leader until ok accepts what it says.
func waitLeader(t *testing.T, c *cluster.Cluster, topic string, partition int32, ok func(leader, epoch int32) bool) (int32, int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		leader, epoch, err := c.Leader(ctx, topic, partition)
		if err == nil && ok(leader, epoch) {
			return leader, epoch
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/%d: no leader as wanted within %v: last leader %d epoch %d, %v", topic, partition, stepTimeout, leader, epoch, err)
		case <-tick.C:
		}
	}
}

// produce sends n records round-robin over the given partitions with
// acks=all and records where each was acknowledged.
func produce(t *testing.T, cl *kgo.Client, topic, prefix string, parts []int32, n int, acked map[string]position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: parts[i%len(parts)], Key: []byte(v), Value: []byte(v)})
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("produce %s to %s/%d: %v", r.Record.Value, topic, r.Record.Partition, r.Err)
		}
		acked[string(r.Record.Value)] = position{r.Record.Partition, r.Record.Offset}
	}
}

// readBack consumes the topic from the start with a fresh client until
// every acknowledged value has been read, each at its position.
func readBack(t *testing.T, c *cluster.Cluster, topic string, acked map[string]position) {
	t.Helper()
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	seen := map[string]position{}
	for len(seen) < len(acked) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %s: %d of %d acknowledged values read within %v", topic, len(seen), len(acked), stepTimeout)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want, ok := acked[string(r.Value)]
			got := position{r.Partition, r.Offset}
			if !ok || want != got {
				t.Fatalf("read %q at %v; acknowledged at %v (known %v)", r.Value, got, want, ok)
			}
			seen[string(r.Value)] = got
		})
	}
}

// checkMetrics reads partition 0's high watermark from its leader's
// /metrics (at least one past every offset acknowledged there) and waits
// until some broker has uploaded an object to the S3 gateway.
func checkMetrics(t *testing.T, c *cluster.Cluster, topic string, acked map[string]position) {
	t.Helper()
	leader, _ := waitLeader(t, c, topic, 0, func(leader, _ int32) bool { return leader > 0 })
	var want int64
	for _, p := range acked {
		if p.partition == 0 {
			want = max(want, p.offset+1)
		}
	}
	hwSeries := cluster.Series("sluice_partition_high_watermark", "topic", topic, "partition", "0")
	const uploads = "sluice_tier_objects_uploaded_total"
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		var why []string
		m, err := c.Metrics(ctx, leader)
		hw, ok := m[hwSeries]
		if err != nil || !ok || hw < float64(want) {
			why = append(why, fmt.Sprintf("broker %d: %s = %v (present %v, %v), want >= %d", leader, hwSeries, hw, ok, err, want))
		}
		var uploaded float64
		for _, id := range c.Up() {
			m, err := c.Metrics(ctx, id)
			if err != nil {
				why = append(why, err.Error())
			}
			uploaded += m[uploads]
		}
		if uploaded < 1 {
			why = append(why, fmt.Sprintf("%s = %v over the brokers, want >= 1", uploads, uploaded))
		}
		if len(why) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("metrics within %v: %s", stepTimeout, strings.Join(why, "; "))
		case <-tick.C:
		}
	}
}

func logTail(t *testing.T, b *cluster.Broker) {
	data, err := os.ReadFile(b.LogPath)
	if err != nil {
		t.Logf("broker %d: %v", b.ID, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	lines = lines[max(0, len(lines)-60):]
	t.Logf("broker %d: last lines of %s:\n%s", b.ID, b.LogPath, strings.Join(lines, "\n"))
}

func TestParseMetrics(t *testing.T) {
	const text = `# HELP sluice_x A counter.
# TYPE sluice_x counter
sluice_x 3
sluice_hw{topic="t",partition="0"} 17
sluice_lat_bucket{le="+Inf",op="a,b"} 5 1700000000000
sluice_esc{v="a\"b\\c"} NaN
go_gc_ratio  0.25
`
	m, err := cluster.ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  string
		want float64
	}{
		{"no labels", cluster.Series("sluice_x"), 3},
		{"labels sorted", cluster.Series("sluice_hw", "topic", "t", "partition", "0"), 17},
		{"comma in a value, timestamp", cluster.Series("sluice_lat_bucket", "op", "a,b", "le", "+Inf"), 5},
		{"escapes", cluster.Series("sluice_esc", "v", `a"b\c`), math.NaN()},
		{"two spaces", "go_gc_ratio", 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := m[tc.key]
			if !ok || (got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want))) {
				t.Fatalf("%s = %v (present %v), want %v; have %v", tc.key, got, ok, tc.want, m)
			}
		})
	}
	if len(m) != 5 {
		t.Fatalf("%d series, want 5: %v", len(m), m)
	}
	for _, bad := range []string{"sluice_x", `sluice_x{a="b} 1`, "sluice_x{a} 1", "sluice_x one"} {
		if _, err := cluster.ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q): no error", bad)
		}
	}
}

// TestStartFailure: a broker that cannot start makes Start fail with the
// end of its log, after stopping everything it started.
func TestStartFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw and sluiced")
	}
	if binErr != nil {
		t.Fatal(binErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := cluster.Config{Dir: dir, Sluiced: sluicedPath, VersityGW: versitygwPath, ExtraArgs: []string{"--no-such-flag"}}
	c, err := cluster.Start(ctx, cfg)
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start with an unknown sluiced flag succeeded")
	}
	for _, want := range []string{"exited before it was ready", "no-such-flag", "last lines of"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start's error lacks %q:\n%v", want, err)
		}
	}
	cfg.ExtraArgs = nil
	if _, err := cluster.Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "already holds a cluster") {
		t.Errorf("Start on a used work dir: %v", err)
	}
}
