package broker

// The replica-incarnation rule through real brokers: a broker restarted on
// an empty data directory must not be counted in an election until it has
// caught up, so a partition whose other replicas are gone stays offline
// instead of electing a log missing acknowledged records.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// restartableCluster is three brokers on an external etcd (so a broker's
// data directory can be wiped without touching the metadata), each of which
// can be stopped and started again.
type restartableCluster struct {
	t    *testing.T
	cfgs []Config
	testCluster
}

func startRestartableCluster(t *testing.T) *restartableCluster {
	t.Helper()
	endpoints := startExternalEtcd(t)
	c := &restartableCluster{t: t, testCluster: testCluster{brokers: make([]*Broker, 3), stops: make([]func(), 3)}}
	for i := range 3 {
		cfg := testBrokerConfig(t)
		cfg.KafkaListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
		cfg.NodeID, cfg.AZ = int32(i+1), string(rune('a'+i))
		cfg.Meta.Endpoints = endpoints
		cfg.RegistrationTTL, cfg.ControllerTTL = 2*time.Second, 2*time.Second
		c.cfgs = append(c.cfgs, cfg)
		c.start(i)
	}
	return c
}

// start runs broker i until it is ready (tryStartBroker: its stop waits
// for the broker with a deadline).
func (c *restartableCluster) start(i int) {
	t := c.t
	t.Helper()
	b, stop, err := tryStartBroker(t, c.cfgs[i])
	if err != nil {
		t.Fatalf("broker %d stopped before it was ready: %v", i+1, err)
	}
	c.brokers[i], c.stops[i] = b, stop
}

// state reads the partition state of topic-0 from etcd through a broker
// that is running.
func (c *restartableCluster) state(up int, topicID [16]byte) (meta.PartitionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states, err := c.brokers[up].Store.Partitions(ctx, topicID)
	if err != nil || len(states) == 0 {
		return meta.PartitionState{}, fmt.Errorf("read partition state: %w (%d states)", err, len(states))
	}
	return states[0], nil
}

// TestLostDiskReplicaDoesNotVote is the case: C stopped, records
// acknowledged by A (leader) and B, B's disk wiped and B restarted, A
// stopped, C back: B and C are a quorum of live replicas, but neither holds
// the acknowledged records, so the partition must stay offline (the
// controller reports B lost). Once A returns it is elected and every
// acknowledged record is read back; B catches up and counts again.
func TestLostDiskReplicaDoesNotVote(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster and three brokers, and restarts them")
	}
	c := startRestartableCluster(t)
	eventuallyTrue(t, "the brokers see each other", func() (bool, string) {
		for i, b := range c.brokers {
			if n := len(b.Brokers()); n != 3 {
				return false, fmt.Sprintf("broker %d sees %d", i+1, n)
			}
		}
		return true, ""
	})
	const topic = "lost"
	createReplicatedTopic(t, testClient(t, c.brokers[0]), topic, 1, 3)
	produceAll(t, &c.testCluster, topic, 10)
	id := c.brokers[0].LookupTopic(topic).Meta.ID
	// Every replica's incarnation is recorded (by the first election, or by
	// its catch-up notice), and everyone follows one leader.
	var st meta.PartitionState
	eventuallyTrue(t, "incarnations recorded", func() (bool, string) {
		var err error
		if st, err = c.state(0, id); err != nil {
			return false, err.Error()
		}
		known := len(st.Incarnations) == 3
		for _, x := range st.Incarnations {
			known = known && x != 0
		}
		return known && st.Leader != meta.NoLeader, fmt.Sprintf("%+v", st)
	})
	a := int(st.Leader) - 1
	var others []int
	for i := range 3 {
		if i != a {
			others = append(others, i)
		}
	}
	b, cc := others[0], others[1]
	up := func(skip ...int) int {
		for i := range 3 {
			if i != skip[0] && (len(skip) < 2 || i != skip[1]) {
				return i
			}
		}
		return -1
	}

	c.stops[cc]()
	const acked = 200
	produceAll(t, &c.testCluster, topic, acked) // acknowledged by A and B only

	c.stops[b]()
	if err := os.RemoveAll(c.cfgs[b].DataDir); err != nil {
		t.Fatal(err)
	}
	c.stops[a]()
	c.start(b) // an empty data directory: a new incarnation
	c.start(cc)
	if inc := c.brokers[b].Incarnation; uint64(inc) == st.Incarnations[slices.Index(st.Replicas, int32(b+1))] {
		t.Fatalf("broker %d kept incarnation %x on an empty data directory", b+1, uint64(inc))
	}

	// B and C answer the fences, but B's answer does not count: the
	// controller reports the partition offline and elects nobody.
	eventuallyTrue(t, "the controller reports the partition offline", func() (bool, string) {
		now, err := c.state(up(a), id)
		if err != nil {
			return false, err.Error()
		}
		if now.LeaderEpoch != st.LeaderEpoch || now.Leader != st.Leader {
			t.Fatalf("elected node %d at epoch %d (was node %d at %d) with only the lost disk and the stale replica live",
				now.Leader, now.LeaderEpoch, st.Leader, st.LeaderEpoch)
		}
		n := c.brokers[b].OfflinePartitions() + c.brokers[cc].OfflinePartitions()
		return n == 1, fmt.Sprintf("offline partitions reported: %d; state %+v", n, now)
	})

	// A returns: A and C are an eligible quorum and A holds everything.
	c.start(a)
	eventuallyTrue(t, "A elected again", func() (bool, string) {
		now, err := c.state(a, id)
		if err != nil {
			return false, err.Error()
		}
		return now.Leader == int32(a+1) && now.LeaderEpoch > st.LeaderEpoch, fmt.Sprintf("%+v", now)
	})
	// produceAll writes values v0, v1, ...: the first 10 repeat in the 200.
	if seen := consumeAll(t, &c.testCluster, topic, acked); len(seen) != acked {
		t.Fatalf("read back %d of %d acknowledged values", len(seen), acked)
	}
	// B catches up and its new incarnation is recorded.
	produceAll(t, &c.testCluster, topic, 5)
	eventuallyTrue(t, "B's new incarnation recorded", func() (bool, string) {
		now, err := c.state(a, id)
		if err != nil {
			return false, err.Error()
		}
		i := slices.Index(now.Replicas, int32(b+1))
		return i < len(now.Incarnations) && now.Incarnations[i] == uint64(c.brokers[b].Incarnation), fmt.Sprintf("%+v", now)
	})
}
