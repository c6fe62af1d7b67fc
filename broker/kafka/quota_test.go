package kafka_test

// Quotas over the wire: a broker with SASL listeners and two tenants (acme
// with quotas, globex without), franz-go clients and a raw client that
// ignores throttle_time_ms. Each test runs ≤ 15 s; SLUICE_QUOTA_SOAK=1
// stretches each measurement to 60 s (make soak style runs).

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/kafka/quotaadmit"
	"github.com/sluice-mq/sluice/broker/quota"
)

// quotaSpan is how long a rate is measured (after a warm-up that lets the
// first burst window pass).
func quotaSpan() (warm, span time.Duration) {
	if os.Getenv("SLUICE_QUOTA_SOAK") != "" {
		return 3 * time.Second, 60 * time.Second
	}
	return 2 * time.Second, 9 * time.Second
}

// tenantUsers: ann is in acme, gus in globex; the password is user+"-pw".
func tenantUsers(t testing.TB) auth.CredentialLookup {
	tenants := map[string]string{"ann": "acme", "gus": "globex"}
	creds := map[string]auth.ScramCredential{}
	for u := range tenants {
		c, err := auth.NewScramCredential(auth.MechanismScramSHA512, u+"-pw", auth.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		creds[u] = c
	}
	return func(mechanism, user string) (auth.ScramCredential, string, bool) {
		c, ok := creds[user]
		return c, tenants[user], ok && mechanism == auth.MechanismScramSHA512
	}
}

// nopRegisterer registers nothing, for metrics nobody scrapes.
type nopRegisterer struct{}

func (nopRegisterer) Register(prometheus.Collector) error  { return nil }
func (nopRegisterer) MustRegister(...prometheus.Collector) {}
func (nopRegisterer) Unregister(prometheus.Collector) bool { return true }

// startQuotaBroker runs a broker enforcing limits; the meters are returned
// for the test to look at.
func startQuotaBroker(t *testing.T, limits quota.Static) (*secureBroker, *quota.Meters) {
	t.Helper()
	m := quota.NewMeters(limits, 0, nil)
	sb := startSecureBroker(t, nil, kafka.WithCredentials(tenantUsers(t)), kafka.WithAdmitter(quotaadmit.New(m)))
	return sb, m
}

// throttles counts the throttles a franz-go client was told of.
type throttles struct{ n atomic.Int64 }

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

func tenantClient(t *testing.T, sb *secureBroker, user string, opts ...kgo.Opt) *kgo.Client {
	return tenantClientB(t, sb, user, opts...)
}

func tenantClientB(t testing.TB, sb *secureBroker, user string, opts ...kgo.Opt) *kgo.Client {
	mech := scram.Auth{User: user, Pass: user + "-pw"}.AsSha512Mechanism()
	return sb.client(t, "SASL_PLAINTEXT", append([]kgo.Opt{kgo.SASL(mech)}, opts...)...)
}

func createTopics(t *testing.T, cl *kgo.Client, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
}

// rateMeter counts bytes by the time they were acknowledged and reports
// the rate over [from, from+span).
type rateMeter struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
	n     []int
}

func newRateMeter() *rateMeter { return &rateMeter{start: time.Now()} }

func (r *rateMeter) add(n int) {
	r.mu.Lock()
	r.at = append(r.at, time.Since(r.start))
	r.n = append(r.n, n)
	r.mu.Unlock()
}

func (r *rateMeter) rate(from, span time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for i, at := range r.at {
		if at >= from && at < from+span {
			total += r.n[i]
		}
	}
	return float64(total) / span.Seconds()
}

func checkRate(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.10*want {
		t.Errorf("%s: %.0f bytes/s, want %.0f ±10%%", what, got, want)
		return
	}
	t.Logf("%s: %.0f bytes/s (quota %.0f, %+.1f%%)", what, got, want, (got/want-1)*100)
}

