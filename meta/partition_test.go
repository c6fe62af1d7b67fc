package meta

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// replicaLists is n partitions' replicas over brokers 1..3, rf each,
// rotating the preferred leader.
func replicaLists(n, rf int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		for j := range rf {
			out[i] = append(out[i], int32((i+j)%3+1))
		}
	}
	return out
}

// smallTxnConfig is an embedded config whose transactions carry at most 4
// operations, so a handful of partitions takes several transactions.
func smallTxnConfig(t *testing.T) Config {
	cfg := embeddedConfig(t)
	cfg.MaxTxnOps = 4
	return cfg
}

// partitionKeys lists every key under partitions/, as "<topicID>/<n>".
func partitionKeys(t *testing.T, s *Store) []string {
	t.Helper()
	resp, err := s.Client().Get(testContext(t), s.allPartitionsPrefix(), withPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("get partition keys: %v", err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, strings.TrimPrefix(string(kv.Key), s.allPartitionsPrefix()))
	}
	return keys
}

// wantKeys is the keys of partitions 0..n-1 of topic id.
func wantKeys(id [16]byte, n int) []string {
	var keys []string
	for p := range n {
		keys = append(keys, fmt.Sprintf("%s/%d", uuid.UUID(id), p))
	}
	slices.Sort(keys)
	return keys
}

func assertSameState(t *testing.T, got, want PartitionState) {
	t.Helper()
	if got.TopicID != want.TopicID || got.Partition != want.Partition || !slices.Equal(got.Replicas, want.Replicas) ||
		got.Leader != want.Leader || got.LeaderEpoch != want.LeaderEpoch || got.Revision != want.Revision ||
		!slices.Equal(got.Incarnations, want.Incarnations) {
		t.Fatalf("partition state %+v, want %+v", got, want)
	}
}

func TestCreateTopicWithPartitions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func(*testing.T) Config
		chunks bool
	}{
		{"one transaction", embeddedConfig, false},
		{"chunked", smallTxnConfig, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.cfg(t))
			ctx := testContext(t)
			replicas := replicaLists(10, 3)
			tp, states, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "orders", ReplicationFactor: 3}, replicas)
			if err != nil {
				t.Fatalf("CreateTopicWithPartitions: %v", err)
			}
			if tp.Partitions != 10 || tp.ID == uuid.Nil {
				t.Fatalf("topic %+v, want 10 partitions and an ID", tp)
			}
			stored, err := s.Topic(ctx, "orders")
			if err != nil {
				t.Fatalf("Topic: %v", err)
			}
			assertSameTopic(t, stored, tp)
			read, err := s.Partitions(ctx, tp.ID)
			if err != nil {
				t.Fatalf("Partitions: %v", err)
			}
			if len(states) != 10 || len(read) != 10 {
				t.Fatalf("%d states returned, %d read; want 10", len(states), len(read))
			}
			revs := map[int64]bool{}
			for i, st := range states {
				want := PartitionState{TopicID: tp.ID, Partition: int32(i), Replicas: replicas[i],
					Leader: NoLeader, Revision: st.Revision}
				assertSameState(t, st, want)
				assertSameState(t, read[i], st)
				revs[st.Revision] = true
				if st.Revision > tp.Revision || (!tc.chunks && st.Revision != tp.Revision) {
					t.Errorf("partition %d at revision %d, topic at %d", i, st.Revision, tp.Revision)
				}
			}
			if tc.chunks && len(revs) != 4 { // 10 states, 3 per transaction
				t.Errorf("states written in %d transactions, want 4", len(revs))
			}
		})
	}
}

