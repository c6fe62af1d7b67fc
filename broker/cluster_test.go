package broker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// testCluster is n in-process brokers in AZs a, b, c, ..., whose embedded
// etcd members form one etcd cluster.
type testCluster struct {
	brokers []*Broker
	stops   []func()
}

func startTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startTestClusterWith(t, n, nil)
}

// startTestClusterWith is startTestCluster with each broker's config
// adjusted by adjust (when not nil) before it starts.
func startTestClusterWith(t *testing.T, n int, adjust func(*Config)) *testCluster {
	t.Helper()
	return startTestClusterLogged(t, n, adjust, nil)
}

// startTestClusterLogged is startTestClusterWith with broker node's logger
// made by logger (when not nil).
func startTestClusterLogged(t *testing.T, n int, adjust func(*Config), logger func(node int32) zerolog.Logger) *testCluster {
	t.Helper()
	// A port picked free can be taken before a broker binds it (the
	// etcd members' ports must be known before they start, for the initial
	// cluster): start again on fresh ports when that happens.
	for attempt := 1; ; attempt++ {
		c, err := tryStartTestCluster(t, n, adjust, logger)
		if err == nil {
			return c
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; starting again on fresh ports", attempt, err)
	}
}

func tryStartTestCluster(t *testing.T, n int, adjust func(*Config), newLogger func(node int32) zerolog.Logger) (*testCluster, error) {
	t.Helper()
	cfgs := make([]Config, n)
	var initial []string
	objects := "file://" + t.TempDir() // one store shared by the brokers, as a cluster's bucket is
	for i := range n {
		cfgs[i] = testBrokerConfig(t)
		cfgs[i].ObjectStore = objects
		// Bound by the broker: no other test can take them meanwhile.
		cfgs[i].KafkaListen, cfgs[i].HTTPListen, cfgs[i].InterBrokerListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		cfgs[i].NodeID = int32(i + 1)
		cfgs[i].AZ = string(rune('a' + i))
		cfgs[i].RegistrationTTL = 2 * time.Second
		cfgs[i].ControllerTTL = 2 * time.Second
		initial = append(initial, fmt.Sprintf("%d=http://%s", i+1, cfgs[i].Meta.ListenPeer))
		if adjust != nil {
			adjust(&cfgs[i])
		}
	}
	c := &testCluster{brokers: make([]*Broker, n), stops: make([]func(), n)}
	errcs := make([]chan error, n)
	cancels := make([]context.CancelFunc, n)
	abandon := func() {
		for i, cancel := range cancels {
			if cancel != nil {
				cancel()
				// Its error is moot: the start already failed.
				select {
				case <-errcs[i]:
				case <-time.After(stopLimit):
				}
			}
		}
	}
	for i := range n {
		cfgs[i].Meta.InitialCluster = strings.Join(initial, ",")
		logger := zerolog.Nop()
		switch {
		case newLogger != nil:
			logger = newLogger(cfgs[i].NodeID)
		case os.Getenv("SLUICE_TEST_LOG") != "":
			logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}).Level(zerolog.DebugLevel)
		}
		b, err := New(cfgs[i], logger)
		if err != nil {
			abandon()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		// The etcd members wait for each other's quorum, so all start before
		// any is waited for.
		go func() { errc <- b.Run(ctx) }()
		c.brokers[i], errcs[i], cancels[i] = b, errc, cancel
	}
	for i, b := range c.brokers {
		select {
		case <-b.Ready():
		case err := <-errcs[i]:
			errcs[i] <- err
			abandon()
			return nil, fmt.Errorf("broker %d stopped before it was ready: %w", i+1, err)
		case <-time.After(60 * time.Second):
			abandon()
			return nil, fmt.Errorf("broker %d not ready after 60s", i+1)
		}
	}
	// Placement and coordinators follow each broker's view of the live
	// brokers; tests start from a cluster whose views agree.
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for i := 0; i < len(c.brokers); {
		if len(c.brokers[i].Brokers()) == n {
			i++
			continue
		}
		select {
		case <-deadline.C:
			abandon()
			return nil, fmt.Errorf("broker %d sees %d brokers after 30s, want %d", i+1, len(c.brokers[i].Brokers()), n)
		case <-poll.C:
		}
	}
	for i := range c.brokers {
		var once sync.Once
		c.stops[i] = func() {
			once.Do(func() {
				cancels[i]()
				awaitStop(t, errcs[i], fmt.Sprintf("broker %d", i+1))
			})
		}
		t.Cleanup(c.stops[i])
	}
	return c, nil
}

