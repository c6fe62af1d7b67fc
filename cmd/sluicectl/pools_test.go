package main

import "testing"

// TestTenantPools: tenant create --pool, tenant set-pool and the POOL
// column of tenant ls, against the real API on a real etcd.
func TestTenantPools(t *testing.T) {
	h := newHarness(t)
	h.admin("", "tenant", "create", "--pool", "gold", "acme").want(t, 0, "created tenant acme in pool gold")
	h.admin("", "tenant", "create", "plain").want(t, 0, "created tenant plain in pool shared")
	h.admin("", "tenant", "ls").want(t, 0, "NAME", "POOL", "CREATED", "acme", "gold", "plain", "shared")
	h.admin("", "tenant", "set-pool", "plain", "silver").want(t, 0, "tenant plain is in pool silver", "existing ones stay")
	ts := decode[struct{ Tenants []tenant }](t, h.admin("", "tenant", "ls", "--json").want(t, 0))
	pools := map[string]string{}
	for _, tn := range ts.Tenants {
		pools[tn.Name] = tn.Pool
	}
	if pools["acme"] != "gold" || pools["plain"] != "silver" || pools["system"] != "shared" {
		t.Fatalf("tenant ls --json pools %v", pools)
	}
	h.admin("", "tenant", "set-pool", "nope", "gold").wantErr(t, 1, "tenant_not_found", "HTTP 404")
	h.admin("", "tenant", "set-pool", "plain", "Gold").wantErr(t, 1, `pool "Gold"`, "HTTP 400")
	h.admin("", "tenant", "set-pool", "plain").wantErr(t, 2, "tenant set-pool: missing POOL")
}