func TestCreateTopicWithPartitionsRefuses(t *testing.T) {
	s := openStore(t, smallTxnConfig(t))
	ctx := testContext(t)
	if _, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "taken", ReplicationFactor: 1}, replicaLists(6, 1)); err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	before := partitionKeys(t, s)
	tests := []struct {
		name     string
		topic    Topic
		replicas [][]int32
		want     error
	}{
		{"name taken, one transaction", Topic{Name: "taken", ReplicationFactor: 1}, replicaLists(2, 1), ErrTopicExists},
		{"name taken, chunked", Topic{Name: "taken", ReplicationFactor: 1}, replicaLists(9, 1), ErrTopicExists},
		{"count mismatch", Topic{Name: "t", Partitions: 3, ReplicationFactor: 1}, replicaLists(2, 1), ErrInvalidPartitions},
		{"no partitions", Topic{Name: "t", ReplicationFactor: 1}, nil, ErrInvalidPartitions},
		{"replication factor mismatch", Topic{Name: "t", ReplicationFactor: 3}, replicaLists(2, 2), ErrInvalidReplicationFactor},
		{"empty replicas", Topic{Name: "t", ReplicationFactor: 1}, [][]int32{{1}, {}}, ErrInvalidPartitionState},
		{"repeated replica", Topic{Name: "t", ReplicationFactor: 2}, [][]int32{{1, 1}}, ErrInvalidPartitionState},
		{"negative replica", Topic{Name: "t", ReplicationFactor: 1}, [][]int32{{-2}}, ErrInvalidPartitionState},
		{"bad name", Topic{Name: "a/b", ReplicationFactor: 1}, replicaLists(1, 1), ErrInvalidTopic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CreateTopicWithPartitions(ctx, tc.topic, tc.replicas)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CreateTopicWithPartitions = %v, want %v", err, tc.want)
			}
			if after := partitionKeys(t, s); !slices.Equal(after, before) {
				t.Fatalf("partition keys %v after a refused create, want %v", after, before)
			}
		})
	}
}

// TestConcurrentCreateLeavesNoStrayPartitions races creators of one name:
// one wins, and the only partition keys left are the winner's, whether the
// states went with the topic in one transaction or in chunks before it.
func TestConcurrentCreateLeavesNoStrayPartitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"one transaction", embeddedConfig},
		{"chunked", smallTxnConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.cfg(t))
			ctx := testContext(t)
			const creators, partitions = 8, 9
			var wg sync.WaitGroup
			var mu sync.Mutex
			var winners []Topic
			for range creators {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "race", ReplicationFactor: 2}, replicaLists(partitions, 2))
					if err != nil && !errors.Is(err, ErrTopicExists) {
						t.Errorf("losing create: %v, want ErrTopicExists", err)
						return
					}
					if err == nil {
						mu.Lock()
						winners = append(winners, tp)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("%d creators won, want 1", len(winners))
			}
			if got, want := partitionKeys(t, s), wantKeys(winners[0].ID, partitions); !slices.Equal(got, want) {
				t.Fatalf("partition keys after the race:\n%v\nwant the winner's only:\n%v", got, want)
			}
		})
	}
}

func TestAddTopicPartitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*testing.T) Config
	}{
		{"one transaction", embeddedConfig},
		{"chunked", smallTxnConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.cfg(t))
			ctx := testContext(t)
			tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "grow", ReplicationFactor: 2}, replicaLists(2, 2))
			if err != nil {
				t.Fatalf("CreateTopicWithPartitions: %v", err)
			}
			added := replicaLists(5, 2)
			grown, states, err := s.AddTopicPartitions(ctx, tp, added)
			if err != nil {
				t.Fatalf("AddTopicPartitions: %v", err)
			}
			if grown.Partitions != 7 || grown.ID != tp.ID || grown.Revision <= tp.Revision {
				t.Fatalf("grown topic %+v from %+v", grown, tp)
			}
			for i, st := range states {
				assertSameState(t, st, PartitionState{TopicID: tp.ID, Partition: int32(2 + i), Replicas: added[i],
					Leader: NoLeader, Revision: st.Revision})
			}
			if got, want := partitionKeys(t, s), wantKeys(tp.ID, 7); !slices.Equal(got, want) {
				t.Fatalf("partition keys %v, want %v", got, want)
			}

			// t as read before the add is stale now.
			if _, _, err := s.AddTopicPartitions(ctx, tp, replicaLists(1, 2)); !errors.Is(err, ErrConflict) {
				t.Errorf("add with a stale topic = %v, want ErrConflict", err)
			}
			if _, _, err := s.AddTopicPartitions(ctx, grown, replicaLists(1, 3)); !errors.Is(err, ErrInvalidReplicationFactor) {
				t.Errorf("add with 3 replicas to a topic of 2 = %v, want ErrInvalidReplicationFactor", err)
			}
			if _, err := s.DeleteTopic(ctx, "grow"); err != nil {
				t.Fatalf("DeleteTopic: %v", err)
			}
			if _, _, err := s.AddTopicPartitions(ctx, grown, replicaLists(1, 2)); !errors.Is(err, ErrTopicNotFound) {
				t.Errorf("add to a deleted topic = %v, want ErrTopicNotFound", err)
			}
			if keys := partitionKeys(t, s); len(keys) != 0 {
				t.Errorf("partition keys %v after DeleteTopic, want none", keys)
			}
		})
	}
}

