package broker

// This file owns the quota follower: the goroutine that keeps the broker's
// quota.Table equal to the quota records in etcd (meta.WatchQuotas), so a
// change made through any broker applies on every broker within about a
// second (etcd's watch latency). It lives here rather than in broker/quota
// so that the quota package stays free of meta and etcd (sluicectl links
// it for the list of keys).
//
// Invariant: the follow goroutine is the only caller of its Table's
// Replace, and it publishes snapshots in revision order.

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// quotaFollower keeps a Table current until close.
type quotaFollower struct {
	table  *quota.Table
	log    zerolog.Logger
	cancel context.CancelFunc
	done   chan struct{} // closed when the follow goroutine has ended
}

// followQuotas reads every quota record, publishes them in a new Table and
// follows their changes until close or ctx ends. An error means the first
// read failed: a broker must not serve on limits it did not read.
func followQuotas(ctx context.Context, store *meta.Store, log zerolog.Logger) (*quotaFollower, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	view, err := store.WatchQuotas(fctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("quotas: %w", err)
	}
	f := &quotaFollower{table: quota.NewTable(), log: log.With().Str("component", "quota").Logger(),
		cancel: cancel, done: make(chan struct{})}
	changed := view.Changed()
	f.apply(view.Snapshot())
	go f.follow(fctx, view, changed)
	return f, nil
}

// close stops following and waits for it; the last table stays in force.
// Closing twice is harmless.
func (f *quotaFollower) close() {
	f.cancel()
	<-f.done
}

func (f *quotaFollower) follow(ctx context.Context, view *meta.QuotaView, changed <-chan struct{}) {
	defer close(f.done)
	view.Follow(ctx, changed, f.apply)
}

// apply publishes one snapshot. A corrupt record leaves its tenant
// unlimited (the snapshot lacks it); the watch has logged it.
func (f *quotaFollower) apply(snap meta.QuotaSnapshot) {
	entries := make(map[string]quota.Entry, len(snap.Tenants))
	for name, q := range snap.Tenants {
		entries[name] = quota.Entry{Limits: quota.Limits(q.Limits), Weight: q.Weight, Class: q.PriorityClass}
	}
	f.table.Replace(snap.Revision, entries)
	f.log.Debug().Int64("revision", snap.Revision).Int("tenants", len(entries)).Msg("quotas applied")
}
