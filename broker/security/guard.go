package security

// This file owns the Guard: the index of users and API keys and the
// authoriser, rebuilt on every snapshot of the store's security records,
// and the checks made against them.
//
// Invariant: every answer reads one published index (g.idx), built from
// one snapshot; the authoriser's Set is replaced before the index that
// records it is published, and an index that fails closed is published
// whenever the Set could not be built from the snapshot.
// Invariant: with Config.Enabled, Authorize allows an operation only to a
// super user, or by the ACLs of the identity's own tenant, and never while
// the index fails closed.
// Invariant: the follow goroutine is the only writer of g.idx and of the
// authoriser's Set.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// ErrInvalidCredentials is the error of a failed CheckAPIKey or
// CheckBasic. Its text never tells an unknown user or key from a wrong
// password or secret.
var ErrInvalidCredentials = errors.New("security: invalid credentials")

// Config is how the Guard decides.
type Config struct {
	// Enabled turns authentication and authorisation on; off (the
	// development default) every request is anonymous and allowed.
	Enabled bool
	// SuperUsers are principals ("User:admin") allowed everything in every
	// tenant, whatever the ACLs say (--super-users).
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an operation on a resource no ACL
	// binding applies to (--allow-everyone-if-no-acl-found).
	AllowEveryoneIfNoACLFound bool
	// AdminPasswordFile, when set, bootstraps the super user "admin"
	// (bootstrap.go).
	AdminPasswordFile string
	// Logger receives fail-closed and bootstrap lines; zero value: none.
	Logger zerolog.Logger
}

// AdminUser is the super user the bootstrap creates.
const AdminUser = "admin"

// Guard is the broker's live security state. Safe for concurrent use.
type Guard struct {
	cfg    Config
	log    zerolog.Logger
	supers map[string]bool       // read-only: Config.SuperUsers
	authz  *acl.Authorizer       // written by the follow goroutine (Replace)
	idx    atomic.Pointer[index] // never nil after Start
	cancel context.CancelFunc
	done   chan struct{} // closed when the follow goroutine has ended
}

// index is what one snapshot made. Immutable once published.
type index struct {
	revision int64
	users    map[string]meta.User   // by name; the snapshot's map, shared read-only
	apiKeys  map[string]meta.APIKey // by id; the snapshot's map, shared read-only
	// closedWhy, when not empty, is why every operation of a non-super
	// principal is refused (failing closed).
	closedWhy string
}

