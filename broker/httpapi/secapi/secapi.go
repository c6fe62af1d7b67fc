package secapi

// This file owns the API's wiring (Deps, Register) and the decisions of
// who may manage what; the handlers are in tenants.go, users.go and
// acls.go.
//
// Invariant: every handler reads the caller with callerOf before it reads
// the request body or the store, so an unauthenticated request learns
// nothing but 401.

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/meta"
)

// Store is what the API needs of the metadata store; *meta.Store has it.
type Store interface {
	CreateTenant(ctx context.Context, name string) (meta.Tenant, error)
	ListTenants(ctx context.Context) ([]meta.Tenant, error)
	DeleteTenant(ctx context.Context, name string) error
	CreateTenantInPool(ctx context.Context, name, pool string) (meta.Tenant, error)
	SetTenantPool(ctx context.Context, name, pool string) (meta.Tenant, error)

	CreateUser(ctx context.Context, u meta.User) (meta.User, error)
	GetUser(ctx context.Context, name string) (meta.User, error)
	ListUsers(ctx context.Context, tenant string) ([]meta.User, error)
	DeleteUser(ctx context.Context, name string) error
	UpsertScram(ctx context.Context, user, mechanism string, keys meta.ScramKeys) error

	CreateAPIKey(ctx context.Context, k meta.APIKey) (meta.APIKey, error)
	GetAPIKey(ctx context.Context, id string) (meta.APIKey, error)
	ListAPIKeys(ctx context.Context, user string) ([]meta.APIKey, error)
	DeleteAPIKey(ctx context.Context, id string) error

	CreateACLs(ctx context.Context, acls []meta.ACL) error
	ListACLs(ctx context.Context, tenant string) ([]meta.ACL, error)
	DeleteACLs(ctx context.Context, match func(meta.ACL) bool) ([]meta.ACL, error)

	GetQuotas(ctx context.Context, tenant string) (meta.TenantQuotas, error)
	ListQuotas(ctx context.Context) ([]meta.TenantQuotas, error)
	SetQuotas(ctx context.Context, tenant string, set map[string]float64, remove []string, check meta.QuotaCheck) (meta.TenantQuotas, error)
	SetTenantScheduling(ctx context.Context, tenant string, weight float64, class string) (meta.TenantQuotas, error)
}

var _ Store = (*meta.Store)(nil)

// Deps is what the API runs with.
type Deps struct {
	Store  Store
	Logger zerolog.Logger // zero value: no logging
	// Iterations is the PBKDF2 iteration count of the SCRAM credentials
	// made from passwords; 0 means auth.DefaultIterations. It must lie in
	// [auth.MinIterations, auth.MaxIterations].
	Iterations int
	// TenantTopics, if set, lists a tenant's topics; DELETE /v1/tenants
	// refuses (409 tenant_not_empty) while it returns any. The check is
	// not atomic with the deletion: a topic created in between survives
	// its tenant.
	TenantTopics func(ctx context.Context, tenant string) ([]string, error)
}

// api is the registered handlers' shared state: Deps, read only.
type api struct {
	store        Store
	log          zerolog.Logger
	iterations   int
	tenantTopics func(ctx context.Context, tenant string) ([]string, error)
}

