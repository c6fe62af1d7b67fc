package meta

// This file owns WatchTopics: a stream of topic changes for brokers that
// keep a cache of topic metadata.
//
// Invariant: a watcher's events, applied in order to the topic set it
// started from, reproduce the stored topic set; after a gap (compaction,
// initial read failure) the watcher re-reads the whole set and emits the
// difference, so a consumer must treat events as idempotent upserts and
// deletes.
//
// Each watcher is one goroutine owned by the Store (Store.watchers); its
// known map and revision are local to it.

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EventKind says whether a topic was put or deleted.
type EventKind uint8

const (
	// EventPut: the topic was created or updated.
	EventPut EventKind = iota + 1
	// EventDelete: the topic was deleted; the event carries its last state.
	EventDelete
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// TopicEvent is one change to the topic set.
type TopicEvent struct {
	Kind  EventKind
	Topic Topic
}

// Watcher tunables.
const (
	watchBuffer     = 64 // events buffered before the watcher waits for its reader
	watchRetryFirst = 50 * time.Millisecond
	watchRetryMax   = 5 * time.Second
)

// WatchTopics streams topic changes made after the call (the state at the
// call is read before it returns; if that read fails, the first events are
// puts for every topic). The channel closes when ctx ends or the Store
// closes. A slow reader delays the watcher; it does not lose events.
func (s *Store) WatchTopics(ctx context.Context) <-chan TopicEvent {
	out := make(chan TopicEvent, watchBuffer)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(out)
		return out
	}
	s.watchers.Add(1)
	s.mu.Unlock()

	w := &topicWatcher{s: s, out: out, known: map[string]Topic{}}
	if topics, rev, err := s.listTopics(ctx); err == nil {
		for _, t := range topics {
			w.known[t.Name] = t
		}
		w.rev = rev
	} else {
		s.log.Warn().Err(err).Msg("topic watch: initial read failed; will resync")
	}
	go w.run(ctx)
	return out
}

// topicWatcher is the state of one WatchTopics goroutine.
type topicWatcher struct {
	s     *Store
	out   chan<- TopicEvent
	known map[string]Topic // the topic set as of rev
	rev   int64            // revision known reflects; 0 = must resync
}

func (w *topicWatcher) run(ctx context.Context) {
	defer w.s.watchers.Done()
	defer close(w.out)
	w.s.watchLoop(ctx, w)
}

func (w *topicWatcher) synced() bool { return w.rev != 0 }

// watchSteps is one kind of watch: how to re-read the whole state, and how to
// follow changes from the revision it knows.
type watchSteps interface {
	synced() bool // a revision is known: follow changes rather than re-read
	resync(ctx context.Context) bool
	watch(ctx context.Context) bool
}

// watchLoop drives a watcher until ctx ends or the Store closes: it re-reads
// the state until that succeeds, then follows changes, and backs off after
// any step that made no progress. The caller is a goroutine counted in
// s.watchers; it closes its channel and calls Done after this returns.
func (s *Store) watchLoop(ctx context.Context, w watchSteps) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends when watchLoop returns (cancel) at the latest
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	backoff := watchRetryFirst
	for ctx.Err() == nil {
		var progressed bool
		if w.synced() {
			progressed = w.watch(ctx)
		} else {
			progressed = w.resync(ctx)
		}
		if progressed {
			backoff = watchRetryFirst
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, watchRetryMax)
	}
}

// resync re-reads the topic set and emits its difference from known.
func (w *topicWatcher) resync(ctx context.Context) bool {
	topics, rev, err := w.s.listTopics(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("topic watch: resync failed")
		}
		return false
	}
	current := make(map[string]Topic, len(topics))
	for _, t := range topics {
		current[t.Name] = t
		if old, ok := w.known[t.Name]; !ok || old.Revision != t.Revision {
			if !w.emit(ctx, TopicEvent{Kind: EventPut, Topic: t}) {
				return false
			}
		}
	}
	gone := make([]string, 0)
	for name := range w.known {
		if _, ok := current[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		if !w.emit(ctx, TopicEvent{Kind: EventDelete, Topic: w.known[name]}) {
			return false
		}
	}
	w.known, w.rev = current, rev
	return true
}

// watch follows etcd's watch from rev+1 until it ends; it reports whether
// any events arrived. A compacted revision forces a resync.
func (w *topicWatcher) watch(ctx context.Context) bool {
	prefix := w.s.topicsPrefix()
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), prefix,
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1), clientv3.WithPrevKV())
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("topic watch: revision compacted; resyncing")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("topic watch interrupted")
			}
			return progressed
		}
		for _, ev := range resp.Events {
			progressed = true
			te, ok := w.event(prefix, ev)
			w.rev = ev.Kv.ModRevision
			if ok && !w.emit(ctx, te) {
				return progressed
			}
		}
	}
	return progressed
}

// event turns an etcd event into a TopicEvent and applies it to known.
func (w *topicWatcher) event(prefix string, ev *clientv3.Event) (TopicEvent, bool) {
	name := strings.TrimPrefix(string(ev.Kv.Key), prefix)
	if ev.Type == mvccpb.PUT {
		t, err := decodeTopic(name, ev.Kv)
		if err != nil {
			w.s.log.Error().Err(err).Str("topic", name).Msg("topic watch: skipping undecodable topic")
			return TopicEvent{}, false
		}
		w.known[name] = t
		return TopicEvent{Kind: EventPut, Topic: t}, true
	}
	t, ok := w.known[name]
	if ev.PrevKv != nil {
		if prev, err := decodeTopic(name, ev.PrevKv); err == nil {
			t, ok = prev, true
		}
	}
	if !ok {
		t = Topic{Name: name}
	}
	delete(w.known, name)
	return TopicEvent{Kind: EventDelete, Topic: t}, true
}

func (w *topicWatcher) emit(ctx context.Context, ev TopicEvent) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