// Start reads the security records (bootstrapping the admin first if
// cfg.AdminPasswordFile is set), builds the first index and follows the
// store until Close or ctx ends. An error means the Guard could not be
// built: a broker must not serve without it.
func Start(ctx context.Context, store *meta.Store, cfg Config) (*Guard, error) {
	ac := acl.Config{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound}
	authz, err := acl.NewAuthorizer(ac)
	if err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	g := &Guard{cfg: cfg, log: cfg.Logger.With().Str("component", "security").Logger(),
		supers: make(map[string]bool, len(cfg.SuperUsers)), authz: authz, done: make(chan struct{})}
	for _, p := range cfg.SuperUsers {
		g.supers[p] = true
	}
	if cfg.AdminPasswordFile != "" {
		if err := bootstrap(ctx, store, cfg.AdminPasswordFile, g.log); err != nil {
			return nil, err
		}
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	view, err := store.WatchSecurity(fctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("security: %w", err)
	}
	g.cancel = cancel
	changed := view.Changed()
	g.rebuild(view.Snapshot())
	go g.follow(fctx, view, changed)
	return g, nil
}

// Close stops following the store and waits for it; the last index stays
// in force. Closing twice is harmless.
func (g *Guard) Close() {
	g.cancel()
	<-g.done
}

// follow rebuilds the index on every new snapshot.
func (g *Guard) follow(ctx context.Context, view *meta.SecurityView, changed <-chan struct{}) {
	defer close(g.done)
	view.Follow(ctx, changed, g.rebuild)
}

// rebuild makes the index and the authoriser's Set of one snapshot.
func (g *Guard) rebuild(snap meta.SecuritySnapshot) {
	idx := &index{revision: snap.Revision, users: snap.Users, apiKeys: snap.APIKeys}
	if len(snap.Corrupt) > 0 {
		idx.closedWhy = fmt.Sprintf("the security records hold %d undecodable entries (%s); every operation but a super user's is refused until they are fixed",
			len(snap.Corrupt), strings.Join(firstN(snap.Corrupt, 3), ", "))
	} else {
		bindings := make([]acl.Binding, len(snap.ACLs))
		for i, a := range snap.ACLs {
			bindings[i] = acl.Binding{Tenant: a.Tenant, ResourceType: acl.ResourceType(a.ResourceType),
				ResourceName: a.ResourceName, PatternType: acl.PatternType(a.PatternType), Principal: a.Principal,
				Host: a.Host, Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)}
		}
		if err := g.authz.Replace(bindings); err != nil {
			idx.closedWhy = fmt.Sprintf("the stored ACL bindings cannot be applied (%v); every operation but a super user's is refused until they are fixed", err)
		}
	}
	prev := g.idx.Swap(idx)
	switch {
	case idx.closedWhy != "" && (prev == nil || prev.closedWhy != idx.closedWhy):
		g.log.Error().Int64("revision", snap.Revision).Strs("corrupt", snap.Corrupt).Msg("security: failing closed: " + idx.closedWhy)
	case idx.closedWhy == "" && prev != nil && prev.closedWhy != "":
		g.log.Warn().Int64("revision", snap.Revision).Msg("security: the security records decode again; ACLs apply again")
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// Enabled reports whether requests must authenticate and are authorised.
func (g *Guard) Enabled() bool { return g.cfg.Enabled }

// Revision is the etcd revision of the records in force.
func (g *Guard) Revision() int64 { return g.idx.Load().revision }

// ScramLookup is an auth.CredentialLookup over the stored users.
func (g *Guard) ScramLookup(mechanism, user string) (auth.ScramCredential, string, bool) {
	u, ok := g.idx.Load().users[user]
	if !ok {
		return auth.ScramCredential{}, "", false
	}
	k, ok := u.Scram[mechanism]
	if !ok {
		return auth.ScramCredential{}, "", false
	}
	return auth.ScramCredential{Mechanism: mechanism, Salt: k.Salt, Iterations: k.Iterations,
		StoredKey: k.StoredKey, ServerKey: k.ServerKey}, u.Tenant, true
}

// CheckAPIKey checks an HTTP API key (auth's sk_<id>_<secret> form) against
// the stored hash and returns its user's identity; ErrInvalidCredentials
// (wrapped) for a malformed, unknown or revoked key, or one whose user is
// gone.
func (g *Guard) CheckAPIKey(key string) (auth.Identity, error) {
	id, err := auth.ParseAPIKey(key)
	if err != nil {
		return auth.Identity{}, fmt.Errorf("%w: %w", ErrInvalidCredentials, err)
	}
	idx := g.idx.Load()
	k, ok := idx.apiKeys[id]
	if !ok || !auth.CheckAPIKey(key, k.Hash) {
		return auth.Identity{}, fmt.Errorf("%w: unknown or revoked API key", ErrInvalidCredentials)
	}
	u, ok := idx.users[k.User]
	if !ok {
		return auth.Identity{}, fmt.Errorf("%w: unknown or revoked API key", ErrInvalidCredentials)
	}
	return g.identityOf(u), nil
}

// CheckBasic checks a user's password against its SCRAM keys (auth.CheckBasic)
// and returns its identity; ErrInvalidCredentials (wrapped, with
// auth.ErrAuthenticationFailed) otherwise.
func (g *Guard) CheckBasic(user, password string) (auth.Identity, error) {
	p, err := auth.CheckBasic(g.ScramLookup, user, password)
	if err != nil {
		return auth.Identity{}, fmt.Errorf("%w: %w", ErrInvalidCredentials, err)
	}
	return g.Identity(p), nil
}

// Identity is the identity of an authenticated principal: a stored user's
// tenant and role; for a principal no user stands for (a client
// certificate's, say), its own tenant, or DefaultTenant when it has none
// (SystemTenant for a super user). A principal named in SuperUsers is
// RoleSuper either way.
func (g *Guard) Identity(p auth.Principal) auth.Identity {
	// The anonymous principal is never a stored user, even one named so.
	if u, ok := g.idx.Load().users[p.User]; ok && !p.IsAnonymous() {
		return g.identityOf(u)
	}
	id := auth.Identity{Principal: p}
	if g.supers[p.String()] {
		id.Role = auth.RoleSuper
	}
	if id.Principal.Tenant == "" {
		id.Principal.Tenant = auth.DefaultTenant
		if id.IsSuper() {
			id.Principal.Tenant = meta.SystemTenant
		}
	}
	return id
}

func (g *Guard) identityOf(u meta.User) auth.Identity {
	id := auth.Identity{Principal: auth.Principal{Tenant: u.Tenant, User: u.Name}, Role: u.Role}
	if g.supers[id.Principal.String()] {
		id.Role = auth.RoleSuper
	}
	return id
}

// UserExists reports whether a user of that name is stored now (for the
// session checks of long-lived connections).
func (g *Guard) UserExists(name string) bool {
	_, ok := g.idx.Load().users[name]
	return ok
}

// Authorize decides whether id, connecting from host (an IP address), may
// perform op on the resource of type rt named name in its own tenant
// (acl.ClusterName for the cluster). With security off everything is
// allowed; a super user always is.
func (g *Guard) Authorize(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision {
	if !g.cfg.Enabled {
		return acl.Decision{Allowed: true, Reason: "security is off"}
	}
	if id.IsSuper() || g.supers[id.Principal.String()] {
		return acl.Decision{Allowed: true, Reason: "super user"}
	}
	if why := g.idx.Load().closedWhy; why != "" {
		return acl.Decision{Allowed: false, Reason: why}
	}
	if h, err := acl.CanonicalHost(host); err == nil {
		host = h
	}
	return g.authz.Authorize(acl.Request{Tenant: id.Principal.Tenant, Principal: id.Principal.String(),
		Host: host, Operation: op, ResourceType: rt, ResourceName: name})
}