// TestConcurrentAddTopicPartitions races adders on one topic revision: one
// wins, and every partition key left is one of the topic's partitions.
func TestConcurrentAddTopicPartitions(t *testing.T) {
	s := openStore(t, smallTxnConfig(t))
	ctx := testContext(t)
	tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "grow", ReplicationFactor: 1}, replicaLists(1, 1))
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.AddTopicPartitions(ctx, tp, replicaLists(4+i, 1))
			if err != nil && !errors.Is(err, ErrConflict) {
				t.Errorf("losing add: %v, want ErrConflict", err)
			}
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	now, err := s.Topic(ctx, "grow")
	if err != nil {
		t.Fatalf("Topic: %v", err)
	}
	if won != 1 || now.Partitions < 5 {
		t.Fatalf("%d adders won, topic has %d partitions; want 1 winner", won, now.Partitions)
	}
	if got, want := partitionKeys(t, s), wantKeys(tp.ID, int(now.Partitions)); !slices.Equal(got, want) {
		t.Fatalf("partition keys:\n%v\nwant:\n%v", got, want)
	}
}

// TestAddTopicPartitionsOverwritesDeadLeftovers: a partition key beyond the
// count, left by an attempt on an older topic revision, is overwritten; one
// created at the current revision (maybe a live attempt) is a conflict.
func TestAddTopicPartitionsOverwritesDeadLeftovers(t *testing.T) {
	s := openStore(t, smallTxnConfig(t))
	ctx := testContext(t)
	tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "grow", ReplicationFactor: 1}, replicaLists(1, 1))
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	leftover := `{"v":1,"replicas":[9],"leader":9,"leader_epoch":0}`
	if _, err := s.Client().Put(ctx, s.partitionKey(tp.ID, 2), leftover); err != nil {
		t.Fatalf("put leftover: %v", err)
	}
	if _, _, err := s.AddTopicPartitions(ctx, tp, replicaLists(4, 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("add over a key created at the current revision = %v, want ErrConflict", err)
	}
	bumped, err := s.UpdateTopic(ctx, tp) // any topic write moves the revision past the leftover
	if err != nil {
		t.Fatalf("UpdateTopic: %v", err)
	}
	_, states, err := s.AddTopicPartitions(ctx, bumped, replicaLists(4, 1))
	if err != nil {
		t.Fatalf("AddTopicPartitions over a dead leftover: %v", err)
	}
	read, err := s.Partitions(ctx, tp.ID)
	if err != nil || len(read) != 5 {
		t.Fatalf("Partitions = %d states, %v; want 5", len(read), err)
	}
	assertSameState(t, read[2], states[1])
}

