package e2e

// Per-tenant rate quotas against the real sluiced binary with real clients:
// franz-go, kafka-go (which never waits for throttle_time_ms), kcat and
// confluent-kafka-python (librdkafka), over a SASL_PLAINTEXT listener with
// security on. Tenants, their SCRAM users and their quotas are made over
// the HTTP admin API by the bootstrap admin, as an operator would.
//
// A rate is read from the broker's own count, sluice_tenant_bytes_in_total
// or sluice_tenant_bytes_out_total of the tenant, before and after the
// measurement window: that count is what the quota promises to hold.
//
// In the rate tests each client runs as a tenant of its own (acme-franz,
// acme-kcat, ...) with the same quota, all at once, so that the default run
// of the file stays under a minute and a half: a quota is per tenant, so
// the clients do not share a budget. The window is 15 s, 60 s with
// SLUICE_QUOTA_SOAK=1. SLUICE_QUOTA_E2E_OFF=1 leaves every quota unset, to
// show that each test fails without it.
//
// These tests judge rates to ±10% over seconds, with client processes that
// must keep offering more than the quota: on a loaded machine, and under
// `make test`'s race detector (which slows the in-process clients several
// times), a client falls behind its quota for its own reasons. So they run
// only when asked, with SLUICE_QUOTA_E2E=1 (`make quota-e2e`); `make test`
// keeps the in-process quota tests of broker/kafka and broker.
//
// Invariant: every client process a test starts is killed and waited for
// before runWindow returns; every broker is stopped by startBroker's cleanup.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/quota"
)

const quotaRate = 256 << 10 // bytes/s, producer_byte_rate or consumer_byte_rate

// quotaWindow is the warm-up (the first burst of the token bucket and the
// clients' connecting) and the measured span after it.
func quotaWindow() (warm, span time.Duration) {
	if os.Getenv("SLUICE_QUOTA_SOAK") != "" {
		return 3 * time.Second, 60 * time.Second
	}
	return 3 * time.Second, 15 * time.Second
}

func quotasOff() bool { return os.Getenv("SLUICE_QUOTA_E2E_OFF") != "" }

// requireQuotaE2E skips the test unless SLUICE_QUOTA_E2E or
// SLUICE_QUOTA_SOAK is set (see the file's header).
func requireQuotaE2E(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_QUOTA_E2E") == "" && os.Getenv("SLUICE_QUOTA_SOAK") == "" {
		t.Skip("rate measurements with real clients: run with SLUICE_QUOTA_E2E=1 (make quota-e2e)")
	}
}

// quotaBroker is one secure sluiced and its bootstrap admin.
type quotaBroker struct {
	*broker
}

func startQuotaBroker(t *testing.T) quotaBroker {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(pw, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return quotaBroker{startBroker(t, brokerOptions{saslListener: true, extraArgs: []string{
		"--security", "--admin-password-file", pw, "--allow-everyone-if-no-acl-found",
	}})}
}

// admin calls the HTTP admin API as the bootstrap admin and fails the test
// unless the status is want.
func (b quotaBroker) admin(t testing.TB, want int, method, path, body string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+b.httpAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", "admin-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, resp.StatusCode, want, out)
	}
}

// tenant creates tenant with one SCRAM user, user+"-pw", and sets its
// quotas unless SLUICE_QUOTA_E2E_OFF is set.
func (b quotaBroker) tenant(t testing.TB, tenant, user string, quotas map[string]int64) {
	t.Helper()
	b.admin(t, http.StatusCreated, "POST", "/v1/tenants", fmt.Sprintf(`{"name":%q}`, tenant))
	b.admin(t, http.StatusCreated, "POST", "/v1/users",
		fmt.Sprintf(`{"name":%q,"tenant":%q,"password":%q}`, user, tenant, user+"-pw"))
	if len(quotas) == 0 || quotasOff() {
		return
	}
	body, err := json.Marshal(map[string]any{"set": quotas})
	if err != nil {
		t.Fatal(err)
	}
	b.admin(t, http.StatusOK, "PUT", "/v1/tenants/"+tenant+"/quotas", string(body))
}

