package meta

// This file owns WatchSecurity: a broker's cache of every tenant, user, API
// key and ACL binding (everything under <prefix>security/), kept current by
// one etcd watch, from which the broker builds its authenticator and
// authoriser.
//
// Invariant: a snapshot is the stored state under <prefix>security/ at one
// etcd revision, its Revision: the first is one read at one revision, and
// each later one applies every event of the watch that follows from the
// revision before, a whole watch response at a time (etcd never splits one
// revision's events across responses), so a transaction that deletes a user
// and its API keys is never half seen.
// Invariant: a snapshot and everything it holds is never changed after it is
// published; the next change builds new maps (copied on write).
// Invariant: Changed's channel is closed exactly when a newer snapshot is
// published, and after it is replaced.
//
// After a compaction of the revision the watch needs, the watcher reads the
// whole state again at a new revision; after any other watch error it
// follows again from the revision it has (watchLoop in watch.go backs off),
// so no event is ever skipped.
//
// Each view is one goroutine owned by the Store (Store.watchers) that ends
// with its ctx or the Store's Close. The watcher's maps and revision are
// local to that goroutine; SecurityView.mu guards the published snapshot
// and the Changed channel.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// SecuritySnapshot is the security state at one etcd revision. It is
// shared by every reader and must not be modified.
type SecuritySnapshot struct {
	Revision int64
	Tenants  map[string]Tenant // by name
	Users    map[string]User   // by name
	APIKeys  map[string]APIKey // by id
	ACLs     []ACL             // by tenant, then in key order
	// Corrupt lists the keys whose values could not be decoded (or were
	// written by a newer version), sorted. Their records are missing from
	// the maps above; a reader that must fail closed (a missing DENY binding
	// widens access) checks this.
	Corrupt []string
}

// SecurityView follows the security state (WatchSecurity); view.go has
// its methods.
type SecurityView = view[SecuritySnapshot]

// WatchSecurity reads every tenant, user, API key and ACL binding at one
// revision and returns a view that follows their changes until ctx ends or
// the Store closes. An error means the first read failed (or the Store is
// closed): a broker must not serve with an empty view it did not read.
func (s *Store) WatchSecurity(ctx context.Context) (*SecurityView, error) {
	w, err := s.loadSecurity(ctx)
	if err != nil {
		return nil, err
	}
	if !s.followSecurity(ctx, w) {
		return nil, fmt.Errorf("meta: watch security: %w", ErrClosed)
	}
	return w.view, nil
}

// loadSecurity makes a watcher and its view from a first read.
func (s *Store) loadSecurity(ctx context.Context) (*securityWatcher, error) {
	v := newView[SecuritySnapshot]()
	w := &securityWatcher{s: s, view: v}
	if err := w.load(ctx); err != nil {
		return nil, fmt.Errorf("meta: watch security: %w", err)
	}
	return w, nil
}

// followSecurity starts w's goroutine, unless the Store is closed (then
// the view is done at once).
func (s *Store) followSecurity(ctx context.Context, w *securityWatcher) bool {
	if !s.own() {
		close(w.view.done)
		return false
	}
	go func() {
		defer s.watchers.Done()
		defer close(w.view.done)
		s.watchLoop(ctx, w)
	}()
	return true
}

// securityWatcher is the state of one WatchSecurity goroutine. Its maps
// are those of the last published snapshot until a change copies them.
type securityWatcher struct {
	s       *Store
	view    *SecurityView
	rev     int64 // revision of the last snapshot; 0 = must read everything again
	tenants map[string]Tenant
	users   map[string]User
	apiKeys map[string]APIKey
	acls    map[string]ACL      // by etcd key
	aclList []ACL               // acls in key order, as published
	corrupt map[string]struct{} // etcd keys
}

func (w *securityWatcher) synced() bool { return w.rev != 0 }

// load reads the whole state at one revision and publishes it.
func (w *securityWatcher) load(ctx context.Context) error {
	resp, err := w.s.client.Get(ctx, w.s.securityPrefix(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	w.tenants, w.users, w.apiKeys = map[string]Tenant{}, map[string]User{}, map[string]APIKey{}
	w.acls, w.corrupt = map[string]ACL{}, map[string]struct{}{}
	for _, kv := range resp.Kvs {
		w.put(string(kv.Key), kv.Value)
	}
	w.aclList = nil
	w.rev = resp.Header.Revision
	w.publish(true)
	return nil
}

func (w *securityWatcher) resync(ctx context.Context) bool {
	if err := w.load(ctx); err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn().Err(err).Msg("security watch: resync failed")
		}
		return false
	}
	return true
}

