package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

func placementBrokers(ids ...int32) []meta.BrokerInfo {
	out := make([]meta.BrokerInfo, len(ids))
	for i, id := range ids {
		out[i] = meta.BrokerInfo{NodeID: id}
	}
	return out
}

func TestGroupPlacement(t *testing.T) {
	const groups = 30_000
	three := placementBrokers(1, 2, 3)
	place := func(id string, bs []meta.BrokerInfo) int32 {
		bi, ok := coordinator.PlaceGroup(id, bs)
		if !ok {
			t.Fatalf("no coordinator for %q among %d brokers", id, len(bs))
		}
		return bi.NodeID
	}
	if _, ok := coordinator.PlaceGroup("g", nil); ok {
		t.Fatal("a coordinator among no brokers")
	}
	if got := place("g", placementBrokers(7)); got != 7 {
		t.Fatalf("a lone broker does not coordinate: %d", got)
	}

	t.Run("deterministic and order independent", func(t *testing.T) {
		shuffled := slices.Clone(three)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for i := range 1000 {
			id := fmt.Sprintf("group-%d", i)
			if a, b := place(id, three), place(id, shuffled); a != b {
				t.Fatalf("%s: %d, then %d with the brokers in another order", id, a, b)
			}
		}
	})

	t.Run("spread", func(t *testing.T) {
		count := map[int32]int{}
		for i := range groups {
			count[place(fmt.Sprintf("consumers-%d", i), three)]++
		}
		for _, id := range []int32{1, 2, 3} {
			if share := float64(count[id]) / groups; share < 0.30 || share > 0.37 {
				t.Fatalf("broker %d coordinates %.3f of the groups (%v)", id, share, count)
			}
		}
	})

	t.Run("minimal movement", func(t *testing.T) {
		withoutTwo := placementBrokers(1, 3)
		withFour := placementBrokers(1, 2, 3, 4)
		moved, gained := 0, 0
		for i := range groups {
			id := fmt.Sprintf("g%d", i)
			before := place(id, three)
			after := place(id, withoutTwo)
			switch {
			case before != 2 && after != before:
				t.Fatalf("%s moved from %d to %d when broker 2 left", id, before, after)
			case before == 2:
				moved++
			}
			if grown := place(id, withFour); grown != before && grown != 4 {
				t.Fatalf("%s moved from %d to %d when broker 4 joined", id, before, grown)
			} else if grown == 4 {
				gained++
			}
		}
		if share := float64(gained) / groups; share < 0.22 || share > 0.28 {
			t.Fatalf("a fourth broker took %.3f of the groups, want about a quarter", share)
		}
		t.Logf("%d of %d groups moved when broker 2 left, %d to a new broker 4", moved, groups, gained)
	})
}

// findCoordinator asks broker b (and no other) who coordinates group.
func findCoordinator(t *testing.T, b *Broker, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(context.Background(), rawBrokerClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Coordinators) == 1 { // v4+
		c := resp.Coordinators[0]
		if c.ErrorCode != 0 {
			t.Fatalf("FindCoordinator on broker %d: code %d", b.Cfg.NodeID, c.ErrorCode)
		}
		return c.NodeID
	}
	return resp.NodeID
}

// rawBrokerClient is a client whose requests all go to b itself, even
// group requests (no coordinator lookup).
func rawBrokerClient(t *testing.T, b *Broker) *kgo.Broker {
	t.Helper()
	cl := testClient(t, b)
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	return cl.Broker(int(b.Cfg.NodeID))
}

// commitDirect sends an admin coordinator.OffsetCommit (generation -1) to broker b
// itself and returns the partition's error code.
func commitDirect(t *testing.T, b *Broker, group, topic string, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), rawBrokerClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// storedOffsets reads a group's committed offsets from etcd, by partition.
func storedOffsets(t *testing.T, b *Broker, group string) map[int32]int64 {
	t.Helper()
	os, err := b.Store.GroupOffsets(context.Background(), meta.DefaultTenant, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, o := range os {
		out[o.Partition] = o.Offset
	}
	return out
}

// groupPlacedOn picks a group id that the cluster places on a broker other
// than avoid.
func groupPlacedOn(t *testing.T, c *testCluster, prefix string, avoid int32) (string, int32) {
	t.Helper()
	for i := range 100 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if co := c.brokers[0].GroupCoordinator(id); co.NodeID != avoid {
			return id, co.NodeID
		}
	}
	t.Fatal("no group id placed away from the avoided broker")
	return "", 0
}

func TestGroupClusterCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees three brokers", i+1), func() (bool, string) {
			n := len(b.Brokers())
			return n == 3 && b.ControllerID() > 0, fmt.Sprintf("%d brokers, controller %d", n, b.ControllerID())
		})
	}
	const topic, partitions = "work", int32(6)
	cl := testClient(t, c.brokers[0])
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	// The coordinator that will be stopped is not the controller, so the
	// partitions it leads are re-elected promptly.
	groupID, coord := groupPlacedOn(t, c, "workers", c.brokers[0].ControllerID())
	t.Logf("group %s: coordinator %d, controller %d", groupID, coord, c.brokers[0].ControllerID())

	// Every broker names the same coordinator, in FindCoordinator v3 and v4.
	for _, b := range c.brokers {
		if got := findCoordinator(t, b, groupID); got != coord {
			t.Fatalf("broker %d names coordinator %d, want %d", b.Cfg.NodeID, got, coord)
		}
	}
	// Group requests sent to another broker are refused with NOT_COORDINATOR.
	other := c.brokers[coord%3] // not the coordinator
	if code := commitDirect(t, other, groupID, topic, 1); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on broker %d, not the coordinator: code %d", other.Cfg.NodeID, code)
	}

	ends := make(map[int32]int64)
	prog := newProgress()
	producer, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordRetries(20), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, name := range []string{"a", "b", "c"} {
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...),
			kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		wg.Add(1)
		go func() { defer wg.Done(); runConsumer(ctx, cons, name, prog) }()
	}
	stable := func(on *Broker) func() (bool, string) {
		return func() (bool, string) {
			d, err := on.coord.DescribeGroup(groupID)
			return err == nil && d.State == "Stable" && len(d.Members) == 3, fmt.Sprintf("%+v, %v", d.State, err)
		}
	}
	coordBroker := c.brokers[coord-1]
	// Three clients joining on a loaded machine can take a while.
	eventuallyLong(t, "a Stable group of three on the coordinator", stable(coordBroker))
	for _, b := range c.brokers {
		if b != coordBroker && len(b.coord.ListGroups()) != 0 {
			t.Fatalf("broker %d lists groups it does not coordinate: %v", b.Cfg.NodeID, b.coord.ListGroups())
		}
	}

	produceRound(t, producer, topic, partitions, 30, ends, prog)
	eventuallyTrue(t, "every record processed and committed", func() (bool, string) {
		got := storedOffsets(t, coordBroker, groupID)
		for p, end := range ends {
			if got[p] != end {
				return false, fmt.Sprintf("committed %v, ends %v", got, ends)
			}
		}
		m := prog.missing()
		return m == "", m
	})
	before := storedOffsets(t, coordBroker, groupID)
	genBefore := groupGeneration(coordBroker, groupID)
	// A second group on the same coordinator, rebalanced a few times by a
	// member that joins and leaves, so its generation is well above what a
	// coordinator starting from scratch would hand out.
	genGroup := ""
	for i := range 1000 {
		if id := fmt.Sprintf("gens-%d", i); c.brokers[0].GroupCoordinator(id).NodeID == coord {
			genGroup = id
			break
		}
	}
	joinOnce := func(b *Broker) group.Generation {
		t.Helper()
		res := b.coord.Join(context.Background(), genGroup, group.JoinRequest{ClientID: "gens", SessionTimeout: 10 * time.Second,
			RebalanceTimeout: 10 * time.Second, ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range"}}})
		if res.Err != nil {
			t.Fatalf("join %s on broker %d: %v", genGroup, b.Cfg.NodeID, res.Err)
		}
		if err := b.coord.Leave(genGroup, res.MemberID, ""); err != nil {
			t.Fatalf("leave %s: %v", genGroup, err)
		}
		return res.Generation
	}
	var lastGen group.Generation
	for range 5 {
		lastGen = joinOnce(coordBroker)
	}

	// An HTTP group request to another broker is forwarded to the coordinator.
	resp, err := http.Get("http://" + other.httpLn.Addr().String() + "/v1/groups/" + groupID + "/lag")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lag through broker %d, not the coordinator: HTTP %d", other.Cfg.NodeID, resp.StatusCode)
	}

	// The coordinator stops: the next broker by placement takes the group over.
	stopped := time.Now()
	c.stops[coord-1]()
	var live []*Broker
	for _, b := range c.brokers {
		if b != coordBroker {
			live = append(live, b)
		}
	}
	var next int32
	eventuallyTrue(t, "the live brokers agree on a new coordinator", func() (bool, string) {
		a, b := findCoordinator(t, live[0], groupID), findCoordinator(t, live[1], groupID)
		next = a
		return a == b && a != coord, fmt.Sprintf("brokers name %d and %d", a, b)
	})
	nextBroker := c.brokers[next-1]
	eventuallyTrue(t, "a Stable group of three on the new coordinator", stable(nextBroker))
	t.Logf("group settled on broker %d %v after the coordinator stopped", next, time.Since(stopped).Round(time.Millisecond))
	// Generations go on from the old coordinator's: a member of the old
	// generation can never pass for a member of the new one.
	if genAfter := groupGeneration(nextBroker, groupID); genAfter <= genBefore {
		t.Fatalf("generation %d on the new coordinator, %d on the old: generations went back", genAfter, genBefore)
	} else {
		t.Logf("generation %d on the old coordinator, %d on the new", genBefore, genAfter)
	}
	genNext := c.brokers[next-1]
	if co := live[0].GroupCoordinator(genGroup).NodeID; co != next {
		genNext = c.brokers[co-1]
	}
	var first group.Generation
	eventuallyTrue(t, "the second group joins on its new coordinator", func() (bool, string) {
		res := genNext.coord.Join(context.Background(), genGroup, group.JoinRequest{ClientID: "gens", SessionTimeout: 10 * time.Second,
			RebalanceTimeout: 10 * time.Second, ProtocolType: "consumer", Protocols: []group.Protocol{{Name: "range"}}})
		if res.Err != nil {
			return false, res.Err.Error()
		}
		first = res.Generation
		return true, ""
	})
	if first <= lastGen {
		t.Fatalf("group %s: first generation on the new coordinator %d, last on the old %d", genGroup, first, lastGen)
	}
	t.Logf("group %s: generation %d on the old coordinator, then %d on the new", genGroup, lastGen, first)

	// Committed offsets survived the move (read through the new coordinator)...
	admin := kadm.NewClient(testClient(t, nextBroker))
	offs, err := admin.FetchOffsets(context.Background(), groupID)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range before {
		if o, ok := offs.Lookup(topic, p); !ok || o.At < want {
			t.Fatalf("partition %d: committed %+v after the move, %d before", p, o, want)
		}
	}
	// ...and consumption continues from them, never committing backwards.
	produceRound(t, producer, topic, partitions, 30, ends, prog)
	eventuallyTrue(t, "the new records processed and committed", func() (bool, string) {
		offs, err := admin.FetchOffsets(context.Background(), groupID)
		if err != nil {
			return false, err.Error()
		}
		for p, end := range ends {
			o, _ := offs.Lookup(topic, p)
			if o.At < before[p] {
				t.Fatalf("partition %d: committed offset went back from %d to %d", p, before[p], o.At)
			}
			if o.At != end {
				return false, fmt.Sprintf("partition %d committed %d, end %d", p, o.At, end)
			}
		}
		m := prog.missing()
		return m == "", m
	})
	t.Logf("records processed per consumer: a=%d b=%d c=%d", prog.count("a"), prog.count("b"), prog.count("c"))
}

func TestGroupClusterDeposedCoordinatorFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees three brokers", i+1), func() (bool, string) {
			return len(b.Brokers()) == 3, fmt.Sprintf("%d brokers", len(b.Brokers()))
		})
	}
	cl := testClient(t, c.brokers[0])
	createTopic(t, cl, "t", 1, nil)
	eventuallyTrue(t, "every broker knows the topic", func() (bool, string) {
		for _, b := range c.brokers {
			if b.LookupTopic("t") == nil {
				return false, fmt.Sprintf("broker %d does not", b.Cfg.NodeID)
			}
		}
		return true, ""
	})
	groupID, coord := groupPlacedOn(t, c, "fenced", -1)
	owner := c.brokers[coord-1]
	rival := c.brokers[coord%3]
	ctx := context.Background()

	// The coordinator takes the group and commits.
	if code := commitDirect(t, owner, groupID, "t", 5); code != 0 {
		t.Fatalf("commit on the coordinator: code %d", code)
	}
	claim, _, _ := owner.coord.GroupState(groupID)
	if claim.Revision == 0 || claim.NodeID != coord {
		t.Fatalf("the coordinator's claim: %+v", claim)
	}

	// Its claim is taken away and another broker claims the group, as
	// happens when a coordinator's lease expires while it still runs: two
	// brokers believe they coordinate it.
	if err := owner.Store.ReleaseGroup(ctx, claim); err != nil {
		t.Fatal(err)
	}
	// The rival's claim is bound to a lease of its own, not to the rival
	// broker's registration: the rival's coordinator releases claims of its
	// registration lease that none of its runners holds (reconcile), and
	// would take this hand-made one away mid-test.
	grant, err := rival.Store.Client().Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	rivalClaim, err := rival.Store.ClaimGroup(ctx, meta.DefaultTenant, groupID, rival.Cfg.NodeID, grant.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := rival.Store.CommitOffsetsIf(ctx, meta.DefaultTenant, groupID, []meta.CommittedOffset{{
		OffsetKey: meta.OffsetKey{TopicID: rival.LookupTopic("t").Meta.ID}, Topic: "t", Offset: 9, LeaderEpoch: -1,
		Generation: -1, CommitTime: time.Now()}}, rivalClaim.If()); err != nil {
		t.Fatal(err)
	}

	// The deposed coordinator's commit path is fenced: NOT_COORDINATOR, and
	// etcd keeps the rival's offset.
	_, err = owner.coord.CommitOffsets(ctx, groupID, "", "", -1, map[group.TopicPartition]coordinator.OffsetCommit{
		{Topic: "t", Partition: 0}: {Offset: 3, LeaderEpoch: -1}})
	if !errors.Is(err, coordinator.ErrNotCoordinator) || !errors.Is(err, meta.ErrFenced) || node.ErrorCode(err) != kerr.NotCoordinator.Code {
		t.Fatalf("commit by the deposed coordinator: %v", err)
	}
	if got := storedOffsets(t, owner, groupID); got[0] != 9 {
		t.Fatalf("stored offset %d after the fenced commit, want the rival's 9", got[0])
	}
	// While the rival holds the claim, the placement's coordinator answers
	// COORDINATOR_LOAD_IN_PROGRESS (retriable) and writes nothing.
	if code := commitDirect(t, owner, groupID, "t", 4); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("commit while another broker holds the claim: code %d", code)
	}
	if got := storedOffsets(t, owner, groupID); got[0] != 9 {
		t.Fatalf("stored offset %d, want 9", got[0])
	}

	// Once the rival lets go, the coordinator takes the group over again and
	// sees the rival's commit.
	if err := rival.Store.ReleaseGroup(ctx, rivalClaim); err != nil {
		t.Fatal(err)
	}
	offs, err := owner.coord.FetchOffsets(groupID, nil)
	if err != nil || offs[group.TopicPartition{Topic: "t"}].Offset != 9 {
		t.Fatalf("offsets after the takeover: %v, %v", offs, err)
	}
	if code := commitDirect(t, owner, groupID, "t", 12); code != 0 {
		t.Fatalf("commit after the takeover: code %d", code)
	}
	if got := storedOffsets(t, owner, groupID); got[0] != 12 {
		t.Fatalf("stored offset %d, want 12", got[0])
	}
}

// groupGeneration is the group's current generation on b (-1 when b does
// not hold the group).
func groupGeneration(b *Broker, id string) group.Generation {
	_, gen, _ := b.coord.GroupState(id)
	return gen
}
