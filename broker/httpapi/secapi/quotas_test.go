package secapi_test

import (
	"net/http"
	"testing"

	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
	"github.com/sluice-mq/sluice/broker/quota"
)

// TestQuotas: a super user sets, reads and removes a tenant's quotas and
// scheduling attributes over real HTTP; a tenant admin reads its own and
// nothing else, and changes nothing; every refusal has its stable code.
func TestQuotas(t *testing.T) {
	e := newEnv(t)
	acme := e.tenantWithAdmin("acme")
	e.tenantWithAdmin("globex")
	carl := e.user(acme, "carl", "acme")

	var q secapi.TenantQuotas
	e.ok(e.do(admin, "GET", "/v1/tenants/acme/quotas", nil), http.StatusOK, &q)
	if q.Tenant != "acme" || len(q.Limits) != 0 || q.Limits == nil || q.Weight != 1 || q.PriorityClass != "standard" {
		t.Fatalf("quotas of a tenant with none set: %+v", q)
	}
	e.ok(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"producer_byte_rate":1e7,"topics":10}}`), http.StatusOK, &q)
	if q.Limits[quota.ProducerByteRate] != 1e7 || q.Limits[quota.Topics] != 10 {
		t.Fatalf("after set: %+v", q)
	}
	q = secapi.TenantQuotas{} // Unmarshal merges into a map it finds
	e.ok(e.do(admin, "PUT", "/v1/tenants/acme/quotas", secapi.SetQuotasRequest{
		Set: map[string]float64{quota.Groups: 3}, Remove: []string{quota.Topics}}), http.StatusOK, &q)
	if len(q.Limits) != 2 || q.Limits[quota.Groups] != 3 {
		t.Fatalf("after set and remove: %+v", q)
	}
	e.ok(e.do(admin, "PUT", "/v1/tenants/acme/scheduling", `{"weight":2.5}`), http.StatusOK, &q)
	q = secapi.TenantQuotas{}
	e.ok(e.do(admin, "PUT", "/v1/tenants/acme/scheduling", `{"priority_class":"low"}`), http.StatusOK, &q)
	if q.Weight != 2.5 || q.PriorityClass != "low" || len(q.Limits) != 2 {
		t.Fatalf("after scheduling: %+v", q)
	}

	// The tenant's own admin reads them; the other tenant's does not, and
	// neither changes anything.
	var own secapi.TenantQuotas
	e.ok(e.do(acme, "GET", "/v1/tenants/acme/quotas", nil), http.StatusOK, &own)
	if own.Weight != 2.5 || own.Limits[quota.ProducerByteRate] != 1e7 {
		t.Fatalf("acme's admin reads %+v", own)
	}
	e.fails(e.do(acme, "GET", "/v1/tenants/globex/quotas", nil), http.StatusForbidden, "forbidden", `"globex"`)
	e.fails(e.do(carl, "GET", "/v1/tenants/acme/quotas", nil), http.StatusForbidden, "forbidden", "tenant-admin")
	e.fails(e.do(acme, "PUT", "/v1/tenants/acme/quotas", `{"set":{"producer_byte_rate":1e9}}`), http.StatusForbidden, "forbidden", "only a super user")
	e.fails(e.do(acme, "PUT", "/v1/tenants/acme/scheduling", `{"weight":100}`), http.StatusForbidden, "forbidden", "only a super user")
	e.fails(e.do(acme, "GET", "/v1/quotas", nil), http.StatusForbidden, "forbidden", "GET /v1/tenants/acme/quotas")
	e.fails(e.do(nobody, "GET", "/v1/quotas", nil), http.StatusUnauthorized, "unauthenticated")

	// Validation.
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"producer_bytes_rate":1}}`), http.StatusBadRequest, "invalid_quota", "unknown quota key", "producer_byte_rate")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"producer_byte_rate":0}}`), http.StatusBadRequest, "invalid_quota", "0 would refuse")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"topics":1.5}}`), http.StatusBadRequest, "invalid_quota", "whole number")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"remove":["bogus"]}`), http.StatusBadRequest, "invalid_quota", "unknown quota key")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"topics":1},"remove":["topics"]}`), http.StatusBadRequest, "invalid_quota", "both set and removed")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{}`), http.StatusBadRequest, "bad_request", "give keys")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/quotas", `{"set":{"topics":"ten"}}`), http.StatusBadRequest, "bad_request", "expected")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/scheduling", `{"weight":-1}`), http.StatusBadRequest, "invalid_quota", "weight")
	e.fails(e.do(admin, "PUT", "/v1/tenants/acme/scheduling", `{"priority_class":"gold"}`), http.StatusBadRequest, "invalid_quota", "gold")
	e.fails(e.do(admin, "PUT", "/v1/tenants/ghost/quotas", `{"set":{"topics":1}}`), http.StatusNotFound, "tenant_not_found", "ghost")
	e.fails(e.do(admin, "GET", "/v1/tenants/ghost/quotas", nil), http.StatusNotFound, "tenant_not_found", "ghost")

	// Every tenant with something set, by name.
	e.ok(e.do(admin, "PUT", "/v1/tenants/globex/quotas", `{"set":{"connections":100}}`), http.StatusOK, nil)
	var list secapi.QuotaList
	e.ok(e.do(admin, "GET", "/v1/quotas", nil), http.StatusOK, &list)
	if len(list.Tenants) != 2 || list.Tenants[0].Tenant != "acme" || list.Tenants[1].Limits[quota.Connections] != 100 {
		t.Fatalf("GET /v1/quotas = %+v", list)
	}
}