// seeds is every broker's Kafka address.
func (c *testCluster) seeds() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.KafkaAddr())
	}
	return out
}

// metadataOf asks broker b for the metadata of every topic.
func metadataOf(t *testing.T, b *Broker) *kmsg.MetadataResponse {
	t.Helper()
	cl := testClient(t, b)
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// eventuallyTrue polls cond for 20 s (eventuallyWhy).
func eventuallyTrue(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	brokertest.EventuallyWhy(t, 20*time.Second, what, cond)
}

func TestClusterMembershipAndTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)

	// Every broker lists all three, with their AZs as racks, and names one
	// controller.
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees the cluster", i+1), func() (bool, string) {
			md := metadataOf(t, b)
			var racks []string
			for _, mb := range md.Brokers {
				racks = append(racks, fmt.Sprintf("%d:%s", mb.NodeID, *mb.Rack))
			}
			want := "1:a 2:b 3:c"
			got := strings.Join(racks, " ")
			return got == want && md.ControllerID > 0, fmt.Sprintf("brokers %q (want %q), controller %d", got, want, md.ControllerID)
		})
	}

	// A topic created on one broker is opened on every broker that hosts a
	// replica, and its partitions spread evenly.
	cl := testClient(t, c.brokers[0])
	createTopic(t, cl, "spread", 6, nil)
	perBroker := map[int32]int{}
	eventuallyTrue(t, "every broker knows the topic and its leaders", func() (bool, string) {
		for i, b := range c.brokers {
			t := b.LookupTopic("spread")
			if t == nil {
				return false, fmt.Sprintf("broker %d does not", i+1)
			}
			for _, st := range t.States {
				if st.Leader < 0 {
					return false, fmt.Sprintf("broker %d: partition %d has no leader yet", i+1, st.Partition)
				}
			}
		}
		return true, ""
	})
	md := metadataOf(t, c.brokers[2])
	for _, mt := range md.Topics {
		if *mt.Topic != "spread" {
			continue
		}
		for _, mp := range mt.Partitions {
			if mp.ErrorCode != 0 || len(mp.Replicas) != 1 || mp.Leader != mp.Replicas[0] {
				t.Fatalf("partition %d: code %d, leader %d, replicas %v", mp.Partition, mp.ErrorCode, mp.Leader, mp.Replicas)
			}
			perBroker[mp.Leader]++
		}
	}
	if perBroker[1] != 2 || perBroker[2] != 2 || perBroker[3] != 2 {
		t.Fatalf("leaders per broker %v, want 2 each", perBroker)
	}

	// Clients route by the metadata: every record lands, and a consumer
	// reads them all back from the three brokers.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("spread"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 300
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("spread"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < n && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != n {
		t.Fatalf("read back %d of %d records", len(seen), n)
	}

	// A partition produced to on a broker that does not host it is refused
	// with NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata.
	var other *Broker
	for _, mt := range md.Topics {
		if *mt.Topic == "spread" && mt.Partitions[0].Leader != 1 {
			other = c.brokers[0]
		} else if *mt.Topic == "spread" {
			other = c.brokers[1]
		}
	}
	if _, err := other.PartitionOf("spread", 0); !errorsIsCode(err, kerr.NotLeaderForPartition) {
		t.Fatalf("partition 0 on a broker without it: %v", err)
	}
}

func TestClusterControllerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	var first int32
	eventuallyTrue(t, "a controller is elected", func() (bool, string) {
		first = c.brokers[0].ControllerID()
		return first > 0, "none yet"
	})
	c.stops[first-1]()
	var next int32
	eventuallyTrue(t, "another broker takes over as controller", func() (bool, string) {
		for i, b := range c.brokers {
			if int32(i+1) == first {
				continue
			}
			next = b.ControllerID()
			if next <= 0 || next == first {
				return false, fmt.Sprintf("broker %d reports controller %d", i+1, next)
			}
		}
		return true, ""
	})
	// The stopped broker deregistered: the others drop it from Metadata.
	for i, b := range c.brokers {
		if int32(i+1) == first {
			continue
		}
		eventuallyTrue(t, "the stopped broker leaves the metadata", func() (bool, string) {
			ids := []int32{}
			for _, mb := range metadataOf(t, b).Brokers {
				ids = append(ids, mb.NodeID)
			}
			return !slices.Contains(ids, first) && len(ids) == 2, fmt.Sprintf("brokers %v", ids)
		})
	}
}