// tenantBytes reads the broker's count of a tenant's bytes; dir is "in"
// (produce) or "out" (fetch).
func (b quotaBroker) tenantBytes(t testing.TB, dir, tenant string) float64 {
	t.Helper()
	code, body := httpGet(t, "http://"+b.httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", code)
	}
	return parseMetrics(t, body)[seriesKey("sluice_tenant_bytes_"+dir+"_total", "tenant", tenant)]
}

// fsyncCounts are the broker's fsync histogram's count and the counts
// above 3.2 ms and above 6.4 ms (two of its bucket bounds).
type fsyncCounts struct{ all, over3, over6 float64 }

func (b quotaBroker) fsyncs(t testing.TB) fsyncCounts {
	t.Helper()
	code, body := httpGet(t, "http://"+b.httpAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", code)
	}
	m := parseMetrics(t, body)
	const h = "sluice_wal_fsync_duration_seconds"
	all := m[seriesKey(h+"_count")]
	return fsyncCounts{all: all, over3: all - m[seriesKey(h+"_bucket", "le", "0.0032")], over6: all - m[seriesKey(h+"_bucket", "le", "0.0064")]}
}

// since describes the fsyncs between c0 and c.
func (c fsyncCounts) since(c0 fsyncCounts) string {
	return fmt.Sprintf("%.0f, %.0f over 3.2 ms, %.0f over 6.4 ms", c.all-c0.all, c.over3-c0.over3, c.over6-c0.over6)
}

// franzSCRAM is a franz-go client of user over SCRAM-SHA-512.
func (b quotaBroker) franz(t testing.TB, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	mech := scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()
	return newClient(t, b.broker, append([]kgo.Opt{kgo.SASL(mech)}, opts...)...)
}

// rdkafkaSASL are librdkafka's settings for user, as -X pairs.
func rdkafkaSASL(user string) []string {
	return []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=SCRAM-SHA-512",
		"sasl.username=" + user, "sasl.password=" + user + "-pw"}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func checkQuotaRate(t *testing.T, what string, got float64) {
	t.Helper()
	if math.Abs(got-quotaRate) > 0.10*quotaRate {
		t.Errorf("%s: %.0f bytes/s, want %d ±10%%", what, got, quotaRate)
		return
	}
	t.Logf("%s: %.0f bytes/s (quota %d, %+.1f%%)", what, got, quotaRate, (got/quotaRate-1)*100)
}

// runWindow runs every client until the window ends, reading the broker's
// counts of each tenant at warm and at warm+span, and checks each rate.
func runWindow(t *testing.T, b quotaBroker, clients map[string]func(ctx context.Context) error, dir string) {
	t.Helper()
	warm, span := quotaWindow()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { // also on t.Fatal: no client outlives the window
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("clients did not stop within 30s of the window's end")
		}
	}()
	errs := make(chan error, len(clients))
	for tenant, run := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", tenant, err)
			}
		}()
	}
	waitOrFail := func(d time.Duration) {
		select {
		case err := <-errs:
			t.Fatalf("client stopped early: %v", err)
		case <-time.After(d):
		}
	}
	waitOrFail(warm)
	before := map[string]float64{}
	for tenant := range clients {
		before[tenant] = b.tenantBytes(t, dir, tenant)
	}
	start := time.Now()
	waitOrFail(span)
	elapsed := time.Since(start)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range clients {
			if !yield(k) {
				return
			}
		}
	})
	for _, tenant := range names {
		got := (b.tenantBytes(t, dir, tenant) - before[tenant]) / elapsed.Seconds()
		checkQuotaRate(t, tenant+" bytes "+dir, got)
	}
}