// TestProduceByteRateHeld: acme's franz-go producer, as fast as it can, is
// held to producer_byte_rate ±10% and is told throttle_time_ms; globex,
// producing at once on the same broker, is not throttled and goes far
// faster.
func TestProduceByteRateHeld(t *testing.T) {
	const rate = 256 << 10
	warm, span := quotaSpan()
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.ProducerByteRate: rate}})
	var annThr, gusThr throttles
	ann := tenantClient(t, sb, "ann", kgo.WithHooks(&annThr), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(batchMax))
	gus := tenantClient(t, sb, "gus", kgo.WithHooks(&gusThr), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(batchMax))
	createTopics(t, ann, "in")
	createTopics(t, gus, "in")

	ctx, cancel := context.WithTimeout(context.Background(), warm+span+time.Second)
	defer cancel()
	value := randomValue(16 << 10)
	produce := func(cl *kgo.Client, m *rateMeter, wg *sync.WaitGroup) {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Topic: "in", Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					m.add(len(r.Value))
				}
			})
		}
	}
	annRate, gusRate := newRateMeter(), newRateMeter()
	var wg sync.WaitGroup
	wg.Add(2)
	go produce(ann, annRate, &wg)
	go produce(gus, gusRate, &wg)
	brokertest.WaitGroupWithin(t, &wg, warm+span+10*time.Second, "producers")

	// Record values are within 1% of the batches' bytes at 16 KiB each.
	checkRate(t, "acme produce", annRate.rate(warm, span), rate)
	if annThr.n.Load() == 0 {
		t.Error("acme's producer was never told throttle_time_ms")
	}
	if g := gusRate.rate(warm, span); g < 4*rate || gusThr.n.Load() != 0 {
		t.Errorf("globex (no quota) produced %.0f bytes/s with %d throttles, want well above %d and none", g, gusThr.n.Load(), rate)
	} else {
		t.Logf("globex produce: %.0f bytes/s, no throttle", g)
	}
}

// TestProduceIgnoringThrottleHeld: a raw client of acme that writes
// produce requests back to back on one connection (up to 16 unanswered)
// and never waits for throttle_time_ms is held all the same: the broker
// stops reading it. Every request it sent is answered, none with an error.
func TestProduceIgnoringThrottleHeld(t *testing.T) {
	const rate = 256 << 10
	warm, span := quotaSpan()
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.ProducerByteRate: rate}})
	createTopics(t, tenantClient(t, sb, "ann"), "in")

	c := dialRaw(t, sb.addr["SASL_PLAINTEXT"], nil)
	if ar := scramLogin(t, c, auth.MechanismScramSHA512, "ann", "ann-pw"); ar.ErrorCode != 0 {
		t.Fatalf("login: %d", ar.ErrorCode)
	}
	batch := brokertest.Batch(1000, -1, -1, -1, time.Now().UnixMilli())
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	acked := newRateMeter()
	stop := time.Now().Add(warm + span + time.Second)
	var sent, throttled, failed atomic.Int64
	first := c.corr + 1
	done := make(chan error, 1)
	slots := make(chan struct{}, 16) // a full pipeline, as a client's max in flight
	go func() {                      // the writer: never waits for a throttle
		deadline := time.NewTimer(time.Until(stop))
		defer deadline.Stop()
		for corr := first; ; corr++ {
			select {
			case slots <- struct{}{}:
			case <-deadline.C:
				done <- nil
				return
			}
			if _, err := c.nc.Write(brokertest.EncodeRequest(req, corr)); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
	}()
	r := bufio.NewReader(c.nc)
	writerDone := false
	for answered := int64(0); ; answered++ {
		if !writerDone && time.Now().After(stop) {
			if err := brokertest.RecvWithin(t, done, 20*time.Second, "writer"); err != nil {
				t.Fatalf("writer: %v", err)
			}
			writerDone = true
		}
		if writerDone && answered == sent.Load() {
			break
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := readProduceResponse(r, first+int32(answered))
		if err != nil {
			t.Fatalf("response %d: %v", answered, err)
		}
		if resp.ThrottleMillis > 0 {
			throttled.Add(1)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			failed.Add(1)
		}
		acked.add(len(batch))
		<-slots
	}
	checkRate(t, "acme produce, throttle ignored", acked.rate(warm, span), rate)
	if throttled.Load() == 0 || failed.Load() != 0 {
		t.Errorf("%d responses carried throttle_time_ms and %d an error; want some and none", throttled.Load(), failed.Load())
	}
}

// batchMax keeps the tests' batches to two records of 16 KiB, so that
// a measurement window of a few seconds is not made of a few large
// batches (a fetch returns at least one whole batch, KIP-74).
const batchMax = 40 << 10

// randomValue is n incompressible bytes. The quotas charge the bytes on
// the wire, and franz-go compresses batches, so the tests' producers also
// send uncompressed (a batch of one repeated value compresses well).
func randomValue(n int) []byte {
	v := make([]byte, n)
	_, _ = rand.Read(v)
	return v
}

// readProduceResponse reads the produce response of correlation corr.
func readProduceResponse(r *bufio.Reader, corr int32) (*kmsg.ProduceResponse, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, errors.New("responses out of order")
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, err
	}
	return resp, nil
}