func TestUpdatePartition(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tp, states, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "cas", ReplicationFactor: 3}, [][]int32{{1, 2, 3}})
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	orig := states[0]
	next := orig
	next.Leader, next.LeaderEpoch = 2, 1
	stored, err := s.UpdatePartition(ctx, next)
	if err != nil {
		t.Fatalf("UpdatePartition: %v", err)
	}
	if stored.Revision <= orig.Revision {
		t.Fatalf("revision %d after update, was %d", stored.Revision, orig.Revision)
	}
	read, err := s.Partitions(ctx, tp.ID)
	if err != nil {
		t.Fatalf("Partitions: %v", err)
	}
	assertSameState(t, read[0], stored)

	with := func(st PartitionState, f func(*PartitionState)) PartitionState { f(&st); return st }
	tests := []struct {
		name string
		st   PartitionState
		want error
	}{
		{"stale revision", with(orig, func(st *PartitionState) { st.LeaderEpoch = 5 }), ErrConflict},
		{"epoch backwards", with(stored, func(st *PartitionState) { st.LeaderEpoch = 0 }), ErrInvalidPartitionState},
		{"another leader at the same epoch", with(stored, func(st *PartitionState) { st.Leader = 3 }), ErrInvalidPartitionState},
		{"leader not a replica", with(stored, func(st *PartitionState) { st.Leader, st.LeaderEpoch = 4, 2 }), ErrInvalidPartitionState},
		{"negative epoch", with(stored, func(st *PartitionState) { st.LeaderEpoch = -1 }), ErrInvalidPartitionState},
		{"no such partition", with(stored, func(st *PartitionState) { st.Partition = 1 }), ErrPartitionNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.UpdatePartition(ctx, tc.st); !errors.Is(err, tc.want) {
				t.Fatalf("UpdatePartition = %v, want %v", err, tc.want)
			}
			read, err := s.Partitions(ctx, tp.ID)
			if err != nil {
				t.Fatalf("Partitions: %v", err)
			}
			assertSameState(t, read[0], stored)
		})
	}

	// The replicas' incarnations are stored and read back; all unknown
	// (zero) is stored as none; more than the replicas is refused.
	withInc, err := s.UpdatePartition(ctx, with(stored, func(st *PartitionState) { st.Incarnations = []uint64{7, 1 << 63, 0} }))
	if err != nil {
		t.Fatalf("UpdatePartition with incarnations: %v", err)
	}
	read, err = s.Partitions(ctx, tp.ID)
	if err != nil {
		t.Fatalf("Partitions: %v", err)
	}
	assertSameState(t, read[0], withInc)
	if _, err := s.UpdatePartition(ctx, with(withInc, func(st *PartitionState) { st.Incarnations = []uint64{1, 2, 3, 4} })); !errors.Is(err, ErrInvalidPartitionState) {
		t.Fatalf("four incarnations for three replicas = %v, want ErrInvalidPartitionState", err)
	}
	stored, err = s.UpdatePartition(ctx, with(withInc, func(st *PartitionState) { st.Incarnations = nil }))
	if err != nil {
		t.Fatalf("UpdatePartition without incarnations: %v", err)
	}

	// Losing the leader keeps the epoch; a new leader then needs the next one.
	none, err := s.UpdatePartition(ctx, with(stored, func(st *PartitionState) { st.Leader = NoLeader }))
	if err != nil {
		t.Fatalf("UpdatePartition to no leader: %v", err)
	}
	if _, err := s.UpdatePartition(ctx, with(none, func(st *PartitionState) { st.Leader = 3 })); !errors.Is(err, ErrInvalidPartitionState) {
		t.Fatalf("new leader at the old epoch = %v, want ErrInvalidPartitionState", err)
	}
	if _, err := s.UpdatePartition(ctx, with(none, func(st *PartitionState) { st.Leader, st.LeaderEpoch = 3, 2 })); err != nil {
		t.Fatalf("new leader at the next epoch: %v", err)
	}
	if _, err := s.DeleteTopic(ctx, "cas"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, err := s.UpdatePartition(ctx, with(none, func(st *PartitionState) { st.LeaderEpoch = 9 })); !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("update after DeleteTopic = %v, want ErrPartitionNotFound", err)
	}
}

