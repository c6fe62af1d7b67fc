package secapi

// This file owns the quota routes: each tenant's quotas (broker/quota's
// keys) and its scheduling attributes (weight in fair scheduling, priority
// class), read by a super user or the tenant's own admin, changed by a
// super user only (a tenant admin able to raise its own tenant's quotas
// would make them pointless).

import (
	"net/http"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// TenantQuotas is a tenant's quotas as the API shows them. A tenant with
// nothing set has empty limits, weight 1 and class standard.
type TenantQuotas struct {
	Tenant        string             `json:"tenant"`
	Limits        map[string]float64 `json:"limits"`
	Weight        float64            `json:"weight"`
	PriorityClass string             `json:"priority_class"`
}

// QuotaList is the answer of GET /v1/quotas: every tenant with something
// set, sorted by name.
type QuotaList struct {
	Tenants []TenantQuotas `json:"tenants"`
}

// SetQuotasRequest is the body of PUT /v1/tenants/{name}/quotas: keys to
// set and keys to remove (removing a key not set is no error).
type SetQuotasRequest struct {
	Set    map[string]float64 `json:"set"`
	Remove []string           `json:"remove"`
}

// SchedulingRequest is the body of PUT /v1/tenants/{name}/scheduling; a
// field left out keeps its value.
type SchedulingRequest struct {
	Weight        float64 `json:"weight"`
	PriorityClass string  `json:"priority_class"`
}

func quotasOut(q meta.TenantQuotas) TenantQuotas {
	limits := q.Limits
	if limits == nil {
		limits = map[string]float64{}
	}
	return TenantQuotas{Tenant: q.Tenant, Limits: limits, Weight: q.Weight, PriorityClass: q.PriorityClass}
}

// mustBeSuperFor refuses with 403 unless the caller is a super user.
func (c caller) mustBeSuperFor(what string) error {
	if c.IsSuper() {
		return nil
	}
	return forbidden("%s: only a super user may change quotas, and %s is not one", what, c.Principal)
}

func (a *api) listQuotas(w http.ResponseWriter, r *http.Request) {
	c, err := callerOf(r)
	if err == nil && !c.IsSuper() {
		err = forbidden("list quotas: only a super user may list every tenant's quotas; a tenant admin reads its own at GET /v1/tenants/%s/quotas", c.tenant())
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	qs, err := a.store.ListQuotas(r.Context())
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	out := QuotaList{Tenants: make([]TenantQuotas, 0, len(qs))}
	for _, q := range qs {
		out.Tenants = append(out.Tenants, quotasOut(q))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) getQuotas(w http.ResponseWriter, r *http.Request) {
	const what = "read quotas"
	name := r.PathValue("name")
	c, err := callerOf(r)
	if err == nil {
		err = c.mustManage(name, what)
	}
	if err == nil {
		err = validTenant(name)
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	q, err := a.store.GetQuotas(r.Context(), name)
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	writeJSON(w, http.StatusOK, quotasOut(q))
}

func (a *api) setQuotas(w http.ResponseWriter, r *http.Request) {
	const what = "set quotas"
	name := r.PathValue("name")
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuperFor(what)
	}
	var req SetQuotasRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil {
		err = validTenant(name)
	}
	if err == nil && len(req.Set) == 0 && len(req.Remove) == 0 {
		err = badRequest("%s: give keys to set or remove: {\"set\":{\"producer_byte_rate\":1e7},\"remove\":[\"topics\"]}", what)
	}
	for _, k := range req.Remove {
		if _, ok := quota.Lookup(k); !ok && err == nil {
			err = apierr.Errorf(http.StatusBadRequest, "invalid_quota", "%s: %v", what, quota.Check(k, 1))
		}
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	q, err := a.store.SetQuotas(r.Context(), name, req.Set, req.Remove, quota.Check)
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	a.log.Info().Str("tenant", name).Str("by", c.Principal.String()).Interface("limits", q.Limits).Msg("quotas set")
	writeJSON(w, http.StatusOK, quotasOut(q))
}

func (a *api) setScheduling(w http.ResponseWriter, r *http.Request) {
	const what = "set scheduling"
	name := r.PathValue("name")
	c, err := callerOf(r)
	if err == nil {
		err = c.mustBeSuperFor(what)
	}
	var req SchedulingRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil {
		err = validTenant(name)
	}
	if err == nil && req.Weight == 0 && req.PriorityClass == "" {
		err = badRequest("%s: give a weight (> 0) or a priority_class (%q or %q)", what, meta.PriorityStandard, meta.PriorityLow)
	}
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	q, err := a.store.SetTenantScheduling(r.Context(), name, req.Weight, req.PriorityClass)
	if err != nil {
		a.writeError(w, r, err, "tenant")
		return
	}
	a.log.Info().Str("tenant", name).Str("by", c.Principal.String()).Float64("weight", q.Weight).
		Str("priority_class", q.PriorityClass).Msg("scheduling set")
	writeJSON(w, http.StatusOK, quotasOut(q))
}