func TestClusterReplicationFactor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	cl := testClient(t, c.brokers[0])
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		n := len(c.brokers[0].Brokers())
		return n == 3, fmt.Sprintf("%d brokers", n)
	})
	for _, rf := range []int16{4, 3, -1} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("rf%d", rf+1), 1, rf
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0]
		if rf == 4 {
			// More replicas than AZs: refused with a message.
			if got.ErrorCode != kerr.InvalidReplicationFactor.Code || got.ErrorMessage == nil || *got.ErrorMessage == "" {
				t.Fatalf("replication factor %d: code %d, message %v", rf, got.ErrorCode, got.ErrorMessage)
			}
			t.Logf("replication factor %d refused: %s", rf, *got.ErrorMessage)
			continue
		}
		if got.ErrorCode != 0 {
			t.Fatalf("replication factor %d: code %d", rf, got.ErrorCode)
		}
		// -1 is the default: three replicas over three AZs. The broker
		// learns of the topic through its etcd watch, which may lag the
		// controller's answer.
		eventuallyTrue(t, fmt.Sprintf("topic %s with three replicas", rt.Topic), func() (bool, string) {
			td := c.brokers[0].LookupTopic(rt.Topic)
			if td == nil {
				return false, "not yet known to broker 1"
			}
			n := len(td.States[0].Replicas)
			return n == 3, fmt.Sprintf("%d replicas", n)
		})
	}
}

// errorsIsCode reports whether err maps to the Kafka error code want.
func errorsIsCode(err error, want *kerr.Error) bool {
	return err != nil && node.ErrorCode(err) == want.Code
}

// produceAll produces n records to topic through a client of the whole
// cluster with acks=all and returns their values by offset per partition.
func produceAll(t *testing.T, c *testCluster, topic string, n int) {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(20), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// consumeAll reads topic from the start until it has want distinct values.
func consumeAll(t *testing.T, c *testCluster, topic string, want int, opts ...kgo.Opt) map[string]bool {
	t.Helper()
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < want && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	return seen
}

func TestClusterReplicatedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		n := len(c.brokers[0].Brokers())
		return n == 3, fmt.Sprintf("%d brokers", n)
	})
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "r3", 3, -1)
	md := metadataOf(t, c.brokers[1])
	for _, mt := range md.Topics {
		for _, mp := range mt.Partitions {
			t.Logf("partition %d: leader %d epoch %d replicas %v isr %v", mp.Partition, mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR)
			if len(mp.Replicas) != 3 {
				t.Fatalf("partition %d has replicas %v", mp.Partition, mp.Replicas)
			}
		}
	}
	for part := int32(0); part < 3; part++ {
		for i, b := range c.brokers {
			p, _ := b.PartitionOf("r3", part)
			t.Logf("partition %d on broker %d: %+v", part, i+1, p.ReplicaStatus())
		}
	}
	const n = 200
	start := time.Now()
	produceAll(t, c, "r3", n)
	t.Logf("%d acks=all produces in %v", n, time.Since(start))
	if seen := consumeAll(t, c, "r3", n); len(seen) != n {
		t.Fatalf("read back %d of %d", len(seen), n)
	}
	// Every replica holds the same committed log.
	for part := int32(0); part < 3; part++ {
		var logs [][]byte
		for _, b := range c.brokers {
			p, err := b.PartitionOf("r3", part)
			if err != nil {
				t.Fatal(err)
			}
			eventuallyTrue(t, "the replica learns the leader's HW", func() (bool, string) {
				h, _ := p.HighWatermark()
				lh := c.leaderHW(t, "r3", part)
				return h >= lh && lh > 0, fmt.Sprintf("hw %d, leader %d", h, lh)
			})
			hw, _ := p.HighWatermark()
			data, err := p.Log().Read(0, hw, 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, data)
		}
		for i := 1; i < len(logs); i++ {
			n := min(len(logs[0]), len(logs[i]))
			if string(logs[0][:n]) != string(logs[i][:n]) {
				t.Fatalf("partition %d: replica %d differs from replica 1 below the HW", part, i+1)
			}
		}
	}
}

// leaderHW is the high watermark of the partition's current leader.
func (c *testCluster) leaderHW(t *testing.T, topic string, part int32) wal.Offset {
	t.Helper()
	for _, b := range c.brokers {
		p, err := b.PartitionOf(topic, part)
		if err != nil {
			continue
		}
		if st := p.ReplicaStatus(); st.Role == replica.RoleLeader {
			hw, _ := p.HighWatermark()
			return hw
		}
	}
	return -1
}