// runProcess runs a client program until ctx ends, feeding it stdin when
// given; an exit before ctx ends is an error carrying its stderr.
func runProcess(ctx context.Context, stdin func(w io.Writer) error, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	var in io.WriteCloser
	if stdin != nil {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if stdin != nil {
		go func() {
			stdin(in) // returns when the pipe breaks or ctx ends
			in.Close()
		}()
	}
	select {
	case err := <-exited:
		return fmt.Errorf("%s exited early: %w: %s", name, err, lastN(stderr.String(), 2000))
	case <-ctx.Done():
		cmd.Process.Kill()
		<-exited
		return nil
	}
}

// lines writes newline-ended random lines of n bytes until ctx ends or the
// reader goes away.
func lines(ctx context.Context, n int) func(w io.Writer) error {
	return func(w io.Writer) error {
		line := make([]byte, n)
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		raw := randomBytes(n)
		for i := range line {
			line[i] = alphabet[int(raw[i])%len(alphabet)]
		}
		line[n-1] = '\n'
		for ctx.Err() == nil {
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		return nil
	}
}

const confluentProducer = `
import sys, signal
from confluent_kafka import Producer
addr, user, topic = sys.argv[1:4]
p = Producer({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": user + "-pw",
    "linger.ms": 5, "compression.type": "none", "acks": "all"})
value = b"x" * 16384
while True:
    try:
        p.produce(topic, value)
    except BufferError:
        p.poll(0.05)
    p.poll(0)
`

// TestQuotaProduceClients: four producers of four tenants, each with
// producer_byte_rate 256 KiB/s and each producing as fast as it can, are
// held to it ±10% by the broker's count of their bytes: franz-go (which
// honours throttle_time_ms), kafka-go (which ignores it), kcat and
// confluent-kafka-python (librdkafka).
func TestQuotaProduceClients(t *testing.T) {
	requireQuotaE2E(t)
	kcat := requireTool(t, "kcat")
	b := startQuotaBroker(t)
	producerQuota := map[string]int64{"producer_byte_rate": quotaRate}
	clients := map[string]func(ctx context.Context) error{}

	b.tenant(t, "acme-franz", "ann", producerQuota)
	ann := b.franz(t, "ann", kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	clients["acme-franz"] = func(ctx context.Context) error {
		value := randomBytes(16 << 10)
		for ctx.Err() == nil {
			ann.Produce(ctx, &kgo.Record{Topic: "in", Value: value}, nil)
		}
		return nil
	}

	b.tenant(t, "acme-kgo", "ken", producerQuota)
	mech, err := kgoscram.Mechanism(kgoscram.SHA512, "ken", "ken-pw")
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.kafkaAddr), Topic: "in", Transport: &kafka.Transport{SASL: mech},
		RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true, BatchSize: 4, BatchTimeout: time.Millisecond}
	t.Cleanup(func() { w.Close() })
	clients["acme-kgo"] = func(ctx context.Context) error {
		value := randomBytes(16 << 10)
		msgs := []kafka.Message{{Value: value}, {Value: value}, {Value: value}, {Value: value}}
		var wg sync.WaitGroup
		for range 4 { // several writes in flight, none waiting on throttle_time_ms
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					w.WriteMessages(ctx, msgs...) // the first ones create the topic
				}
			}()
		}
		wg.Wait()
		return nil
	}

	b.tenant(t, "acme-kcat", "kim", producerQuota)
	clients["acme-kcat"] = func(ctx context.Context) error {
		args := []string{"-P", "-b", b.kafkaAddr, "-t", "in", "-z", "none"}
		for _, x := range rdkafkaSASL("kim") {
			args = append(args, "-X", x)
		}
		return runProcess(ctx, lines(ctx, 8<<10), kcat, args...)
	}

	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Logf("confluent-kafka-python left out: %v: %s", err, out)
		if os.Getenv("CI") != "" {
			t.Fatalf("confluent_kafka is required in CI")
		}
	} else {
		b.tenant(t, "acme-py", "pat", producerQuota)
		clients["acme-py"] = func(ctx context.Context) error {
			return runProcess(ctx, nil, python, "-c", confluentProducer, b.kafkaAddr, "pat", "in")
		}
	}
	runWindow(t, b, clients, "in")
}