// TestUpdatePartitionRefusesDeposedController: two controllers in turn; the
// first one's fence fails once the second is elected, and its write is
// refused with ErrNotController while the second's goes through.
func TestUpdatePartitionRefusesDeposedController(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := clientStore(t, s)
	ctx := testContext(t)
	_, states, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "fenced", ReplicationFactor: 2}, [][]int32{{1, 2}})
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	first, err := s.Campaign(ctx, 1, shortTTL)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	st := states[0]
	st.LeaderEpoch = 1
	st, err = s.UpdatePartition(ctx, st, first.IfLeader())
	if err != nil {
		t.Fatalf("UpdatePartition by the controller: %v", err)
	}
	// The first controller's session is revoked behind its back (as when it
	// is cut off for a TTL) and a second is elected.
	if _, err := other.Client().Revoke(ctx, first.session.Lease()); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	second, err := other.Campaign(ctx, 2, shortTTL)
	if err != nil {
		t.Fatalf("second Campaign: %v", err)
	}
	defer func() { _ = second.Resign(ctx) }()

	stale := st
	stale.Leader, stale.LeaderEpoch = 2, 2
	if _, err := s.UpdatePartition(ctx, stale, first.IfLeader()); !errors.Is(err, ErrNotController) {
		t.Fatalf("UpdatePartition by the deposed controller = %v, want ErrNotController", err)
	}
	if _, err := s.PutPartitionIfMissing(ctx, PartitionState{TopicID: st.TopicID, Partition: 7, Replicas: []int32{1}, Leader: 1}, first.IfLeader()); !errors.Is(err, ErrNotController) {
		t.Fatalf("PutPartitionIfMissing by the deposed controller = %v, want ErrNotController", err)
	}
	if _, err := other.UpdatePartition(ctx, stale, second.IfLeader()); err != nil {
		t.Fatalf("UpdatePartition by the new controller: %v", err)
	}
}