// TestFetchByteRateHeld: acme's franz-go consumer reading a backlog is held
// to consumer_byte_rate ±10%, each fetch capped to a tenth of a second of
// it (quota.FetchSlice).
func TestFetchByteRateHeld(t *testing.T) {
	const rate = 256 << 10
	warm, span := quotaSpan()
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.ConsumerByteRate: rate}})
	ann := tenantClient(t, sb, "ann", kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(batchMax))
	createTopics(t, ann, "backlog")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := randomValue(16 << 10)
	total := int(float64(rate)*(warm+span).Seconds()*2) / len(value)
	for i := 0; i < total; i++ {
		ann.Produce(ctx, &kgo.Record{Topic: "backlog", Value: value}, nil)
	}
	if err := ann.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var thr throttles
	reader := tenantClient(t, sb, "ann", kgo.WithHooks(&thr), kgo.ConsumeTopics("backlog"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	read := newRateMeter()
	rctx, rcancel := context.WithTimeout(context.Background(), warm+span+time.Second)
	defer rcancel()
	got := 0
	for rctx.Err() == nil {
		fs := reader.PollFetches(rctx)
		for _, r := range fs.Records() {
			read.add(len(r.Value))
			got++
		}
	}
	if got >= total {
		t.Fatalf("the reader read the whole backlog (%d records): the test measured nothing", got)
	}
	checkRate(t, "acme fetch", read.rate(warm, span), rate)
	if thr.n.Load() == 0 {
		t.Error("acme's consumer was never told throttle_time_ms")
	}
}

// TestTenantConnectionsQuota: acme may have two connections; a third,
// once it has authenticated, is closed (and counted); closing one lets a
// new one in. The first request of a connection over the limit is not
// answered.
func TestTenantConnectionsQuota(t *testing.T) {
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.Connections: 2}})
	login := func() *rawConn {
		c := dialRaw(t, sb.addr["SASL_PLAINTEXT"], nil)
		if ar := scramLogin(t, c, auth.MechanismScramSHA512, "ann", "ann-pw"); ar.ErrorCode != 0 {
			t.Fatalf("login: %d", ar.ErrorCode)
		}
		return c
	}
	a, b := login(), login()
	for _, c := range []*rawConn{a, b} {
		if _, err := c.roundTrip(metadataRequest()); err != nil {
			t.Fatalf("metadata within the limit: %v", err)
		}
	}
	third := login()
	if _, err := third.roundTrip(metadataRequest()); err == nil {
		t.Fatal("a third connection of acme was served")
	}
	a.nc.Close()
	brokertest.Eventually(t, 10*time.Second, "a new connection once one closed", func() bool {
		c := login()
		_, err := c.roundTrip(metadataRequest())
		return err == nil
	})
}

// TestConnectionCreationRateQuota: acme may open one connection a second;
// of connections opened back to back, one past the rate (it may run one
// connection into debt) is closed once it has authenticated, and counted;
// globex, without quotas, is not.
func TestConnectionCreationRateQuota(t *testing.T) {
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.ConnectionCreationRate: 1}})
	served := func(user string) bool {
		c := dialRaw(t, sb.addr["SASL_PLAINTEXT"], nil)
		if ar := scramLogin(t, c, auth.MechanismScramSHA512, user, user+"-pw"); ar.ErrorCode != 0 {
			t.Fatalf("login: %d", ar.ErrorCode)
		}
		_, err := c.roundTrip(metadataRequest())
		return err == nil
	}
	refused := 0
	for range 3 {
		if !served("ann") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("three connections of acme at once, over 1/s: none refused")
	}
	for i := range 3 {
		if !served("gus") {
			t.Fatalf("globex's connection %d refused", i)
		}
	}
	if got := refusedCount(t, sb, quota.RefusedCreationRate); got != float64(refused) {
		t.Fatalf("refused-connections metric %v, want %d", got, refused)
	}
}

// refusedCount is sluice_connections_refused_total{reason}.
func refusedCount(t *testing.T, sb *secureBroker, reason string) float64 {
	t.Helper()
	mfs, err := sb.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_connections_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
