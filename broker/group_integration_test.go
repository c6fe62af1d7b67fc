package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTestConfig lets sessions be short so tests run in seconds.
func groupTestConfig() CoordinatorConfig {
	c := DefaultCoordinatorConfig()
	c.MinSessionTimeout = 500 * time.Millisecond
	c.TickInterval = 50 * time.Millisecond
	return c
}

// startGroupBroker runs a broker with a coordinator config and returns it
// with a stop function (also run at cleanup; stopping twice is harmless).
func startGroupBroker(t *testing.T, cfg Config, ccfg CoordinatorConfig) (*Broker, func()) {
	t.Helper()
	cfg.Coordinator = ccfg
	return startStoppableBroker(t, cfg)
}

// cutDialer dials the broker and can cut every connection it made and
// refuse new ones: to the broker, the client has crashed.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("cut")
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) cutAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, c := range d.conns {
		c.Close()
	}
}

// progress records which records were acknowledged to the producer and which
// were processed. Together with the final committed offsets reaching every
// log end, a processed set covering every acknowledged offset shows that no
// record was skipped. Only acknowledged offsets are expected: a log may hold
// offsets no consumer is given, such as a new leader's epoch-start control
// batch.
type progress struct {
	mu    sync.Mutex
	acked map[int32][]int64
	done  map[int32]map[int64]bool
	by    map[string]int // records committed per consumer
}

func newProgress() *progress {
	return &progress{acked: make(map[int32][]int64), done: make(map[int32]map[int64]bool), by: make(map[string]int)}
}

// expect records acknowledged records, which must all be processed.
func (p *progress) expect(rs []*kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rs {
		p.acked[r.Partition] = append(p.acked[r.Partition], r.Offset)
	}
}

func (p *progress) add(name string, rs []*kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rs {
		if p.done[r.Partition] == nil {
			p.done[r.Partition] = make(map[int64]bool)
		}
		p.done[r.Partition][r.Offset] = true
	}
	p.by[name] += len(rs)
}

func (p *progress) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.by[name]
}

// covers reports whether every acknowledged record was processed.
func (p *progress) covers() bool { return p.missing() == "" }

// missing describes the acknowledged records not processed yet, or is empty.
func (p *progress) missing() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for part, offs := range p.acked {
		var gone []int64
		for _, o := range offs {
			if !p.done[part][o] {
				gone = append(gone, o)
			}
		}
		if len(gone) > 0 {
			if len(gone) > 8 {
				gone = gone[:8]
			}
			out = append(out, fmt.Sprintf("partition %d: %v", part, gone))
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	return "not processed: " + strings.Join(out, "; ")
}

// runConsumer polls, "processes" (records), then commits, until ctx ends.
func runConsumer(ctx context.Context, cl *kgo.Client, name string, p *progress) {
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		rs := fs.Records()
		if len(rs) > 0 {
			p.add(name, rs) // processed; a crash after this may lose only the commit
			_ = cl.CommitRecords(ctx, rs...)
		}
		cl.AllowRebalance()
	}
}