// prefill writes enough records to topic as user for a consumer held to
// quotaRate over the whole window, and a half more.
func prefill(t *testing.T, b quotaBroker, user, topic string) {
	t.Helper()
	warm, span := quotaWindow()
	total := int((warm+span).Seconds()*quotaRate) * 3 / 2
	// Batches of 64 KiB: a fetch returns at least one whole batch, so with
	// franz-go's 1 MB batches a 15 s window at 256 KiB/s read three, four
	// or five of them (-20% or +5% of the quota, whatever the broker did).
	cl := b.franz(t, user, kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := randomBytes(16 << 10)
	var recs []*kgo.Record
	for n := 0; n < total; n += len(value) {
		recs = append(recs, &kgo.Record{Topic: topic, Value: value})
	}
	for len(recs) > 0 {
		k := min(len(recs), 64)
		if err := cl.ProduceSync(ctx, recs[:k]...).FirstErr(); err != nil {
			t.Fatalf("prefill %s as %s: %v", topic, user, err)
		}
		recs = recs[k:]
	}
}

// TestQuotaConsumeClients: three consumers of three tenants, each with
// consumer_byte_rate 256 KiB/s and each reading a topic from its start as
// fast as it can, are held to it ±10% by the broker's count of the record
// bytes it returned: franz-go, kafka-go's Reader and kcat -C (librdkafka).
func TestQuotaConsumeClients(t *testing.T) {
	requireQuotaE2E(t)
	kcat := requireTool(t, "kcat")
	b := startQuotaBroker(t)
	consumerQuota := map[string]int64{"consumer_byte_rate": quotaRate}
	clients := map[string]func(ctx context.Context) error{}

	b.tenant(t, "acme-franz", "ann", consumerQuota)
	prefill(t, b, "ann", "out")
	cl := b.franz(t, "ann", kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	clients["acme-franz"] = func(ctx context.Context) error {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	}

	b.tenant(t, "acme-kgo", "ken", consumerQuota)
	prefill(t, b, "ken", "out")
	mech, err := kgoscram.Mechanism(kgoscram.SHA512, "ken", "ken-pw")
	if err != nil {
		t.Fatal(err)
	}
	clients["acme-kgo"] = func(ctx context.Context) error {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.kafkaAddr}, Topic: "out", Partition: 0,
			MaxBytes: 4 << 20, Dialer: &kafka.Dialer{Timeout: 10 * time.Second, SASLMechanism: mech}})
		defer r.Close()
		for ctx.Err() == nil {
			if _, err := r.ReadMessage(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
		return nil
	}

	b.tenant(t, "acme-kcat", "kim", consumerQuota)
	prefill(t, b, "kim", "out")
	clients["acme-kcat"] = func(ctx context.Context) error {
		args := []string{"-C", "-b", b.kafkaAddr, "-t", "out", "-o", "beginning", "-q"}
		for _, x := range rdkafkaSASL("kim") {
			args = append(args, "-X", x)
		}
		return runProcess(ctx, nil, kcat, args...)
	}
	runWindow(t, b, clients, "out")
}

// paced is what a producer paced at a fixed rate got acknowledged: the
// acknowledged records per second and the ack latency p99.
type paced struct {
	perSec float64
	p99    time.Duration
}

// producePaced produces one record of size bytes every interval for span
// after warm, with cl, and measures the records sent after warm. It waits
// for every record it sent.
func producePaced(t *testing.T, cl *kgo.Client, topic string, size int, interval, warm, span time.Duration) paced {
	t.Helper()
	return pacedOf(t, topic, producePacedLat(t, cl, topic, size, interval, warm, span), span)
}

// pacedOf is the throughput over span and the p99 of the ack latencies lat
// (sorted here), which it logs.
func pacedOf(t *testing.T, topic string, lat []time.Duration, span time.Duration) paced {
	t.Helper()
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	t.Logf("%s: p50 %v mean %v p90 %v p99 %v max %v", topic, lat[len(lat)/2], sum/time.Duration(len(lat)), lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1])
	return paced{perSec: float64(len(lat)) / span.Seconds(), p99: lat[len(lat)*99/100]}
}