// watch follows etcd's watch from rev+1 until it ends; it reports whether
// any events arrived. A compacted revision forces a resync.
func (w *securityWatcher) watch(ctx context.Context) bool {
	wch := w.s.client.Watch(clientv3.WithRequireLeader(ctx), w.s.securityPrefix(),
		clientv3.WithPrefix(), clientv3.WithRev(w.rev+1))
	progressed := false
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision != 0 {
				w.s.log.Warn().Int64("revision", w.rev).Msg("security watch: revision compacted; reading everything again")
				w.rev = 0
				return true
			}
			if ctx.Err() == nil {
				w.s.log.Warn().Err(err).Msg("security watch interrupted")
			}
			return progressed
		}
		if len(resp.Events) == 0 {
			continue
		}
		progressed = true
		w.apply(resp.Events)
	}
	return progressed
}

// apply applies one watch response's events, copying each map the first
// time it changes (the published snapshot holds the old ones), and
// publishes the result.
func (w *securityWatcher) apply(events []*clientv3.Event) {
	copied := map[string]bool{}
	cow := func(kind string) {
		if copied[kind] {
			return
		}
		copied[kind] = true
		switch kind {
		case "tenants":
			w.tenants = maps.Clone(w.tenants)
		case "users":
			w.users = maps.Clone(w.users)
		case "api-keys":
			w.apiKeys = maps.Clone(w.apiKeys)
		case "acls":
			w.acls = maps.Clone(w.acls)
		case "corrupt":
			w.corrupt = maps.Clone(w.corrupt)
		}
	}
	for _, ev := range events {
		key := string(ev.Kv.Key)
		kind, _, _ := strings.Cut(strings.TrimPrefix(key, w.s.securityPrefix()), "/")
		cow(kind)
		cow("corrupt")
		if ev.Type == mvccpb.DELETE {
			w.remove(key)
		} else {
			w.put(key, ev.Kv.Value)
		}
		w.rev = ev.Kv.ModRevision
	}
	w.publish(copied["acls"])
}

// put stores the record under key in the maps, or marks the key corrupt.
// The maps it changes must have been copied since the last publish.
func (w *securityWatcher) put(key string, val []byte) {
	w.remove(key)
	rel := strings.TrimPrefix(key, w.s.securityPrefix())
	var err error
	switch kind, _, _ := strings.Cut(rel, "/"); kind {
	case "tenants":
		var t Tenant
		if t, err = w.s.decodeTenant(key, val); err == nil {
			w.tenants[t.Name] = t
		}
	case "users":
		var u User
		if u, err = w.s.decodeUser(key, val); err == nil {
			w.users[u.Name] = u
		}
	case "api-keys":
		var k APIKey
		if k, err = w.s.decodeAPIKey(key, val); err == nil {
			w.apiKeys[k.ID] = k
		}
	case "acls":
		var a ACL
		if a, err = w.s.decodeACL(key, val); err == nil {
			w.acls[key] = a
		}
	default:
		return // a kind of a later version; nothing here reads it
	}
	if err != nil {
		w.s.log.Error().Err(err).Str("key", key).Msg("security watch: undecodable record; left out of the snapshot")
		w.corrupt[key] = struct{}{}
	}
}

// remove forgets whatever record key held. A key of a kind's prefix names
// its record (decode checks it), so the name is the key's last part.
func (w *securityWatcher) remove(key string) {
	delete(w.corrupt, key)
	rel := strings.TrimPrefix(key, w.s.securityPrefix())
	kind, name, _ := strings.Cut(rel, "/")
	switch kind {
	case "tenants":
		delete(w.tenants, name)
	case "users":
		if n, err := url.PathUnescape(name); err == nil {
			delete(w.users, n)
		}
	case "api-keys":
		delete(w.apiKeys, name)
	case "acls":
		delete(w.acls, key)
	}
}

// publish hands the current maps to the view; aclsChanged rebuilds the
// ACL list.
func (w *securityWatcher) publish(aclsChanged bool) {
	if aclsChanged || w.aclList == nil {
		keys := slices.Sorted(maps.Keys(w.acls))
		w.aclList = make([]ACL, 0, len(keys))
		for _, k := range keys {
			w.aclList = append(w.aclList, w.acls[k])
		}
	}
	w.view.publish(SecuritySnapshot{
		Revision: w.rev,
		Tenants:  w.tenants,
		Users:    w.users,
		APIKeys:  w.apiKeys,
		ACLs:     w.aclList,
		Corrupt:  slices.Sorted(maps.Keys(w.corrupt)),
	})
}
