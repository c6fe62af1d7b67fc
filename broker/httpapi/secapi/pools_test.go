package secapi_test

import (
	"net/http"
	"testing"

	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
)

// TestTenantPool: a tenant is created bound to a pool or to none (shown as
// "shared"), its pool is changed with PUT /v1/tenants/{name}/pool by a
// super user only, and bad names are refused with the JSON error body.
func TestTenantPool(t *testing.T) {
	e := newEnv(t)
	var tn secapi.Tenant
	e.ok(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "acme", Pool: "gold"}), http.StatusCreated, &tn)
	if tn.Pool != "gold" {
		t.Fatalf("created %+v, want pool gold", tn)
	}
	e.ok(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "plain"}), http.StatusCreated, &tn)
	if tn.Pool != "shared" {
		t.Fatalf("created %+v, want pool shared", tn)
	}
	e.fails(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "bad", Pool: "Gold"}), http.StatusBadRequest, "bad_request", `pool "Gold"`)

	e.ok(e.do(admin, "PUT", "/v1/tenants/plain/pool", secapi.SetTenantPoolRequest{Pool: "silver"}), http.StatusOK, &tn)
	if tn.Name != "plain" || tn.Pool != "silver" || tn.CreatedMs == 0 {
		t.Fatalf("set pool: %+v", tn)
	}
	e.ok(e.do(admin, "PUT", "/v1/tenants/acme/pool", secapi.SetTenantPoolRequest{Pool: "shared"}), http.StatusOK, &tn)
	if tn.Pool != "shared" {
		t.Fatalf("unbound: %+v", tn)
	}
	var list secapi.TenantList
	e.ok(e.do(admin, "GET", "/v1/tenants", nil), http.StatusOK, &list)
	pools := map[string]string{}
	for _, t := range list.Tenants {
		pools[t.Name] = t.Pool
	}
	if pools["acme"] != "shared" || pools["plain"] != "silver" || pools["default"] != "shared" {
		t.Fatalf("listed pools %v", pools)
	}

	e.fails(e.do(admin, "PUT", "/v1/tenants/nope/pool", secapi.SetTenantPoolRequest{Pool: "gold"}), http.StatusNotFound, "tenant_not_found", `"nope"`)
	e.fails(e.do(admin, "PUT", "/v1/tenants/plain/pool", secapi.SetTenantPoolRequest{Pool: "-x"}), http.StatusBadRequest, "bad_request", `pool "-x"`)
	e.fails(e.do(admin, "PUT", "/v1/tenants/plain/pool", `{"pool":"gold","x":1}`), http.StatusBadRequest, "bad_request", `unknown field "x"`)
	globex := e.tenantWithAdmin("globex")
	e.fails(e.do(globex, "PUT", "/v1/tenants/globex/pool", secapi.SetTenantPoolRequest{Pool: "gold"}), http.StatusForbidden, "forbidden", "only a super user")
	e.fails(e.do(nobody, "PUT", "/v1/tenants/globex/pool", secapi.SetTenantPoolRequest{Pool: "gold"}), http.StatusUnauthorized, "unauthenticated")
}
