package meta

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func withPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// nextEvent waits for the next event, failing the test at the deadline.
func nextEvent(t *testing.T, ch <-chan TopicEvent) TopicEvent {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed early")
		}
		return ev
	case <-deadline.C:
		t.Fatal("no topic event before the deadline")
	}
	return TopicEvent{}
}

// waitClosed drains ch until it closes, failing the test at the deadline.
func waitClosed(t *testing.T, ch <-chan TopicEvent) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline.C:
			t.Fatal("watch channel not closed before the deadline")
		}
	}
}

func TestWatchTopicsSeesPutAndDelete(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, err := s.CreateTopic(ctx, Topic{Name: "before", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}

	wctx, cancel := context.WithCancel(ctx)
	events := s.WatchTopics(wctx)

	created, err := s.CreateTopic(ctx, Topic{Name: "watched", Partitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	ev := nextEvent(t, events)
	if ev.Kind != EventPut {
		t.Fatalf("first event %v %q, want put of %q (state before the watch must not be replayed)", ev.Kind, ev.Topic.Name, "watched")
	}
	assertSameTopic(t, ev.Topic, created)

	created.Partitions = 3
	updated, err := s.UpdateTopic(ctx, created)
	if err != nil {
		t.Fatalf("UpdateTopic: %v", err)
	}
	ev = nextEvent(t, events)
	if ev.Kind != EventPut {
		t.Fatalf("second event %v, want put", ev.Kind)
	}
	assertSameTopic(t, ev.Topic, updated)

	if _, err := s.DeleteTopic(ctx, "watched"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	ev = nextEvent(t, events)
	if ev.Kind != EventDelete || ev.Topic.Name != "watched" || ev.Topic.ID != created.ID {
		t.Fatalf("third event %v %+v, want delete of watched with its ID", ev.Kind, ev.Topic)
	}

	cancel()
	waitClosed(t, events)
}

func TestWatchTopicsClosesWithStore(t *testing.T) {
	cfg := embeddedConfig(t)
	s := openStore(t, cfg)
	events := s.WatchTopics(testContext(t))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, events)
	// A watch on a closed store is closed at once.
	waitClosed(t, s.WatchTopics(testContext(t)))
}

func TestWatcherResyncEmitsDifference(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	kept, err := s.CreateTopic(ctx, Topic{Name: "kept", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	changed, err := s.CreateTopic(ctx, Topic{Name: "changed", Partitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	out := make(chan TopicEvent, watchBuffer)
	gone := Topic{Name: "gone", ID: newKafkaUUID(), Partitions: 1, ReplicationFactor: 1, Revision: 1}
	stale := changed
	stale.Revision = 1
	w := &topicWatcher{s: s, out: out, known: map[string]Topic{
		"kept": kept, "changed": stale, "gone": gone,
	}}
	if !w.resync(ctx) {
		t.Fatal("resync failed")
	}
	close(out)
	var got []TopicEvent
	for ev := range out {
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Kind != EventPut || got[0].Topic.Name != "changed" ||
		got[1].Kind != EventDelete || got[1].Topic.Name != "gone" {
		t.Fatalf("resync events %+v, want put changed, delete gone", got)
	}
	if w.rev == 0 || len(w.known) != 2 {
		t.Errorf("after resync rev=%d known=%d topics, want rev>0 and 2 topics", w.rev, len(w.known))
	}
}