// produceRound sends perPartition records to every partition, raises ends
// past their offsets and tells p to expect them.
func produceRound(t *testing.T, cl *kgo.Client, topic string, partitions int32, perPartition int, ends map[int32]int64, p *progress) {
	t.Helper()
	var rs []*kgo.Record
	for i := range int(partitions) * perPartition {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for _, r := range rs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	p.expect(rs)
}

func TestGroupConsumersFailoverAndCooperativeJoin(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	const topic, groupID, partitions = "orders", "workers", int32(12)
	admin := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, admin, topic, partitions, nil)
	ends := make(map[int32]int64)
	prog := newProgress()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	start := func(name string, opts ...kgo.Opt) *kgo.Client {
		cl := testClient(t, b, append([]kgo.Opt{
			kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(2 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
			kgo.RebalanceTimeout(5 * time.Second), kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.RetryTimeout(3 * time.Second), kgo.ClientID(name),
		}, opts...)...)
		wg.Add(1)
		go func() { defer wg.Done(); runConsumer(ctx, cl, name, prog) }()
		return cl
	}
	describe := func() kadm.DescribedGroup {
		dg, err := kadm.NewClient(admin).DescribeGroups(context.Background(), groupID)
		if err != nil {
			t.Fatal(err)
		}
		return dg[groupID]
	}
	stableWith := func(n int) func() bool {
		return func() bool {
			g := describe()
			if g.State != "Stable" || len(g.Members) != n {
				return false
			}
			for _, m := range g.Members {
				if ca, ok := m.Assigned.AsConsumer(); !ok || len(ca.Topics) == 0 {
					return false
				}
			}
			return true
		}
	}
	crash := &cutDialer{}
	start("a")
	start("b")
	start("c", kgo.Dialer(crash.dial))
	brokertest.Eventually(t, 20*time.Second, "a Stable group of three", stableWith(3))

	produceRound(t, admin, topic, partitions, 40, ends, prog)
	defer func() {
		t.Logf("counts a=%d b=%d c=%d d=%d", prog.count("a"), prog.count("b"), prog.count("c"), prog.count("d"))
	}()
	brokertest.Eventually(t, 30*time.Second, "three consumers each to process records",
		func() bool { return prog.count("a") > 0 && prog.count("b") > 0 && prog.count("c") > 0 })

	crash.cutAll() // c crashes: no leave, no more heartbeats or commits
	produceRound(t, admin, topic, partitions, 40, ends, prog)
	brokertest.Eventually(t, 30*time.Second, "a and b to take over c's partitions", func() bool { return prog.covers() })
	brokertest.Eventually(t, 10*time.Second, "a Stable group of two", stableWith(2))

	// A fourth member joins with the cooperative-sticky balancer.
	before := map[string]int{"a": prog.count("a"), "b": prog.count("b")}
	start("d")
	brokertest.Eventually(t, 20*time.Second, "a Stable group of three again", stableWith(3))
	produceRound(t, admin, topic, partitions, 40, ends, prog)
	brokertest.Eventually(t, 30*time.Second, "every record processed and everyone consuming", func() bool {
		return prog.covers() && prog.count("d") > 0 && prog.count("a") > before["a"] && prog.count("b") > before["b"]
	})

	// Committed offsets reach the end of every partition.
	brokertest.Eventually(t, 10*time.Second, "committed offsets at the log end", func() bool {
		offs, err := kadm.NewClient(admin).FetchOffsets(context.Background(), groupID)
		if err != nil {
			return false
		}
		for p, end := range ends {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.At != end {
				return false
			}
		}
		return true
	})
}

// rawMember is one hand-driven group member on its own client.
type rawMember struct {
	t   *testing.T
	cl  *kgo.Client
	id  string
	gen int32
}

func (m *rawMember) join(group string) *kmsg.JoinGroupResponse {
	m.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = group, m.id, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	req.Protocols = append(req.Protocols, p)
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil {
		m.t.Fatal(err)
	}
	m.id = resp.MemberID
	m.gen = resp.Generation
	return resp
}

func (m *rawMember) commit(group string, gen int32, memberID string, offset int64) int16 {
	m.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, gen, memberID
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil {
		m.t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func fetchCommitted(t *testing.T, cl *kgo.Client, group string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = "t", []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0].Topics[0].Partitions[0].Offset
}

func TestGroupStaleGenerationCommitRejected(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startGroupBroker(t, cfg, groupTestConfig())
	admin := testClient(t, b)
	createTopic(t, admin, "t", 1, nil)
	const g = "raw"
	m1 := &rawMember{t: t, cl: testClient(t, b)}
	if r := m1.join(g); r.ErrorCode != kerr.MemberIDRequired.Code || m1.id == "" {
		t.Fatalf("first join: error %d, member %q", r.ErrorCode, m1.id)
	}
	if r := m1.join(g); r.ErrorCode != 0 || r.LeaderID != m1.id || r.Generation != 1 {
		t.Fatalf("second join: %+v", r)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = g, m1.gen, m1.id
	if resp, err := sync.RequestWith(context.Background(), m1.cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("sync: %v %v", err, resp)
	}
	if code := m1.commit(g, 1, m1.id, 5); code != 0 {
		t.Fatalf("commit in generation 1: error %d", code)
	}

	// A second member's join parks until m1 rejoins; generation 2 begins.
	m2 := &rawMember{t: t, cl: testClient(t, b)}
	m2.join(g) // MEMBER_ID_REQUIRED
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { joined <- m2.join(g) }()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = g, 1, m1.id
	brokertest.Eventually(t, 10*time.Second, "REBALANCE_IN_PROGRESS from a heartbeat", func() bool {
		resp, err := hb.RequestWith(context.Background(), m1.cl)
		return err == nil && resp.ErrorCode == kerr.RebalanceInProgress.Code
	})
	m1.join(g)
	if r := brokertest.RecvWithin(t, joined, 20*time.Second, "m2's join to complete after m1 rejoined"); r.ErrorCode != 0 || r.Generation != 2 || m1.gen != 2 {
		t.Fatalf("rebalance: m2 %+v, m1 generation %d", r, m1.gen)
	}
	tests := []struct {
		name   string
		gen    int32
		member string
		want   int16
	}{
		{"expired generation", 1, m1.id, kerr.IllegalGeneration.Code},
		{"unknown member", 2, "nobody", kerr.UnknownMemberID.Code},
		{"admin while members are active", -1, "", kerr.UnknownMemberID.Code},
		{"current generation before sync", 2, m1.id, kerr.RebalanceInProgress.Code},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code := m1.commit(g, tc.gen, tc.member, 99); code != tc.want {
				t.Fatalf("commit: error %d, want %d", code, tc.want)
			}
			if got := fetchCommitted(t, admin, g); got != 5 {
				t.Fatalf("committed offset %d after a rejected commit, want 5", got)
			}
		})
	}
	hb.Generation = 1
	if resp, _ := hb.RequestWith(context.Background(), m1.cl); resp.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("stale heartbeat: error %d", resp.ErrorCode)
	}

	// Committed offsets survive a restart of the broker.
	stop()
	b2, _ := startGroupBroker(t, cfg, groupTestConfig())
	if got := fetchCommitted(t, testClient(t, b2), g); got != 5 {
		t.Fatalf("committed offset after restart %d, want 5", got)
	}
}
