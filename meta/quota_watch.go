package meta

// This file owns WatchQuotas: a broker's cache of every tenant's quota
// record (everything under <prefix>quotas/), kept current by one etcd
// watch, from which the broker's quota table is built.
//
// Invariant: a snapshot is the stored state under <prefix>quotas/ at one
// etcd revision, its Revision: the first is one read at one revision, each
// later one applies a whole watch response's events to the one before.
// Invariant: a snapshot and its map are never changed after publication;
// the next change copies the map.
// Invariant: Changed's channel is closed exactly when a newer snapshot is
// published, and after it is replaced.
//
// After a compaction of the revision the watch needs, the watcher reads
// everything again; after any other watch error it follows again from the
// revision it has (watchLoop in watch.go backs off), so no event is
// skipped.
//
// Each view is one goroutine owned by the Store (Store.watchers), ending
// with its ctx or the Store's Close. The watcher's map and revision are
// local to that goroutine; QuotaView.mu guards the published snapshot and
// the Changed channel.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// QuotaSnapshot is every stored quota record at one etcd revision. It is
// shared by every reader and must not be modified.
type QuotaSnapshot struct {
	Revision int64
	Tenants  map[string]TenantQuotas // by tenant; a tenant absent has DefaultQuotas
	// Corrupt lists the keys whose values could not be decoded (or were
	// written by a newer version), sorted; their tenants are absent above.
	Corrupt []string
}

// QuotaView follows the quota records (WatchQuotas); view.go has its
// methods.
type QuotaView = view[QuotaSnapshot]

// WatchQuotas reads every quota record at one revision and returns a view
// that follows their changes until ctx ends or the Store closes. An error
// means the first read failed or the Store is closed.
func (s *Store) WatchQuotas(ctx context.Context) (*QuotaView, error) {
	v := newView[QuotaSnapshot]()
	w := &quotaWatcher{s: s, view: v}
	if err := w.load(ctx); err != nil {
		return nil, fmt.Errorf("meta: watch quotas: %w", err)
	}
	if !s.own() {
		close(v.done)
		return nil, fmt.Errorf("meta: watch quotas: %w", ErrClosed)
	}
	go func() {
		defer s.watchers.Done()
		defer close(v.done)
		s.watchLoop(ctx, w)
	}()
	return v, nil
}

// quotaWatcher is the state of one WatchQuotas goroutine. Its maps are
// those of the last published snapshot until a change copies them.
type quotaWatcher struct {
	s       *Store
	view    *QuotaView
	rev     int64 // revision of the last snapshot; 0 = must read everything again
	tenants map[string]TenantQuotas
	corrupt map[string]struct{} // etcd keys
}

func (w *quotaWatcher) synced() bool { return w.rev != 0 }

// load reads every record at one revision and publishes them.
func (w *quotaWatcher) load(ctx context.Context) error {
	resp, err := w.s.client.Get(ctx, w.s.quotasPrefix(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	w.tenants, w.corrupt = map[string]TenantQuotas{}, map[string]struct{}{}
	for _, kv := range resp.Kvs {
		w.put(string(kv.Key), kv.Value)
	}
	w.rev = resp.Header.Revision
	w.publish()
	return nil
}

func (w *quotaWatcher) resync(ctx context.Context) bool {
	if err := w.load(ctx); err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("quota watch: resync failed")
		}
		return false
	}
	return true
}

// watch follows etcd's watch from rev+1 until it ends; it reports whether
// any events arrived. A compacted revision forces a resync.
func (w *quotaWatcher) watch(ctx context.Context) bool {
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), w.s.quotasPrefix(),
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1))
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("quota watch: revision compacted; reading everything again")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("quota watch interrupted")
			}
			return progressed
		}
		if len(resp.Events) == 0 {
			continue
		}
		progressed = true
		w.tenants, w.corrupt = maps.Clone(w.tenants), maps.Clone(w.corrupt)
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			if ev.Type == mvccpb.DELETE {
				w.remove(key)
			} else {
				w.put(key, ev.Kv.Value)
			}
			w.rev = ev.Kv.ModRevision
		}
		w.publish()
	}
	return progressed
}

// put stores the record under key, or marks the key corrupt. The maps must
// have been copied since the last publish.
func (w *quotaWatcher) put(key string, val []byte) {
	w.remove(key)
	q, err := w.s.decodeQuotas(key, val)
	if err != nil {
		w.s.log.Error().Err(err).Str("key", key).Msg("quota watch: undecodable record; its tenant is left unlimited")
		w.corrupt[key] = struct{}{}
		return
	}
	w.tenants[q.Tenant] = q
}

// remove forgets the record of key; a record names the tenant of its key
// (decodeQuotas checks it).
func (w *quotaWatcher) remove(key string) {
	delete(w.corrupt, key)
	delete(w.tenants, strings.TrimPrefix(key, w.s.quotasPrefix()))
}

func (w *quotaWatcher) publish() {
	w.view.publish(QuotaSnapshot{Revision: w.rev, Tenants: w.tenants, Corrupt: slices.Sorted(maps.Keys(w.corrupt))})
}
