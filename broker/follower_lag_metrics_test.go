package broker

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-mq/sluice/broker/replica"
)

// followerLag is b's sluice_partition_follower_lag_offsets for partition 0
// of topic and follower id, and whether b exports that series.
func followerLag(t *testing.T, b *Broker, topic string, id int32) (float64, bool) {
	t.Helper()
	mfs, err := b.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"topic": topic, "partition": "0", "replica": strconv.Itoa(int(id))}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_partition_follower_lag_offsets" {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := 0
			for _, lp := range m.GetLabel() {
				if want[lp.GetName()] == lp.GetValue() {
					match++
				}
			}
			if match == len(want) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestClusterFollowerLagMetric: the leader of a partition of replication
// factor 3 exports each follower's lag; both are 0 once they caught up;
// after one follower (not the controller, so the leader stays) stops, the
// records produced since are its lag, while the live follower catches up
// again. Brokers that do not lead the partition export no lag for it.
// The stopped follower's incarnation may be recorded after it stopped (its
// catch-up report crosses the stop): its lag stays exported even so.
func TestClusterFollowerLagMetric(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "lagging", 1, 3)
	produceAll(t, c, "lagging", 20)

	st := c.brokers[0].LookupTopic("lagging").States[0]
	leader := c.brokers[st.Leader-1]
	controller := metadataOf(t, c.brokers[0]).ControllerID
	var followers []int32
	for _, id := range st.Replicas {
		if id != st.Leader {
			followers = append(followers, id)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("replicas %v, leader %d", st.Replicas, st.Leader)
	}
	stopped, live := followers[0], followers[1]
	if stopped == controller {
		stopped, live = live, stopped
	}
	eventuallyTrue(t, "both followers caught up", func() (bool, string) {
		var why string
		for _, id := range followers {
			lag, ok := followerLag(t, leader, "lagging", id)
			if !ok || lag != 0 {
				why += fmt.Sprintf("follower %d: lag %v (exported %v); ", id, lag, ok)
			}
		}
		return why == "", why
	})
	for i, b := range c.brokers {
		if id := int32(i + 1); id != st.Leader {
			for _, f := range st.Replicas {
				if lag, ok := followerLag(t, b, "lagging", f); ok {
					t.Errorf("broker %d, which does not lead, exports lag %v for replica %d", id, lag, f)
				}
			}
		}
	}

	c.stops[stopped-1]()
	const more = 30
	produceAll(t, c, "lagging", more)
	p := mustPartition(t, leader, "lagging")
	if st := p.ReplicaStatus(); st.Role != replica.RoleLeader {
		t.Fatalf("broker %d no longer leads: %+v", leader.Cfg.NodeID, st)
	}
	eventuallyTrue(t, "the stopped follower's lag is what was produced since", func() (bool, string) {
		lagStopped, okStopped := followerLag(t, leader, "lagging", stopped)
		lagLive, okLive := followerLag(t, leader, "lagging", live)
		return okStopped && lagStopped == more && okLive && lagLive == 0,
			fmt.Sprintf("stopped %d: %v (%v); live %d: %v (%v); leader %+v", stopped, lagStopped, okStopped, live, lagLive, okLive, p.ReplicaStatus())
	})
}
