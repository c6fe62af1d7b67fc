package secapi

// This file owns the tenant routes: create, list, delete and bind to a
// broker pool, for super users only.

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/meta"
)

// Tenant is a tenant as the API shows it.
type Tenant struct {
	Name string `json:"name"`
	// Pool is the broker pool the tenant's new partitions are placed in
	// ("shared" for a tenant bound to none).
	Pool      string `json:"pool"`
	CreatedMs int64  `json:"created_ms"`
}

// TenantList is the answer of GET /v1/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// CreateTenantRequest is the body of POST /v1/tenants.
type CreateTenantRequest struct {
	Name string `json:"name"`
	Pool string `json:"pool,omitempty"` // default: none, the shared pool
}

// SetTenantPoolRequest is the body of PUT /v1/tenants/{name}/pool.
type SetTenantPoolRequest struct {
	Pool string `json:"pool"` // "" or "shared": bound to none
}

func tenantOut(t meta.Tenant) Tenant {
	return Tenant{Name: t.Name, Pool: meta.PoolOrDefault(t.Pool), CreatedMs: t.Created.UnixMilli()}
}

// mustBeSuper refuses with 403 unless the caller is a super user.
func (c caller) mustBeSuper(what string) error {
	if c.IsSuper() {
		return nil
	}
	return forbidden("%s: only a super user may manage tenants, and %s is not one", what, c.Principal)
}

func (a *api) createTenant(w http.ResponseWriter, r *http.Request) {
	const what = "create tenant"
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuper(what)
	}
	var req CreateTenantRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil && req.Name == "" {
		err = badRequest("%s: field name is required", what)
	}
	if err == nil {
		err = validTenant(req.Name)
	}
	if err == nil {
		err = validPool(req.Pool)
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	t, err := a.store.CreateTenantInPool(r.Context(), req.Name, req.Pool)
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	a.log.Info().Str("tenant", t.Name).Str("pool", meta.PoolOrDefault(t.Pool)).Str("by", c.Principal.String()).Msg("tenant created")
	writeJSON(w, http.StatusCreated, tenantOut(t))
}

func (a *api) listTenants(w http.ResponseWriter, r *http.Request) {
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuper("list tenants")
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	ts, err := a.store.ListTenants(r.Context())
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	out := TenantList{Tenants: make([]Tenant, 0, len(ts))}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, tenantOut(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) deleteTenant(w http.ResponseWriter, r *http.Request) {
	const what = "delete tenant"
	name := r.PathValue("name")
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuper(what)
	}
	if err == nil {
		err = validTenant(name)
	}
	if err == nil && meta.IsReservedTenant(name) {
		err = apierr.Errorf(http.StatusConflict, "tenant_reserved",
			"%s: tenant %q exists implicitly (the operators' and anonymous access's tenants) and cannot be deleted", what, name)
	}
	if err == nil && a.tenantTopics != nil {
		err = a.checkNoTopics(r, name)
	}
	if err == nil {
		err = a.store.DeleteTenant(r.Context(), name)
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	a.log.Info().Str("tenant", name).Str("by", c.Principal.String()).Msg("tenant deleted")
	w.WriteHeader(http.StatusNoContent)
}

// setTenantPool binds a tenant to a broker pool. It applies to partitions
// created from then on; existing ones stay where they are. A pool without
// live brokers is accepted (its brokers may come later): creating a
// partition in it is refused until it has enough AZs.
func (a *api) setTenantPool(w http.ResponseWriter, r *http.Request) {
	const what = "set tenant pool"
	name := r.PathValue("name")
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuper(what)
	}
	var req SetTenantPoolRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil {
		err = validTenant(name)
	}
	if err == nil {
		err = validPool(req.Pool)
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	t, err := a.store.SetTenantPool(r.Context(), name, req.Pool)
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	a.log.Info().Str("tenant", t.Name).Str("pool", meta.PoolOrDefault(t.Pool)).Str("by", c.Principal.String()).Msg("tenant pool set")
	writeJSON(w, http.StatusOK, tenantOut(t))
}

// validPool is meta's pool name rule ("" allowed: no pool), answered as a
// 400 without meta's prefix.
func validPool(pool string) error {
	if pool == "" {
		return nil
	}
	if err := meta.ValidatePoolName(pool); err != nil {
		return badRequest("%s", strings.TrimPrefix(err.Error(), "meta: invalid name: "))
	}
	return nil
}

// checkNoTopics refuses to delete a tenant that still has topics: its
// records would outlive every principal allowed to read them.
func (a *api) checkNoTopics(r *http.Request, tenant string) error {
	topics, err := a.tenantTopics(r.Context(), tenant)
	if err != nil {
		return fmt.Errorf("list topics of tenant %q: %w", tenant, err)
	}
	if len(topics) == 0 {
		return nil
	}
	shown := topics
	if len(shown) > 5 {
		shown = append(shown[:5:5], "...")
	}
	return apierr.Errorf(http.StatusConflict, "tenant_not_empty", "tenant %q still has %d topics (%s); delete them first",
		tenant, len(topics), strings.Join(shown, ", "))
}

// validTenant is meta's name rule, answered as a 400 without meta's prefix.
func validTenant(name string) error {
	if err := meta.ValidateTenantName(name); err != nil {
		return badRequest("%s", strings.TrimPrefix(err.Error(), "meta: invalid name: "))
	}
	return nil
}