// producePacedLat is producePaced's measurement: the ack latency of each
// record sent after warm, in the order acknowledged.
func producePacedLat(t *testing.T, cl *kgo.Client, topic string, size int, interval, warm, span time.Duration) []time.Duration {
	t.Helper()
	value := randomBytes(size)
	var mu sync.Mutex
	var lat []time.Duration
	var failed error
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), warm+span+30*time.Second)
	defer cancel()
	for now := start; now.Sub(start) < warm+span; now = <-tick.C {
		sent, counted := time.Now(), now.Sub(start) >= warm
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
			} else if counted {
				lat = append(lat, time.Since(sent))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush %s: %v", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		t.Fatalf("produce %s: %v", topic, failed)
	}
	return lat
}

// noisyProduce offers acme's records until ctx ends: 16 KiB records 640
// times a second, ten times its quota, with franz-go's default batching.
func noisyProduce(ctx context.Context, cl *kgo.Client) {
	value := randomBytes(16 << 10)
	tick := time.NewTicker(time.Second / (10 * quotaRate / (16 << 10)))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			cl.Produce(ctx, &kgo.Record{Topic: "noisy", Value: value}, nil)
		}
	}
}

// noisyClientOpts are acme's client options in TestQuotaNoisyNeighbour.
func noisyClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(256),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
}

// TestNoisyProducerHelper is acme's producer process of
// TestQuotaNoisyNeighbour (this test binary run again, with
// SLUICE_NOISY_HELPER naming the broker's SASL listener); it produces until
// its standard input closes.
func TestNoisyProducerHelper(t *testing.T) {
	addr := os.Getenv("SLUICE_NOISY_HELPER")
	if addr == "" {
		t.Skip("acme's producer process of TestQuotaNoisyNeighbour")
	}
	mech := scram.Auth{User: "ann", Pass: "ann-pw"}.AsSha512Mechanism()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(mech)}, noisyClientOpts()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // ends when the parent closes it, or dies
		cancel()
	}()
	noisyProduce(ctx, cl)
}

// runHelper runs test (a helper of this binary) in a process of its own,
// with env added, until ctx ends; then closes its standard input and waits
// for it (killing it after 10 s). An early exit is an error.
func runHelper(ctx context.Context, test string, env ...string) error {
	return runHelperProc(ctx, nil, test, env...)
}

// runHelperProc is runHelper, calling started (when not nil) with the
// helper's process once it runs.
func runHelperProc(ctx context.Context, started func(*os.Process), test string, env ...string) error {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, "SLUICE_E2E_SLUICED="+sluicedPath)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if started != nil {
		started(cmd.Process)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return fmt.Errorf("%s exited early: %v: %s", test, err, lastN(out.String(), 2000))
	case <-ctx.Done():
	}
	in.Close()
	_ = cmd.Process.Signal(syscall.SIGCONT) // if it was left stopped
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	return nil
}