// TestClusterLeaderThatLosesItsLeaseRegistersAgain: a broker whose
// registration lease is revoked (as if cut off from etcd past its TTL)
// registers again under a new lease and goes on serving, and everything
// acknowledged is there. (That acks=1 is refused while a leader cannot be
// sure of its lease is partition's TestAcksOneNeedsTheLease.)
func TestClusterLeaderThatLosesItsLeaseRegistersAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		return len(c.brokers[0].Brokers()) == 3, ""
	})
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "lease", 1, 3)
	produceAll(t, c, "lease", 50)
	st := c.brokers[0].LookupTopic("lease").States[0]
	leader := c.brokers[st.Leader-1]
	reg := leader.OwnRegistration()
	if _, err := leader.Store.Client().Revoke(context.Background(), reg.Info().Lease); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the broker registers again", func() (bool, string) {
		r := leader.OwnRegistration()
		return r != reg && r.Info().Lease != reg.Info().Lease, ""
	})
	produceAll(t, c, "lease", 50)
	if seen := consumeAll(t, c, "lease", 50); len(seen) != 50 {
		t.Fatalf("read back %d of 50 distinct values", len(seen))
	}
}

// TestClusterProduceTimesOutThenNotEnoughReplicas: with both followers of
// a partition gone, an acks=all produce is answered REQUEST_TIMED_OUT at its
// timeout while the leader still counts them in sync, and
// NOT_ENOUGH_REPLICAS at once after that; nothing is acknowledged, and the
// committed records stay readable.
func TestClusterProduceTimesOutThenNotEnoughReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		return len(c.brokers[0].Brokers()) == 3, ""
	})
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "lonely", 1, 3)
	produceAll(t, c, "lonely", 20)
	st := c.brokers[0].LookupTopic("lonely").States[0]
	leader := c.brokers[st.Leader-1]
	hwBefore, _ := mustPartition(t, leader, "lonely").HighWatermark()
	for i, b := range c.brokers {
		if b != leader {
			c.stops[i]()
		}
	}
	lcl := testClient(t, leader)
	send := func(timeout int32) (kmsg.ProduceResponseTopicPartition, time.Duration) {
		preq := kmsg.NewPtrProduceRequest()
		preq.Acks, preq.TimeoutMillis = -1, timeout
		prt := kmsg.NewProduceRequestTopic()
		prt.Topic = "lonely"
		prp := kmsg.NewProduceRequestTopicPartition()
		prp.Partition, prp.Records = 0, brokertest.Batch(1, -1, -1, -1, 1)
		prt.Partitions = append(prt.Partitions, prp)
		preq.Topics = append(preq.Topics, prt)
		start := time.Now()
		resp, err := preq.RequestWith(context.Background(), lcl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0], time.Since(start)
	}
	// Right after the loss the leader still counts its followers in sync.
	sp, took := send(500)
	switch sp.ErrorCode {
	case kerr.RequestTimedOut.Code:
		if took < 400*time.Millisecond || took > 5*time.Second {
			t.Fatalf("timed out after %v, asked 500ms", took)
		}
	case kerr.NotEnoughReplicas.Code: // the lag window already passed on a slow machine
	default:
		t.Fatalf("produce without followers: code %d after %v", sp.ErrorCode, took)
	}
	eventuallyTrue(t, "NOT_ENOUGH_REPLICAS at once", func() (bool, string) {
		sp, took := send(10000)
		return sp.ErrorCode == kerr.NotEnoughReplicas.Code && took < time.Second, fmt.Sprintf("code %d after %v", sp.ErrorCode, took)
	})
	if hw, _ := mustPartition(t, leader, "lonely").HighWatermark(); hw != hwBefore {
		t.Fatalf("high watermark moved from %d to %d without followers", hwBefore, hw)
	}
	fetched, _, err := mustPartition(t, leader, "lonely").Read(0, 1<<20)
	if err != nil || len(fetched) == 0 {
		t.Fatalf("read below the HW: %d bytes, %v", len(fetched), err)
	}
}

func mustPartition(t *testing.T, b *Broker, topic string) *partition.Partition {
	t.Helper()
	p, err := b.PartitionOf(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createReplicatedTopic creates a topic with a replication factor (-1: the
// default) through the Kafka protocol and fails the test on any error.
func createReplicatedTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
}
