package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/meta"
)

func TestElectorInClusterElectsLeaderlessPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	eventuallyTrue(t, "a controller is elected", func() (bool, string) {
		return c.brokers[0].ControllerID() > 0, "none yet"
	})
	createTopic(t, testClient(t, c.brokers[0]), "leaderless", 1, nil)
	b := c.brokers[0]
	var st meta.PartitionState
	eventuallyTrue(t, "the partition state is stored", func() (bool, string) {
		tp := b.LookupTopic("leaderless")
		if tp == nil {
			return false, "no topic yet"
		}
		ps, err := b.Store.Partitions(context.Background(), tp.Meta.ID)
		if err != nil || len(ps) != 1 {
			return false, fmt.Sprintf("%d states, %v", len(ps), err)
		}
		st = ps[0]
		return true, ""
	})
	// Take the leader away (as an operator or a failed round could): the
	// controller fences the real replica through the transport and writes
	// it back as leader at a higher epoch.
	next := st
	next.Leader = meta.NoLeader
	if _, err := b.Store.UpdatePartition(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	eventuallyTrue(t, "the partition is led again", func() (bool, string) {
		ps, err := b.Store.Partitions(context.Background(), st.TopicID)
		if err != nil || len(ps) != 1 {
			return false, fmt.Sprintf("%d states, %v", len(ps), err)
		}
		got := ps[0]
		return got.Leader == st.Replicas[0] && got.LeaderEpoch > st.LeaderEpoch, fmt.Sprintf("%+v", got)
	})
	ctrl := c.brokers[b.ControllerID()-1]
	eventuallyTrue(t, "the controller counts the election", func() (bool, string) {
		n := ctrl.ElectionsWritten()
		return n >= 1, fmt.Sprintf("controller %d counts %d written elections", ctrl.Cfg.NodeID, n)
	})
}