// TestQuotaNoisyNeighbour: globex produces 1 KiB records at 200/s, first
// alone, then while acme (producer_byte_rate 256 KiB/s) tries to produce at
// ten times its quota on the same broker, from a process of its own
// (SLUICE_NOISY_SAME_PROCESS=1: from the test's, beside globex's client). Held to its quota, acme costs
// globex little: globex's ack p99 and throughput stay near what they were
// alone. The default 15 s run asserts globex's throughput within 20% and
// acme held to its quota +10% while globex runs; the ack p99 within 20% is
// asserted only with SLUICE_QUOTA_SOAK=1 (60 s windows), being noise at
// 15 s on a shared 2-core machine.
func TestQuotaNoisyNeighbour(t *testing.T) {
	requireQuotaE2E(t)
	b := startQuotaBroker(t)
	const acmeQuota = quotaRate
	b.tenant(t, "acme", "ann", map[string]int64{"producer_byte_rate": acmeQuota})
	b.tenant(t, "globex", "gus", nil)
	warm, span := quotaWindow()
	gus := b.franz(t, "gus", kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	const (
		globexSize     = 1 << 10
		globexInterval = 5 * time.Millisecond
	)
	syncs := b.fsyncs(t)
	alone := producePaced(t, gus, "quiet", globexSize, globexInterval, warm, span)
	t.Logf("globex alone: %.1f acks/s, ack p99 %v; the broker's fsyncs: %s", alone.perSec, alone.p99, b.fsyncs(t).since(syncs))

	// acme: 10 × its quota, as 16 KiB records 640 times a second, from a
	// process of its own (as a tenant's clients run on machines of their
	// own), so that its client's CPU and garbage are not globex's.
	var ann *kgo.Client
	if os.Getenv("SLUICE_NOISY_SAME_PROCESS") != "" { // for comparison: acme's client beside globex's
		ann = b.franz(t, "ann", noisyClientOpts()...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	noisyDone := make(chan struct{})
	var noisyErr error
	go func() {
		defer close(noisyDone)
		if ann != nil {
			noisyProduce(ctx, ann)
			return
		}
		noisyErr = runHelper(ctx, "TestNoisyProducerHelper", "SLUICE_NOISY_HELPER="+b.kafkaAddr)
	}()
	// acme's first burst passes, then both are measured over the same span.
	select {
	case <-noisyDone:
		t.Fatalf("acme's producer stopped early: %v", noisyErr)
	case <-time.After(warm):
	}
	before, start, syncs := b.tenantBytes(t, "in", "acme"), time.Now(), b.fsyncs(t)
	together := producePaced(t, gus, "quiet", globexSize, globexInterval, 0, span)
	acmeRate := (b.tenantBytes(t, "in", "acme") - before) / time.Since(start).Seconds()
	t.Logf("the broker's fsyncs beside acme: %s", b.fsyncs(t).since(syncs))
	cancel()
	select {
	case <-noisyDone:
	case <-time.After(10 * time.Second):
		t.Fatal("acme's producer did not stop within 10s")
	}
	t.Logf("globex with acme at 10x its quota: %.1f acks/s, ack p99 %v (acme got %.0f bytes/s)", together.perSec, together.p99, acmeRate)

	if together.perSec < 0.8*alone.perSec {
		t.Errorf("globex throughput %.1f acks/s next to acme, %.1f alone: more than 20%% lower", together.perSec, alone.perSec)
	}
	// What keeps globex whole is acme being held while it runs.
	if acmeRate > 1.1*acmeQuota {
		t.Errorf("acme got %.0f bytes/s while globex ran, above its quota %d +10%%", acmeRate, acmeQuota)
	}
	if os.Getenv("SLUICE_QUOTA_SOAK") == "" {
		// Over 15 s on a shared 2-core machine globex's own p99 alone
		// varies by several times from run to run, and no bound on the
		// ratio separates acme held from acme unheld; the soak asserts it.
		return
	}
	if float64(together.p99) > 1.2*float64(alone.p99) {
		t.Errorf("globex ack p99 %v next to acme, %v alone: more than 20%% higher", together.p99, alone.p99)
	}
}

// TestQuotaNoisyNeighbourAlternating is TestQuotaNoisyNeighbour measured
// in alternating windows, so that the machine's drift (its disk's own
// stalls come and go over minutes) falls on both sides alike: acme's
// producer process (ten times its 256 KiB/s quota) runs throughout, and is
// stopped (SIGSTOP) for globex's alone windows and resumed (SIGCONT) a
// second before each beside window. Rounds of one alone and one beside
// window each: SLUICE_NOISY_ROUNDS (default 6) of SLUICE_NOISY_WINDOW
// (default 10 s). It asserts globex's throughput and ack p99 beside acme
// (all beside windows pooled) within 20% of alone (all alone windows
// pooled), and acme held to its quota +10% while it runs, plus the one
// second's allowance (quota.DefaultBurst) its bucket refills each time it is
// stopped.
// Gated by SLUICE_QUOTA_SOAK (about three minutes).
func TestQuotaNoisyNeighbourAlternating(t *testing.T) {
	if os.Getenv("SLUICE_QUOTA_SOAK") == "" {
		t.Skip("a three-minute measurement: run with SLUICE_QUOTA_SOAK=1")
	}
	rounds, window := 6, 10*time.Second
	if v, err := strconv.Atoi(os.Getenv("SLUICE_NOISY_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLUICE_NOISY_WINDOW")); err == nil && v > 0 {
		window = v
	}
	b := startQuotaBroker(t)
	const acmeQuota = quotaRate
	b.tenant(t, "acme", "ann", map[string]int64{"producer_byte_rate": acmeQuota})
	b.tenant(t, "globex", "gus", nil)
	gus := b.franz(t, "gus", kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	const (
		globexSize     = 1 << 10
		globexInterval = 5 * time.Millisecond
	)
	producePacedLat(t, gus, "quiet", globexSize, globexInterval, 0, 2*time.Second) // the topic, the connections

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	procc := make(chan *os.Process, 1)
	noisyDone := make(chan struct{})
	var noisyErr error
	go func() {
		defer close(noisyDone)
		noisyErr = runHelperProc(ctx, func(p *os.Process) { procc <- p }, "TestNoisyProducerHelper", "SLUICE_NOISY_HELPER="+b.kafkaAddr)
	}()
	var proc *os.Process
	select {
	case proc = <-procc:
	case <-noisyDone:
		t.Fatalf("acme's producer did not start: %v", noisyErr)
	}
	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := proc.Signal(sig); err != nil {
			t.Fatalf("signal acme's producer %v: %v", sig, err)
		}
	}
	time.Sleep(3 * time.Second) // acme's first burst passes
	var acmeBytes float64
	var acmeTime time.Duration
	var alone, beside []time.Duration
	for r := range rounds {
		signal(syscall.SIGSTOP)
		time.Sleep(time.Second) // acme's requests in flight are answered
		syncs := b.fsyncs(t)
		a := producePacedLat(t, gus, "quiet", globexSize, globexInterval, 0, window)
		t.Logf("round %d alone: %d acks; the broker's fsyncs: %s", r, len(a), b.fsyncs(t).since(syncs))
		before, resumed := b.tenantBytes(t, "in", "acme"), time.Now()
		signal(syscall.SIGCONT)
		time.Sleep(time.Second) // its allowance refilled while stopped is spent
		syncs = b.fsyncs(t)
		c := producePacedLat(t, gus, "quiet", globexSize, globexInterval, 0, window)
		t.Logf("round %d beside acme: %d acks; the broker's fsyncs: %s", r, len(c), b.fsyncs(t).since(syncs))
		alone, beside = append(alone, a...), append(beside, c...)
		signal(syscall.SIGSTOP)
		acmeBytes += b.tenantBytes(t, "in", "acme") - before
		acmeTime += time.Since(resumed)
	}
	signal(syscall.SIGCONT)
	acmeRate := acmeBytes / acmeTime.Seconds()
	allowed := 1.1*acmeQuota + float64(rounds)*acmeQuota*quota.DefaultBurst.Seconds()/acmeTime.Seconds()
	cancel()
	select {
	case <-noisyDone:
	case <-time.After(15 * time.Second):
		t.Fatal("acme's producer did not stop within 15s")
	}
	span := time.Duration(rounds) * window
	pa, pb := pacedOf(t, "globex alone", alone, span), pacedOf(t, "globex beside acme", beside, span)
	t.Logf("globex alone: %.1f acks/s, ack p99 %v; beside acme: %.1f acks/s, ack p99 %v (ratio %.2f); acme got %.0f bytes/s while it ran (quota %d, allowed %.0f)",
		pa.perSec, pa.p99, pb.perSec, pb.p99, float64(pb.p99)/float64(pa.p99), acmeRate, acmeQuota, allowed)
	if pb.perSec < 0.8*pa.perSec {
		t.Errorf("globex throughput %.1f acks/s beside acme, %.1f alone: more than 20%% lower", pb.perSec, pa.perSec)
	}
	if float64(pb.p99) > 1.2*float64(pa.p99) {
		t.Errorf("globex ack p99 %v beside acme, %v alone: more than 20%% higher", pb.p99, pa.p99)
	}
	if acmeRate > allowed {
		t.Errorf("acme got %.0f bytes/s while it ran, above its quota %d +10%% and a burst per round (%.0f)", acmeRate, acmeQuota, allowed)
	}
}
