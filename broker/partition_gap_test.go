package broker

import (
	"context"
	"testing"

	"github.com/sluice-mq/sluice/meta"
)

// A partition state the watch delivers while its topic is still being
// opened is kept and applied when the topic is registered, not dropped:
// the topic's states were read before the change.
func TestPendingPartitionStateAppliedWhenTopicOpens(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	id := [16]byte{0xfe, 1}
	newer := meta.PartitionState{TopicID: id, Partition: 0, Replicas: []int32{99}, Leader: 99, LeaderEpoch: 7, Revision: 100}
	b.ApplyPartitionEvent(meta.PartitionEvent{Kind: meta.EventPut, State: newer})

	older := newer
	older.Leader, older.LeaderEpoch, older.Revision = 98, 6, 90
	b.AdminMu.Lock()
	err := b.OpenTopic(meta.Topic{ID: id, Name: "opening", Partitions: 1, ReplicationFactor: 1}, []meta.PartitionState{older})
	b.AdminMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if st := b.LookupTopic("opening").States[0]; st.Revision != 100 || st.Leader != 99 || st.LeaderEpoch != 7 {
		t.Fatalf("registered with state %+v, want the watched one at revision 100 (leader 99, epoch 7)", st)
	}
	if len(b.PendingStates) != 0 {
		t.Fatalf("pending states left behind: %v", b.PendingStates)
	}
}

// ReconcilePartitionStates brings a view that missed a change (made after
// the topics were read at start, before the watch's first read) up to etcd.
func TestReconcilePartitionStatesCatchesUp(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	createTopic(t, testClient(t, b), "gap", 1, nil)
	tp := b.LookupTopic("gap")
	cur := tp.States[0]
	stale := *tp
	stale.States = []meta.PartitionState{cur}
	stale.States[0].Revision, stale.States[0].Leader, stale.States[0].LeaderEpoch = 1, -1, 0
	b.AdminMu.Lock()
	b.ReplaceTopic(&stale)
	b.AdminMu.Unlock()

	b.ReconcilePartitionStates(context.Background())
	if st := b.LookupTopic("gap").States[0]; st.Revision != cur.Revision || st.Leader != cur.Leader || st.LeaderEpoch != cur.LeaderEpoch {
		t.Fatalf("after reconciling: %+v, want etcd's %+v", st, cur)
	}
}