// Register adds the routes of the package doc to mux. It panics on a Deps
// that cannot work (no Store, iterations out of bounds): that is a wiring
// mistake, found at start-up.
func Register(mux *http.ServeMux, d Deps) {
	if d.Store == nil {
		panic("secapi: Register without a Store")
	}
	if d.Iterations == 0 {
		d.Iterations = auth.DefaultIterations
	}
	if d.Iterations < auth.MinIterations || d.Iterations > auth.MaxIterations {
		panic(fmt.Sprintf("secapi: iterations %d outside [%d, %d]", d.Iterations, auth.MinIterations, auth.MaxIterations))
	}
	a := &api{store: d.Store, log: d.Logger.With().Str("component", "secapi").Logger(),
		iterations: d.Iterations, tenantTopics: d.TenantTopics}
	mux.HandleFunc("POST /v1/tenants", a.createTenant)
	mux.HandleFunc("GET /v1/tenants", a.listTenants)
	mux.HandleFunc("DELETE /v1/tenants/{name}", a.deleteTenant)
	mux.HandleFunc("PUT /v1/tenants/{name}/pool", a.setTenantPool)
	mux.HandleFunc("POST /v1/users", a.createUser)
	mux.HandleFunc("GET /v1/users", a.listUsers)
	mux.HandleFunc("DELETE /v1/users/{name}", a.deleteUser)
	mux.HandleFunc("PUT /v1/users/{name}/password", a.setPassword)
	mux.HandleFunc("POST /v1/users/{name}/api-keys", a.createAPIKey)
	mux.HandleFunc("GET /v1/users/{name}/api-keys", a.listAPIKeys)
	mux.HandleFunc("DELETE /v1/api-keys/{id}", a.deleteAPIKey)
	mux.HandleFunc("POST /v1/acls", a.createACLs)
	mux.HandleFunc("GET /v1/acls", a.listACLs)
	mux.HandleFunc("POST /v1/acls:delete", a.deleteACLs)
	mux.HandleFunc("GET /v1/quotas", a.listQuotas)
	mux.HandleFunc("GET /v1/tenants/{name}/quotas", a.getQuotas)
	mux.HandleFunc("PUT /v1/tenants/{name}/quotas", a.setQuotas)
	mux.HandleFunc("PUT /v1/tenants/{name}/scheduling", a.setScheduling)
}

// caller is the authenticated identity of one request.
type caller struct{ auth.Identity }

// callerOf reads the identity the pipeline put in the request's context.
func callerOf(r *http.Request) (caller, error) {
	id, ok := auth.IdentityFrom(r.Context())
	if !ok || id.Principal.User == "" {
		return caller{}, apierr.Errorf(http.StatusUnauthorized, "unauthenticated",
			"this call needs credentials: an API key (Authorization: Bearer), a user and password (Basic), or a client certificate")
	}
	return caller{id}, nil
}

// tenant is the caller's own tenant.
func (c caller) tenant() string { return c.Principal.Tenant }

// manages tells whether the caller administers tenant: a super user every
// tenant, a tenant admin its own.
func (c caller) manages(tenant string) bool {
	return c.IsTenantAdmin() && acl.CanManage(c.tenant(), c.IsSuper(), tenant)
}

// mustManage refuses with 403 unless the caller administers tenant.
func (c caller) mustManage(tenant, what string) error {
	if c.manages(tenant) {
		return nil
	}
	if !c.IsTenantAdmin() {
		return forbidden("%s: %s needs the tenant-admin or super role, and %s has neither", what, tenantWord(tenant), c.Principal)
	}
	return forbidden("%s: %s is a tenant admin of tenant %q and may manage only that tenant, not %q",
		what, c.Principal, c.tenant(), tenant)
}

func tenantWord(tenant string) string { return fmt.Sprintf("managing tenant %q", tenant) }

// isSelf tells whether u is the caller itself. The anonymous principal is
// nobody's self: a stored user named like it gains nothing from anonymous
// requests.
func (c caller) isSelf(u meta.User) bool {
	return !c.Principal.IsAnonymous() && c.Principal.User == u.Name && c.Principal.Tenant == u.Tenant
}

// mayManageUser tells whether the caller may manage u (delete it, set its
// password, manage its keys). Only a super user touches a super user: a
// tenant admin who could set a super user's password would be one.
func (c caller) mayManageUser(u meta.User, what string) error {
	if u.Role == meta.RoleSuper && !c.IsSuper() {
		return forbidden("%s: user %q is a super user; only a super user may manage it", what, u.Name)
	}
	return c.mustManage(u.Tenant, what)
}

// mayActFor is mayManageUser, or the user itself (its own password and
// keys).
func (c caller) mayActFor(u meta.User, what string) error {
	if c.isSelf(u) {
		return nil
	}
	return c.mayManageUser(u, what)
}
