package meta

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestBrokerPool: a broker's pool is stored with its registration, a
// record without one (from a build before pools) reads as DefaultPool, and
// a malformed pool is refused.
func TestBrokerPool(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	gold := testBroker(1)
	gold.Pool = "gold"
	register(t, s, gold, 0)
	register(t, s, testBroker(2), 0) // no pool
	// A record a build without pools wrote.
	old := `{"v":1,"node_id":3,"az":"a","kafka":"h:1","http":"h:2","started_ms":1}`
	if _, err := s.Client().Put(ctx, s.brokerKey(3), old); err != nil {
		t.Fatal(err)
	}
	brokers, err := s.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{1: "gold", 2: DefaultPool, 3: DefaultPool}
	for _, b := range brokers {
		if b.Pool != want[b.NodeID] {
			t.Errorf("broker %d in pool %q, want %q", b.NodeID, b.Pool, want[b.NodeID])
		}
	}
	bad := testBroker(4)
	bad.Pool = "Gold!"
	if _, err := s.Register(ctx, bad, 0); !errors.Is(err, ErrInvalidBroker) || !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Register with pool %q = %v, want ErrInvalidBroker and ErrInvalidName", bad.Pool, err)
	}
}

// TestTenantPool: a tenant is created bound to a pool or to none, its pool
// changes, a record from before pools reads as unbound, and TenantPool
// answers DefaultPool for an unbound or missing tenant.
func TestTenantPool(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, err := s.CreateTenantInPool(ctx, "acme", "gold"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTenantInPool(ctx, "bad", "Not A Pool"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("CreateTenantInPool with a bad pool = %v, want ErrInvalidName", err)
	}
	mustCreateTenant(t, s, "plain")
	// A record a build without pools wrote.
	if _, err := s.Client().Put(ctx, s.tenantKey("older"), `{"v":1,"name":"older","created_ms":1}`); err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[string]string{"acme": "gold", "plain": DefaultPool, "older": DefaultPool, "missing": DefaultPool} {
		if got, err := s.TenantPool(ctx, tenant); err != nil || got != want {
			t.Errorf("TenantPool(%s) = %q, %v; want %q", tenant, got, err, want)
		}
	}
	if got, err := s.SetTenantPool(ctx, "plain", "silver"); err != nil || got.Pool != "silver" {
		t.Fatalf("SetTenantPool(plain, silver) = %+v, %v", got, err)
	}
	if got, err := s.SetTenantPool(ctx, "acme", DefaultPool); err != nil || got.Pool != "" {
		t.Fatalf("SetTenantPool(acme, shared) = %+v, %v; want unbound", got, err)
	}
	list, err := s.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]string{}
	for _, tn := range list {
		pools[tn.Name] = tn.Pool
	}
	if pools["plain"] != "silver" || pools["acme"] != "" || pools["older"] != "" {
		t.Fatalf("ListTenants pools %v", pools)
	}
	if _, err := s.SetTenantPool(ctx, "missing", "gold"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetTenantPool(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.SetTenantPool(ctx, "plain", "-x"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("SetTenantPool with a bad pool = %v, want ErrInvalidName", err)
	}
}

// FuzzDecodeBroker: no value under a broker key panics the decoder, and a
// record that decodes encodes to one that decodes the same (its pool
// included: a stored "shared" and an absent pool read alike).
func FuzzDecodeBroker(f *testing.F) {
	s := &Store{prefix: DefaultPrefix}
	f.Add(`{"v":1,"node_id":3,"az":"a","kafka":"h:1","http":"h:2","started_ms":1}`)
	f.Add(`{"v":1,"node_id":3,"az":"a","kafka":"h:1","http":"h:2","pool":"gold","started_ms":1}`)
	f.Add(`{"v":1,"node_id":3,"az":"a","kafka":"h:1","http":"h:2","pool":"shared","listeners":{"x":"h:3"}}`)
	f.Fuzz(func(t *testing.T, val string) {
		kv := &mvccpb.KeyValue{Key: []byte(s.brokerKey(3)), Value: []byte(val)}
		b, err := s.decodeBroker(kv)
		if err != nil {
			return
		}
		again, err := encodeBroker(b)
		if err != nil {
			t.Fatalf("encode %+v: %v", b, err)
		}
		w, err := s.decodeBroker(&mvccpb.KeyValue{Key: kv.Key, Value: again})
		if err != nil || !sameBroker(w, b) || w.Pool != b.Pool {
			t.Fatalf("broker %+v re-decodes as %+v, %v", b, w, err)
		}
	})
}
