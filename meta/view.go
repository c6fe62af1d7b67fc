package meta

// This file owns view, what a watch of the Store publishes to its readers:
// the latest snapshot of some records and a channel closed at each new
// one. WatchSecurity's SecurityView and WatchQuotas' QuotaView are views.
//
// Invariant: a snapshot is published whole and never modified after;
// changed is closed exactly once per publish, and replaced in the same
// critical section, so a reader that took Changed before Snapshot misses no
// publish.

import (
	"context"
	"sync"
)

// view follows one watch's snapshots. Safe for concurrent use.
type view[S any] struct {
	done chan struct{} // closed when the watch's goroutine has ended

	mu      sync.Mutex
	snap    S             // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced by each publish
}

func newView[S any]() *view[S] {
	return &view[S]{done: make(chan struct{}), changed: make(chan struct{})}
}

// Snapshot returns the latest state.
func (v *view[S]) Snapshot() S {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.snap
}

// Changed returns a channel closed when a snapshot newer than the current
// one is published. To miss nothing, take it before Snapshot:
//
//	ch := v.Changed()
//	rebuild(v.Snapshot())
//	<-ch // then loop
//
// Once the view is Done the channel is never closed: wait on both.
func (v *view[S]) Changed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// Done is closed when the view stops following changes (its ctx ended or
// the Store closed); the last snapshot stays readable.
func (v *view[S]) Done() <-chan struct{} { return v.done }

func (v *view[S]) publish(snap S) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.snap = snap
	close(v.changed)
	v.changed = make(chan struct{})
}

// Follow calls apply with each snapshot published after the one changed
// was taken with (see Changed), until the view is Done or ctx ends. It
// blocks: run it on the follower's own goroutine.
func (v *view[S]) Follow(ctx context.Context, changed <-chan struct{}, apply func(S)) {
	for {
		select {
		case <-changed:
		case <-v.Done():
			return
		case <-ctx.Done():
			return
		}
		changed = v.Changed()
		apply(v.Snapshot())
	}
}
