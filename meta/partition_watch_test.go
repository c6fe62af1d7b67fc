package meta

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// nextPartitionEvent waits for the next event, failing the test at the deadline.
func nextPartitionEvent(t *testing.T, ch <-chan PartitionEvent) PartitionEvent {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("partition watch channel closed early")
		}
		return ev
	case <-deadline.C:
		t.Fatal("no partition event before the deadline")
	}
	return PartitionEvent{}
}

// expectPartitionEvents reads len(want) events and compares them in order.
func expectPartitionEvents(t *testing.T, ch <-chan PartitionEvent, want ...PartitionEvent) {
	t.Helper()
	for i, w := range want {
		ev := nextPartitionEvent(t, ch)
		if ev.Kind != w.Kind {
			t.Fatalf("event %d: %v of %d, want %v of %d", i, ev.Kind, ev.State.Partition, w.Kind, w.State.Partition)
		}
		assertSameState(t, ev.State, w.State)
	}
}

func events(kind EventKind, states ...PartitionState) []PartitionEvent {
	out := make([]PartitionEvent, len(states))
	for i, st := range states {
		out[i] = PartitionEvent{Kind: kind, State: st}
	}
	return out
}

func TestWatchPartitionsSeesCreateUpdateDelete(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, _, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "before", ReplicationFactor: 1}, replicaLists(2, 1)); err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := s.WatchPartitions(wctx)

	tp, created, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "watched", ReplicationFactor: 3}, replicaLists(3, 3))
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	// The states before the watch are not replayed.
	expectPartitionEvents(t, ch, events(EventPut, created...)...)

	up := created[1]
	up.Leader, up.LeaderEpoch = up.Replicas[1], 1
	up, err = s.UpdatePartition(ctx, up)
	if err != nil {
		t.Fatalf("UpdatePartition: %v", err)
	}
	expectPartitionEvents(t, ch, PartitionEvent{Kind: EventPut, State: up})

	grown, added, err := s.AddTopicPartitions(ctx, tp, replicaLists(1, 3))
	if err != nil {
		t.Fatalf("AddTopicPartitions: %v", err)
	}
	expectPartitionEvents(t, ch, events(EventPut, added...)...)

	if _, err := s.DeleteTopic(ctx, grown.Name); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	// A delete carries the last state.
	expectPartitionEvents(t, ch, events(EventDelete, created[0], up, created[2], added[0])...)

	cancel()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline.C:
			t.Fatal("partition watch not closed after its context ended")
		}
	}
}

// TestWatchPartitionsResyncsAfterCompaction starts a watcher from a revision
// that is then compacted away, with a state in its known set that has been
// deleted meanwhile: it must resync (a put for every state, a delete for the
// vanished one) and then follow new changes.
func TestWatchPartitionsResyncsAfterCompaction(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	_, doomed, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "doomed", ReplicationFactor: 1}, replicaLists(1, 1))
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	_, stale, err := s.AllPartitions(ctx)
	if err != nil {
		t.Fatalf("AllPartitions: %v", err)
	}
	if _, err := s.DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	tp, kept, err := s.CreateTopicWithPartitions(ctx, Topic{Name: "kept", ReplicationFactor: 2}, replicaLists(2, 2))
	if err != nil {
		t.Fatalf("CreateTopicWithPartitions: %v", err)
	}
	resp, err := s.Client().Compact(ctx, currentRevision(t, s))
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	t.Logf("compacted at revision %d; the watcher knows revision %d", resp.Header.Revision, stale)

	out := make(chan PartitionEvent, watchBuffer)
	w := &partitionWatcher{s: s, out: out, rev: stale, known: map[partitionID]PartitionState{idOf(doomed[0]): doomed[0]}}
	if !s.own() {
		t.Fatal("store closed")
	}
	wctx, cancel := context.WithCancel(ctx)
	go w.run(wctx)
	defer func() {
		cancel()
		drainWithin(t, out, "run to close its channel after its cancel")
	}()

	// Following the changes would give the delete first; a resync gives the
	// puts of every state first.
	want := append(events(EventPut, kept...), PartitionEvent{Kind: EventDelete, State: doomed[0]})
	expectPartitionEvents(t, out, want...)

	up := kept[0]
	up.Replicas = []int32{up.Replicas[1], up.Replicas[0]}
	up, err = s.UpdatePartition(ctx, up)
	if err != nil {
		t.Fatalf("UpdatePartition: %v", err)
	}
	expectPartitionEvents(t, out, PartitionEvent{Kind: EventPut, State: up})
	if _, err := s.DeleteTopic(ctx, tp.Name); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	expectPartitionEvents(t, out, events(EventDelete, up, kept[1])...)
}

func TestWatchPartitionsSkipsCorruptAndClosesWithStore(t *testing.T) {
	s, err := Open(testContext(t), embeddedConfig(t), zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s.Close() }()
	ctx := testContext(t)
	ch := s.WatchPartitions(ctx)
	id := newKafkaUUID()
	if _, err := s.Client().Put(ctx, s.partitionKey(id, 0), `{"v":1,`); err != nil {
		t.Fatalf("Put: %v", err)
	}
	st, err := s.PutPartitionIfMissing(ctx, PartitionState{TopicID: id, Partition: 1, Replicas: []int32{4}, Leader: 4})
	if err != nil {
		t.Fatalf("PutPartitionIfMissing: %v", err)
	}
	expectPartitionEvents(t, ch, PartitionEvent{Kind: EventPut, State: st})

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("event after the store closed")
		}
	case <-deadline.C:
		t.Fatal("partition watch not closed with the store")
	}
	if _, ok := recvWithin(t, s.WatchPartitions(ctx), "a partition watch on a closed store to close"); ok {
		t.Fatal("a watch on a closed store delivered an event")
	}
}

// currentRevision is the store's current etcd revision.
func currentRevision(t *testing.T, s *Store) int64 {
	t.Helper()
	resp, err := s.Client().Get(testContext(t), s.prefix+"layout")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return resp.Header.Revision
}
