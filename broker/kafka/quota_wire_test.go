package kafka_test

// Quotas over the wire for the keys quota_test.go does not cover:
// producer_record_rate, request_percentage and inflight_requests, each
// against a real broker with franz-go clients (or, for what a client
// library would not send, a raw connection).

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/broker/kafka/quotaadmit"
	"github.com/sluice-mq/sluice/broker/quota"
)

// throttleSum adds up the throttle_time_ms a franz-go client was told.
type throttleSum struct {
	n     atomic.Int64
	total atomic.Int64 // nanoseconds
}

func (h *throttleSum) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		h.total.Add(int64(d))
	}
}

// TestProduceRecordRateHeld: acme's franz-go producer of small records, as
// fast as it can, is held to producer_record_rate (±15%: the records are
// counted from the batches' headers, and a request holds at most 16) and
// is told throttle_time_ms in the produce responses; globex, producing at
// once on the same broker without the quota, is not throttled and goes far
// faster.
func TestProduceRecordRateHeld(t *testing.T) {
	const rate = 400 // records/s
	warm, span := quotaSpan()
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.ProducerRecordRate: rate}})
	opts := []kgo.Opt{kgo.ProducerLinger(0), kgo.MaxBufferedRecords(16), kgo.ProducerBatchCompression(kgo.NoCompression())}
	var annThr, gusThr throttles
	ann := tenantClient(t, sb, "ann", append(opts, kgo.WithHooks(&annThr))...)
	gus := tenantClient(t, sb, "gus", append(opts, kgo.WithHooks(&gusThr))...)
	createTopics(t, ann, "in")
	createTopics(t, gus, "in")

	ctx, cancel := context.WithTimeout(context.Background(), warm+span+time.Second)
	defer cancel()
	value := make([]byte, 64)
	produce := func(cl *kgo.Client, m *rateMeter, wg *sync.WaitGroup) {
		defer wg.Done()
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Topic: "in", Value: value}, func(_ *kgo.Record, err error) {
				if err == nil {
					m.add(1)
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

	got := annRate.rate(warm, span)
	if math.Abs(got-rate) > 0.15*rate {
		t.Errorf("acme produced %.0f records/s, want %d ±15%%", got, rate)
	} else {
		t.Logf("acme produce: %.0f records/s (quota %d)", got, rate)
	}
	if annThr.n.Load() == 0 {
		t.Error("acme's producer was never told throttle_time_ms")
	}
	if g := gusRate.rate(warm, span); g < 4*rate || gusThr.n.Load() != 0 {
		t.Errorf("globex (no quota) produced %.0f records/s with %d throttles, want well above %d and none", g, gusThr.n.Load(), rate)
	}
}

// TestRequestPercentageHeld: acme's request_percentage is 0.02% of one
// handler thread (0.2 ms of handler time a second: a Metadata request of a
// tenant without topics takes a few microseconds of handler time, so each
// one owes some 10 ms). A franz-go client of acme sending Metadata
// requests back to back is told throttle_time_ms, and is held for much of
// the run (it owes its handler time back at that rate); globex, doing the
// same at once without the quota, is never throttled and is answered many
// times as often.
func TestRequestPercentageHeld(t *testing.T) {
	const span = 5 * time.Second
	sb, _ := startQuotaBroker(t, quota.Static{"acme": {quota.RequestPercentage: 0.02}})
	var annThr, gusThr throttleSum
	ann := tenantClient(t, sb, "ann", kgo.WithHooks(&annThr))
	gus := tenantClient(t, sb, "gus", kgo.WithHooks(&gusThr))

	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var annN, gusN atomic.Int64
	ask := func(cl *kgo.Client, n *atomic.Int64, wg *sync.WaitGroup) {
		defer wg.Done()
		for ctx.Err() == nil {
			req := kmsg.NewPtrMetadataRequest()
			if _, err := req.RequestWith(ctx, cl); err == nil {
				n.Add(1)
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go ask(ann, &annN, &wg)
	go ask(gus, &gusN, &wg)
	brokertest.WaitGroupWithin(t, &wg, span+30*time.Second, "clients")

	told := time.Duration(annThr.total.Load())
	t.Logf("acme: %d requests answered, told to wait %v in %d responses; globex: %d requests", annN.Load(), told, annThr.n.Load(), gusN.Load())
	if annThr.n.Load() == 0 || told < span/3 {
		t.Errorf("acme was told throttle_time_ms %d times, %v in all over %v; want at least a third of the run held", annThr.n.Load(), told, span)
	}
	if gusThr.n.Load() != 0 {
		t.Errorf("globex (no quota) was throttled %d times", gusThr.n.Load())
	}
	if annN.Load() == 0 || annN.Load()*5 > gusN.Load() {
		t.Errorf("acme was answered %d requests and globex %d; want acme served, and held far below globex", annN.Load(), gusN.Load())
	}
}

// joinRequest is a JoinGroup v3 of a new member (v3 needs no member id
// first) whose rebalance timeout is rebalance.
func joinRequest(group string, rebalance time.Duration) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.SetVersion(3)
	r.Group = group
	r.SessionTimeoutMillis = 30000
	r.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{}
	r.Protocols = append(r.Protocols, p)
	return r
}

// readJoinResponse reads the JoinGroup v3 response of correlation corr.
func readJoinResponse(t *testing.T, c *rawConn, corr int32) *kmsg.JoinGroupResponse {
	t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		t.Fatalf("join response %d: %v", corr, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		t.Fatalf("join response %d: %v", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatalf("decode join response: %v", err)
	}
	return resp
}

// TestInflightRequestsHeld: a connection of acme, whose inflight_requests
// is 1, sends two JoinGroup requests back to back, each parked by the
// coordinator for a rebalance timeout (a member of each group that will
// not rejoin). The broker reads the second only once the first is
// answered, so the two waits add up; both are answered, without an error
// (the connection is held, not refused), and the time held is counted in
// sluice_tenant_throttle_seconds_total under inflight_requests. A
// connection of globex, without the quota, doing the same has both parked
// at once.
func TestInflightRequestsHeld(t *testing.T) {
	const rebalance = 3 * time.Second
	reg := prometheus.NewRegistry()
	m := quota.NewMeters(quota.Static{"acme": {quota.InflightRequests: 1}}, 0, quota.NewMetrics(reg))
	sb := startSecureBroker(t, nil, kafka.WithCredentials(tenantUsers(t)), kafka.WithAdmitter(quotaadmit.New(m)))
	login := func(user string) *rawConn {
		c := dialRaw(t, sb.addr["SASL_PLAINTEXT"], nil)
		if ar := scramLogin(t, c, auth.MechanismScramSHA512, user, user+"-pw"); ar.ErrorCode != 0 {
			t.Fatalf("login %s: %d", user, ar.ErrorCode)
		}
		return c
	}
	pipelined := func(user string) time.Duration {
		setup := login(user)
		groups := []string{"g1", "g2"}
		for _, g := range groups { // a first member, stable, which will not rejoin
			resp, err := setup.roundTrip(joinRequest(g, rebalance))
			if err != nil || resp.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
				t.Fatalf("%s: first member of %s: %v %+v", user, g, err, resp)
			}
			jr := resp.(*kmsg.JoinGroupResponse)
			sync := kmsg.NewPtrSyncGroupRequest()
			sync.SetVersion(3)
			sync.Group, sync.Generation, sync.MemberID = g, jr.Generation, jr.MemberID
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = jr.MemberID, []byte{}
			sync.GroupAssignment = append(sync.GroupAssignment, a)
			if resp, err := setup.roundTrip(sync); err != nil || resp.(*kmsg.SyncGroupResponse).ErrorCode != 0 {
				t.Fatalf("%s: sync the first member of %s: %v %+v", user, g, err, resp)
			}
		}
		c := login(user)
		start := time.Now()
		first := c.corr + 1
		for i, g := range groups {
			if _, err := c.nc.Write(brokertest.EncodeRequest(joinRequest(g, rebalance), first+int32(i))); err != nil {
				t.Fatal(err)
			}
		}
		for i, g := range groups {
			if resp := readJoinResponse(t, c, first+int32(i)); resp.ErrorCode != 0 {
				t.Fatalf("%s: the join of %s answered error %d", user, g, resp.ErrorCode)
			}
		}
		return time.Since(start)
	}
	held, free := pipelined("ann"), pipelined("gus")
	t.Logf("two parked joins pipelined: acme %v, globex %v (rebalance timeout %v)", held, free, rebalance)
	if held < 2*rebalance-rebalance/4 {
		t.Errorf("acme at inflight_requests 1: both joins answered in %v, want the second read only after the first (about %v)", held, 2*rebalance)
	}
	if free >= 2*rebalance-rebalance/4 {
		t.Errorf("globex without the quota: both joins answered in %v, want them parked at once (about %v)", free, rebalance)
	}
	// The time held counts as a throttle of acme by inflight_requests.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var acme, globex float64
	for _, mf := range mfs {
		if mf.GetName() != "sluice_tenant_throttle_seconds_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] != quota.InflightRequests {
				continue
			}
			switch labels["tenant"] {
			case "acme":
				acme += mt.GetCounter().GetValue()
			case "globex":
				globex += mt.GetCounter().GetValue()
			}
		}
	}
	if acme < (rebalance-rebalance/4).Seconds() || globex != 0 {
		t.Errorf("sluice_tenant_throttle_seconds_total{reason=inflight_requests}: acme %.2fs, globex %.2fs; want about %v and 0", acme, globex, rebalance)
	}
}
