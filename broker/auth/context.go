package auth

// This file owns how an authenticated identity travels with a request: the
// front end that authenticated it (the HTTP pipeline: a Bearer API key,
// HTTP Basic, or a client certificate) stores it in the request's context,
// and handlers read it back. Handlers never authenticate on their own.
//
// Invariant: a context carries at most one Identity, and only WithIdentity
// (or WithPrincipal) puts it there; a context without one is an
// unauthenticated request, which PrincipalFrom and IdentityFrom report with
// ok == false, never as the anonymous principal.

import "context"

// Roles an identity may hold. Their values are the role names the
// metadata store keeps on a user, so the pipeline copies a stored user's
// role into an Identity unchanged.
const (
	// RoleUser is an ordinary principal: what the ACLs of its tenant allow.
	RoleUser = ""
	// RoleTenantAdmin may manage the users, API keys and ACLs of its own
	// tenant.
	RoleTenantAdmin = "tenant-admin"
	// RoleSuper may do anything in every tenant.
	RoleSuper = "super"
)

// Identity is who sent a request and what administrative power it has.
// Principal decides names and ACLs; Role decides what the admin API lets
// the caller manage. The pipeline sets Role when it authenticates: the
// user's stored role, RoleSuper for a principal named by --super-users,
// and it may grant RoleTenantAdmin to a principal that an ACL allows ALTER
// on its own tenant's cluster resource (Kafka's test for managing ACLs).
type Identity struct {
	Principal Principal
	Role      string // RoleUser, RoleTenantAdmin or RoleSuper
}

// IsSuper reports whether the identity may act in every tenant.
func (id Identity) IsSuper() bool { return id.Role == RoleSuper }

// IsTenantAdmin reports whether the identity may manage its own tenant's
// users, API keys and ACLs (a super user may too, and more).
func (id Identity) IsTenantAdmin() bool { return id.Role == RoleTenantAdmin || id.IsSuper() }

// identityKey is the context key of the Identity; unexported so that only
// this file can set or read it.
type identityKey struct{}

// WithIdentity returns a context that carries id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity ctx carries; ok is false for a request
// nobody authenticated.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// WithPrincipal returns a context that carries p with no administrative
// role (RoleUser); use WithIdentity to carry a role.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return WithIdentity(ctx, Identity{Principal: p})
}

// PrincipalFrom returns the principal ctx carries; ok is false for a
// request nobody authenticated.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	id, ok := IdentityFrom(ctx)
	return id.Principal, ok
}
