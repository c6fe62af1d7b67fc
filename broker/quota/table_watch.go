package quota

// This file owns Follow: the goroutine that keeps a Table equal to the
// quota records in etcd (meta.WatchQuotas), so a change made through any
// broker applies on every broker within about a second (etcd's watch
// latency). It is the one file of the package that imports meta.
//
// Invariant: the follow goroutine is the only caller of its Table's
// Replace, and it publishes snapshots in revision order.

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/meta"
)

// Follower keeps a Table current until Close.
type Follower struct {
	table  *Table
	cancel context.CancelFunc
	done   chan struct{} // closed when the follow goroutine has ended
}

// Follow reads every quota record, publishes them in a new Table and
// follows their changes until Close or ctx ends. An error means the first
// read failed: a broker must not serve on limits it did not read.
func Follow(ctx context.Context, store *meta.Store, log zerolog.Logger) (*Follower, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	view, err := store.WatchQuotas(fctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("quota: %w", err)
	}
	f := &Follower{table: NewTable(), cancel: cancel, done: make(chan struct{})}
	log = log.With().Str("component", "quota").Logger()
	changed := view.Changed()
	f.apply(view.Snapshot(), log)
	go f.follow(fctx, view, changed, log)
	return f, nil
}

// Table is the followed table.
func (f *Follower) Table() *Table { return f.table }

// Close stops following and waits for it; the last table stays in force.
// Closing twice is harmless.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}

func (f *Follower) follow(ctx context.Context, view *meta.QuotaView, changed <-chan struct{}, log zerolog.Logger) {
	defer close(f.done)
	for {
		select {
		case <-changed:
		case <-view.Done():
			return
		case <-ctx.Done():
			return
		}
		changed = view.Changed()
		f.apply(view.Snapshot(), log)
	}
}

// apply publishes one snapshot. A corrupt record leaves its tenant
// unlimited (the snapshot lacks it); the watch has logged it.
func (f *Follower) apply(snap meta.QuotaSnapshot, log zerolog.Logger) {
	entries := make(map[string]Entry, len(snap.Tenants))
	for name, q := range snap.Tenants {
		entries[name] = Entry{Limits: Limits(q.Limits), Weight: q.Weight, Class: q.PriorityClass}
	}
	f.table.Replace(snap.Revision, entries)
	log.Debug().Int64("revision", snap.Revision).Int("tenants", len(entries)).Msg("quotas applied")
}