func TestPutPartitionIfMissing(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tp, err := s.CreateTopic(ctx, Topic{Name: "old", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if states, err := s.Partitions(ctx, tp.ID); err != nil || len(states) != 0 {
		t.Fatalf("a topic made by CreateTopic has states %v (%v)", states, err)
	}
	want := PartitionState{TopicID: tp.ID, Partition: 1, Replicas: []int32{1}, Leader: 1}
	put, err := s.PutPartitionIfMissing(ctx, want)
	if err != nil {
		t.Fatalf("PutPartitionIfMissing: %v", err)
	}
	want.Revision = put.Revision
	assertSameState(t, put, want)
	again, err := s.PutPartitionIfMissing(ctx, PartitionState{TopicID: tp.ID, Partition: 1, Replicas: []int32{2}, Leader: NoLeader, LeaderEpoch: 3})
	if err != nil {
		t.Fatalf("second PutPartitionIfMissing: %v", err)
	}
	assertSameState(t, again, put)
	if _, err := s.PutPartitionIfMissing(ctx, PartitionState{TopicID: tp.ID, Partition: 0}); !errors.Is(err, ErrInvalidPartitionState) {
		t.Fatalf("PutPartitionIfMissing without replicas = %v, want ErrInvalidPartitionState", err)
	}
}

func TestAllPartitionsSorted(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	var ids [][16]byte
	for _, name := range []string{"a", "b", "c"} {
		tp, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: name, ReplicationFactor: 1}, replicaLists(12, 1))
		if err != nil {
			t.Fatalf("CreateTopicWithPartitions: %v", err)
		}
		ids = append(ids, tp.ID)
	}
	all, rev, err := s.AllPartitions(ctx)
	if err != nil {
		t.Fatalf("AllPartitions: %v", err)
	}
	if len(all) != 36 || rev < all[len(all)-1].Revision {
		t.Fatalf("%d states at revision %d, want 36", len(all), rev)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	for i, st := range all {
		if st.TopicID != ids[i/12] || st.Partition != int32(i%12) {
			t.Fatalf("state %d is %s-%d, want %s-%d", i, uuid.UUID(st.TopicID), st.Partition, uuid.UUID(ids[i/12]), i%12)
		}
	}
	if _, err := s.Client().Put(ctx, s.partitionKey(ids[0], 99), `{"v":1,`); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, _, err := s.AllPartitions(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("AllPartitions over a corrupt state = %v, want ErrCorrupt", err)
	}
}

const testTopicID = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"

func TestDecodePartition(t *testing.T) {
	const key = testTopicID + "/3"
	tests := []struct {
		name, key, value string
		want             error
	}{
		{"valid", key, `{"v":1,"replicas":[1,2,3],"leader":2,"leader_epoch":4}`, nil},
		{"no leader", key, `{"v":1,"replicas":[1],"leader":-1,"leader_epoch":0}`, nil},
		{"unknown fields ignored", key, `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0,"version":3}`, nil},
		{"newer version", key, `{"v":2,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrUnknownVersion},
		{"newer version, other shape", key, `{"v":2,"assignment":{}}`, ErrUnknownVersion},
		{"no version", key, `{"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"not json", key, `{"v":1,`, ErrCorrupt},
		{"no leader field", key, `{"v":1,"replicas":[0],"leader_epoch":0}`, ErrCorrupt},
		{"no epoch field", key, `{"v":1,"replicas":[0],"leader":0}`, ErrCorrupt},
		{"no replicas", key, `{"v":1,"replicas":[],"leader":-1,"leader_epoch":0}`, ErrCorrupt},
		{"repeated replica", key, `{"v":1,"replicas":[1,1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"leader not a replica", key, `{"v":1,"replicas":[1],"leader":2,"leader_epoch":0}`, ErrCorrupt},
		{"negative epoch", key, `{"v":1,"replicas":[1],"leader":1,"leader_epoch":-1}`, ErrCorrupt},
		{"epoch overflows", key, `{"v":1,"replicas":[1],"leader":1,"leader_epoch":4294967296}`, ErrCorrupt},
		{"key without partition", testTopicID, `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"key with leading zero", testTopicID + "/03", `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"key with negative partition", testTopicID + "/-1", `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"key with uppercase id", strings.ToUpper(testTopicID) + "/1", `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
		{"key with zero id", uuid.Nil.String() + "/1", `{"v":1,"replicas":[1],"leader":1,"leader_epoch":0}`, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := decodePartition(tc.key, &mvccpb.KeyValue{Value: []byte(tc.value), ModRevision: 5})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("decodePartition: got %v, want %v", err, tc.want)
			}
			if err == nil && (st.Revision != 5 || st.Partition != 3 || uuid.UUID(st.TopicID).String() != testTopicID) {
				t.Fatalf("decoded %+v", st)
			}
		})
	}
}

func TestEncodeDecodePartitionRoundTrip(t *testing.T) {
	in := PartitionState{TopicID: uuid.MustParse(testTopicID), Partition: 12, Replicas: []int32{3, 1, 2},
		Leader: 1, LeaderEpoch: 7, Revision: 9}
	b, err := encodePartition(in)
	if err != nil {
		t.Fatalf("encodePartition: %v", err)
	}
	if !strings.HasPrefix(string(b), `{"v":1,`) {
		t.Errorf("encoded state %s does not start with \"v\":1", b)
	}
	out, err := decodePartition(testTopicID+"/12", &mvccpb.KeyValue{Value: b, ModRevision: 9})
	if err != nil {
		t.Fatalf("decodePartition: %v", err)
	}
	assertSameState(t, out, in)
	if _, err := encodePartition(PartitionState{TopicID: in.TopicID, Replicas: []int32{1}, Leader: 2}); !errors.Is(err, ErrInvalidPartitionState) {
		t.Errorf("encodePartition of an invalid state = %v, want ErrInvalidPartitionState", err)
	}
}

// FuzzDecodePartition: no input panics, and a decoded state re-encodes to
// a value that decodes to the same state.
func FuzzDecodePartition(f *testing.F) {
	f.Add(testTopicID+"/3", []byte(`{"v":1,"replicas":[1,2,3],"leader":2,"leader_epoch":4}`))
	f.Add(testTopicID+"/0", []byte(`{"v":1,"replicas":[7],"leader":-1,"leader_epoch":0}`))
	f.Add(testTopicID+"/2147483647", []byte(`{"v":2}`))
	f.Add("x/1", []byte(`{"v":1,"replicas":null,"leader":null}`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		st, err := decodePartition(key, &mvccpb.KeyValue{Value: value, ModRevision: 3})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("decodePartition error %v is neither ErrCorrupt nor ErrUnknownVersion", err)
			}
			return
		}
		b, err := encodePartition(st)
		if err != nil {
			t.Fatalf("decoded state %+v does not encode: %v", st, err)
		}
		again, err := decodePartition(key, &mvccpb.KeyValue{Value: b, ModRevision: 3})
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", b, err)
		}
		assertSameState(t, again, st)
	})
}
