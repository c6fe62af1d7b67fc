package meta

// This file owns WatchPartitions: a stream of partition state changes for
// the controller and for brokers that keep a cache of leaders and epochs.
//
// Invariant: a watcher's events, applied in order to the states it started
// from, reproduce the stored states; after a gap (compaction, initial read
// failure) the watcher re-reads every state, emits a put for each and a
// delete for each it knew that is gone, so a consumer must treat events as
// idempotent upserts and deletes.
//
// Each watcher is one goroutine owned by the Store (Store.watchers); its
// known map and revision are local to it.

import (
	"context"
	"errors"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PartitionEvent is one change to the partition states. A delete carries
// the last known state (at least its TopicID and Partition).
type PartitionEvent struct {
	Kind  EventKind
	State PartitionState
}

// WatchPartitions streams changes to every partition state made after the
// call (the states at the call are read before it returns; if that read
// fails, the first events are puts for every state). Deleting a topic shows
// as a delete per partition. An undecodable state is logged and skipped.
// The channel closes when ctx ends or the Store closes. A slow reader delays
// the watcher; it does not lose events.
func (s *Store) WatchPartitions(ctx context.Context) <-chan PartitionEvent {
	out := make(chan PartitionEvent, watchBuffer)
	if !s.own() {
		close(out)
		return out
	}
	w := &partitionWatcher{s: s, out: out, known: map[partitionID]PartitionState{}}
	if states, rev, err := s.listPartitions(ctx, s.allPartitionsPrefix(), true); err == nil {
		for _, st := range states {
			w.known[idOf(st)] = st
		}
		w.rev = rev
	} else {
		s.log.Warn().Err(err).Msg("partition watch: initial read failed; will resync")
	}
	go w.run(ctx)
	return out
}

// partitionWatcher is the state of one WatchPartitions goroutine.
type partitionWatcher struct {
	s     *Store
	out   chan<- PartitionEvent
	known map[partitionID]PartitionState // the states as of rev
	rev   int64                          // revision known reflects; 0 = must resync
}

func (w *partitionWatcher) run(ctx context.Context) {
	defer w.s.watchers.Done()
	defer close(w.out)
	w.s.watchLoop(ctx, w)
}

func (w *partitionWatcher) synced() bool { return w.rev != 0 }

// resync re-reads every state, emits a put for each and a delete for each
// known state that is gone.
func (w *partitionWatcher) resync(ctx context.Context) bool {
	states, rev, err := w.s.listPartitions(ctx, w.s.allPartitionsPrefix(), true)
	if err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("partition watch: resync failed")
		}
		return false
	}
	current := make(map[partitionID]PartitionState, len(states))
	for _, st := range states {
		current[idOf(st)] = st
		if !w.emit(ctx, PartitionEvent{Kind: EventPut, State: st}) {
			return false
		}
	}
	var gone []PartitionState
	for id, st := range w.known {
		if _, ok := current[id]; !ok {
			gone = append(gone, st)
		}
	}
	slices.SortFunc(gone, byPartition)
	for _, st := range gone {
		if !w.emit(ctx, PartitionEvent{Kind: EventDelete, State: st}) {
			return false
		}
	}
	w.known, w.rev = current, rev
	return true
}

// watch follows etcd's watch from rev+1 until it ends; it reports whether
// any events arrived. A compacted revision forces a resync.
func (w *partitionWatcher) watch(ctx context.Context) bool {
	prefix := w.s.allPartitionsPrefix()
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), prefix,
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1), clientv3.WithPrevKV())
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("partition watch: revision compacted; resyncing")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("partition watch interrupted")
			}
			return progressed
		}
		for _, ev := range resp.Events {
			progressed = true
			pe, ok := w.event(prefix, ev)
			w.rev = ev.Kv.ModRevision
			if ok && !w.emit(ctx, pe) {
				return progressed
			}
		}
	}
	return progressed
}

// event turns an etcd event into a PartitionEvent and applies it to known.
func (w *partitionWatcher) event(prefix string, ev *clientv3.Event) (PartitionEvent, bool) {
	rel := strings.TrimPrefix(string(ev.Kv.Key), prefix)
	if ev.Type == mvccpb.PUT {
		st, err := decodePartition(rel, ev.Kv)
		if err != nil {
			w.s.log.Error().Err(err).Msg("partition watch: skipping undecodable partition state")
			return PartitionEvent{}, false
		}
		w.known[idOf(st)] = st
		return PartitionEvent{Kind: EventPut, State: st}, true
	}
	pid, err := parsePartitionKey(rel)
	if err != nil {
		return PartitionEvent{}, false // not a state we could have reported
	}
	last, ok := w.known[pid]
	if !ok {
		last = PartitionState{TopicID: pid.topic, Partition: pid.n, Leader: NoLeader}
	}
	if ev.PrevKv != nil {
		if prev, err := decodePartition(rel, ev.PrevKv); err == nil {
			last = prev
		}
	}
	delete(w.known, pid)
	return PartitionEvent{Kind: EventDelete, State: last}, true
}

func (w *partitionWatcher) emit(ctx context.Context, ev PartitionEvent) bool {
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
