package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// testScram is a well-formed credential for mechanism; seed tells two apart.
func testScram(mechanism string, seed byte) ScramKeys {
	n, _ := scramKeyLen(mechanism)
	return ScramKeys{
		Salt:       []byte{seed, 1, 2, 3},
		StoredKey:  bytes.Repeat([]byte{seed}, n),
		ServerKey:  bytes.Repeat([]byte{seed + 1}, n),
		Iterations: 4096,
	}
}

func testACL(tenant, principal string) ACL {
	return ACL{Tenant: tenant, ResourceType: 2, ResourceName: "orders", PatternType: 3,
		Principal: principal, Host: "*", Operation: 3, Permission: 3}
}

func mustCreateTenant(t *testing.T, s *Store, name string) {
	t.Helper()
	if _, err := s.CreateTenant(testContext(t), name); err != nil {
		t.Fatalf("CreateTenant(%q): %v", name, err)
	}
}

func mustCreateUser(t *testing.T, s *Store, name, tenant string) User {
	t.Helper()
	u, err := s.CreateUser(testContext(t), User{Name: name, Tenant: tenant, Scram: map[string]ScramKeys{ScramSHA256: testScram(ScramSHA256, 7)}})
	if err != nil {
		t.Fatalf("CreateUser(%q, %q): %v", name, tenant, err)
	}
	return u
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want %v", what, err, want)
	}
}

func TestSecurityNamesAndRecords(t *testing.T) {
	for i, tc := range []struct {
		got error
		err error
	}{
		{ValidateTenantName("acme"), nil},
		{ValidateTenantName("a-b_9"), nil},
		{ValidateTenantName(""), ErrInvalidName},
		{ValidateTenantName("9a"), ErrInvalidName},
		{ValidateTenantName("Acme"), ErrInvalidName},
		{ValidateTenantName("a/b"), ErrInvalidName},
		{ValidateTenantName(string(bytes.Repeat([]byte("a"), 65))), ErrInvalidName},
		{ValidateUserName("alice@example.com/x"), nil},
		{ValidateUserName(""), ErrInvalidName},
		{ValidateUserName("a\nb"), ErrInvalidName},
		{ValidateUserName("\xff"), ErrInvalidName},
		{ValidateAPIKeyID("k_1.A-z"), nil},
		{ValidateAPIKeyID("k/1"), ErrInvalidName},
		{validateScram(ScramSHA512, testScram(ScramSHA512, 1)), nil},
		{validateScram(ScramSHA512, testScram(ScramSHA256, 1)), ErrInvalidCredential},
		{validateScram("SCRAM-SHA-1", testScram(ScramSHA256, 1)), ErrInvalidName},
		{validateScram(ScramSHA256, ScramKeys{StoredKey: make([]byte, 32), ServerKey: make([]byte, 32), Iterations: 1}), ErrInvalidCredential},
		{validateRole("root"), ErrInvalidName},
		{validateACL(ACL{Tenant: "a", ResourceName: "t", Principal: "User:x"}), ErrInvalidACL},
	} {
		if !errors.Is(tc.got, tc.err) || (tc.err == nil) != (tc.got == nil) {
			t.Errorf("case %d: got %v, want %v", i, tc.got, tc.err)
		}
	}

	s := &Store{prefix: DefaultPrefix}
	one, same := testACL("a", "User:x"), testACL("a", "User:x")
	if aclHash(one) == aclHash(testACL("a", "User:y")) || s.aclKey(one) != s.aclKey(same) {
		t.Fatal("aclHash must tell bindings apart and name one binding one way")
	}
	for _, tc := range []struct {
		name, key, val string
		want           error
	}{
		{"newer version", s.tenantKey("a"), `{"v":2,"name":"a"}`, ErrUnknownVersion},
		{"no version", s.tenantKey("a"), `{"name":"a"}`, ErrCorrupt},
		{"not json", s.tenantKey("a"), `{`, ErrCorrupt},
		{"tenant under another key", s.tenantKey("b"), `{"v":1,"name":"a"}`, ErrCorrupt},
		{"user under another key", s.userKey("bob"), `{"v":1,"name":"alice","tenant":"a"}`, ErrCorrupt},
		{"user with bad role", s.userKey("alice"), `{"v":1,"name":"alice","tenant":"a","role":"root"}`, ErrCorrupt},
		{"user with short key", s.userKey("alice"), `{"v":1,"name":"alice","tenant":"a","scram":{"SCRAM-SHA-256":{"salt":"AQ==","stored_key":"AQ==","server_key":"AQ==","iterations":4096}}}`, ErrCorrupt},
		{"API key without hash", s.apiKeyKey("k"), `{"v":1,"id":"k","user":"alice"}`, ErrCorrupt},
		{"ACL under another hash", s.aclsPrefix("a") + "00", `{"v":1,"tenant":"a","resource_type":2,"resource_name":"t","pattern_type":3,"principal":"User:x","host":"*","operation":3,"permission":3}`, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch {
			case tc.key == s.tenantKey("a") || tc.key == s.tenantKey("b"):
				_, err = s.decodeTenant(tc.key, []byte(tc.val))
			case tc.key == s.apiKeyKey("k"):
				_, err = s.decodeAPIKey(tc.key, []byte(tc.val))
			case tc.key == s.userKey("alice") || tc.key == s.userKey("bob"):
				_, err = s.decodeUser(tc.key, []byte(tc.val))
			default:
				_, err = s.decodeACL(tc.key, []byte(tc.val))
			}
			wantErr(t, "decode "+tc.val, err, tc.want)
		})
	}
}

// FuzzDecodeSecurityRecord: no value under any security key panics the
// decoders, and one that decodes encodes to a value that decodes the same.
func FuzzDecodeSecurityRecord(f *testing.F) {
	s := &Store{prefix: DefaultPrefix}
	u, _ := s.encodeUser(User{Name: "a/b", Tenant: "t", Role: RoleSuper, Scram: map[string]ScramKeys{ScramSHA512: testScram(ScramSHA512, 3)}})
	k, _ := s.encodeAPIKey(APIKey{ID: "k", User: "a/b", Hash: []byte{1}})
	a, _ := s.encodeACL(testACL("t", "User:a"))
	f.Add(uint8(0), "t", `{"v":1,"name":"t","created_ms":5}`)
	f.Add(uint8(0), "t", `{"v":1,"name":"t","pool":"shared","created_ms":5}`)
	f.Add(uint8(0), "t", `{"v":1,"name":"t","pool":"gold","created_ms":5}`)
	f.Add(uint8(1), "a%2Fb", u)
	f.Add(uint8(2), "k", k)
	f.Add(uint8(3), "t/"+aclHash(testACL("t", "User:a")), a)
	f.Fuzz(func(t *testing.T, kind uint8, name, val string) {
		switch kind % 4 {
		case 0:
			key := s.tenantsPrefix() + name
			if v, err := s.decodeTenant(key, []byte(val)); err == nil {
				again, _ := s.encodeTenant(v)
				if w, err := s.decodeTenant(key, []byte(again)); err != nil || w != v {
					t.Fatalf("tenant %+v re-decodes as %+v, %v", v, w, err)
				}
			}
		case 1:
			key := s.usersPrefix() + name
			if v, err := s.decodeUser(key, []byte(val)); err == nil {
				again, _ := s.encodeUser(v)
				if w, err := s.decodeUser(key, []byte(again)); err != nil || fmt.Sprint(w) != fmt.Sprint(v) {
					t.Fatalf("user %+v re-decodes as %+v, %v", v, w, err)
				}
			}
		case 2:
			key := s.apiKeysPrefix() + name
			if v, err := s.decodeAPIKey(key, []byte(val)); err == nil {
				again, _ := s.encodeAPIKey(v)
				if w, err := s.decodeAPIKey(key, []byte(again)); err != nil || fmt.Sprint(w) != fmt.Sprint(v) {
					t.Fatalf("API key %+v re-decodes as %+v, %v", v, w, err)
				}
			}
		case 3:
			key := s.aclsRoot() + name
			if v, err := s.decodeACL(key, []byte(val)); err == nil {
				again, _ := s.encodeACL(v)
				if w, err := s.decodeACL(key, []byte(again)); err != nil || w != v {
					t.Fatalf("ACL %+v re-decodes as %+v, %v", v, w, err)
				}
			}
		}
	})
}

// TestSecurityStore: the create, read, list and delete rules of tenants,
// users, SCRAM credentials, API keys and ACLs over a real etcd.
func TestSecurityStore(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)

	t.Run("tenants", func(t *testing.T) {
		mustCreateTenant(t, s, "acme")
		_, err := s.CreateTenant(ctx, "acme")
		wantErr(t, "CreateTenant twice", err, ErrExists)
		_, err = s.CreateTenant(ctx, SystemTenant)
		wantErr(t, "CreateTenant(system)", err, ErrExists)
		wantErr(t, "CreateTenant(system)", err, ErrReserved)
		_, err = s.CreateTenant(ctx, "Bad")
		wantErr(t, "CreateTenant(Bad)", err, ErrInvalidName)
		_, err = s.GetTenant(ctx, DefaultTenant)
		wantErr(t, "GetTenant(default) before EnsureTenant", err, ErrNotFound)
		first, err := s.EnsureTenant(ctx, DefaultTenant)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.EnsureTenant(ctx, DefaultTenant)
		if err != nil || !again.Created.Equal(first.Created) {
			t.Fatalf("EnsureTenant again = %+v, %v; want %+v", again, err, first)
		}
		got, err := s.GetTenant(ctx, "acme")
		if err != nil || got.Name != "acme" || time.Since(got.Created) > time.Hour {
			t.Fatalf("GetTenant(acme) = %+v, %v", got, err)
		}
		list, err := s.ListTenants(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "acme" || list[1].Name != DefaultTenant {
			t.Fatalf("ListTenants = %+v, %v", list, err)
		}
		wantErr(t, "DeleteTenant(default)", s.DeleteTenant(ctx, DefaultTenant), ErrReserved)
		wantErr(t, "DeleteTenant(missing)", s.DeleteTenant(ctx, "missing"), ErrNotFound)
	})

	t.Run("users", func(t *testing.T) {
		mustCreateTenant(t, s, "blue")
		mustCreateTenant(t, s, "green")
		alice := mustCreateUser(t, s, "alice", "blue")
		_, err := s.CreateUser(ctx, User{Name: "alice", Tenant: "green"})
		wantErr(t, "CreateUser(alice) in another tenant", err, ErrExists)
		_, err = s.CreateUser(ctx, User{Name: "zed", Tenant: "nowhere"})
		wantErr(t, "CreateUser in a missing tenant", err, ErrNotFound)
		mustCreateUser(t, s, "svc/orders", "green") // escaped in its key
		mustCreateUser(t, s, "bob", "blue")

		got, err := s.GetUser(ctx, "alice")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(alice) || got.Tenant != "blue" || got.Role != RoleUser {
			t.Fatalf("GetUser(alice) = %+v, %v; want %+v", got, err, alice)
		}
		names := func(tenant string) []string {
			us, err := s.ListUsers(ctx, tenant)
			if err != nil {
				t.Fatalf("ListUsers(%q): %v", tenant, err)
			}
			var out []string
			for _, u := range us {
				out = append(out, u.Name)
			}
			return out
		}
		if got := names("blue"); !slices.Equal(got, []string{"alice", "bob"}) {
			t.Fatalf("ListUsers(blue) = %v", got)
		}
		if got := names(""); !slices.Equal(got, []string{"alice", "bob", "svc/orders"}) {
			t.Fatalf("ListUsers() = %v", got)
		}

		// Kafka's upsert and delete of credentials, and roles.
		if err := s.UpsertScram(ctx, "alice", ScramSHA512, testScram(ScramSHA512, 9)); err != nil {
			t.Fatal(err)
		}
		if err := s.UpsertScram(ctx, "alice", ScramSHA256, testScram(ScramSHA256, 11)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteScram(ctx, "alice", ScramSHA512); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "DeleteScram of a missing credential", s.DeleteScram(ctx, "alice", ScramSHA512), ErrNotFound)
		wantErr(t, "UpsertScram of a missing user", s.UpsertScram(ctx, "nobody", ScramSHA256, testScram(ScramSHA256, 1)), ErrNotFound)
		wantErr(t, "UpsertScram of bad keys", s.UpsertScram(ctx, "alice", ScramSHA256, testScram(ScramSHA512, 1)), ErrInvalidCredential)
		if err := s.SetRole(ctx, "alice", RoleTenantAdmin); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "SetRole(root)", s.SetRole(ctx, "alice", "root"), ErrInvalidName)
		got, err = s.GetUser(ctx, "alice")
		want := map[string]ScramKeys{ScramSHA256: testScram(ScramSHA256, 11)}
		if err != nil || got.Role != RoleTenantAdmin || fmt.Sprint(got.Scram) != fmt.Sprint(want) {
			t.Fatalf("alice after the changes = %+v, %v", got, err)
		}

		wantErr(t, "DeleteTenant(blue) with users", s.DeleteTenant(ctx, "blue"), ErrNotEmpty)
	})

	t.Run("api keys", func(t *testing.T) {
		mustCreateTenant(t, s, "red")
		mustCreateUser(t, s, "carol", "red")
		mustCreateUser(t, s, "dave", "red")
		k1, err := s.CreateAPIKey(ctx, APIKey{ID: "k1", User: "carol", Hash: []byte("h1"), Description: "ci"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.CreateAPIKey(ctx, APIKey{ID: "k1", User: "dave", Hash: []byte("h")})
		wantErr(t, "CreateAPIKey with a taken id", err, ErrExists)
		_, err = s.CreateAPIKey(ctx, APIKey{ID: "k9", User: "nobody", Hash: []byte("h")})
		wantErr(t, "CreateAPIKey of a missing user", err, ErrNotFound)
		for _, id := range []string{"k2", "k3"} {
			if _, err := s.CreateAPIKey(ctx, APIKey{ID: id, User: "carol", Hash: []byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CreateAPIKey(ctx, APIKey{ID: "d1", User: "dave", Hash: []byte("d")}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetAPIKey(ctx, "k1")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(k1) {
			t.Fatalf("GetAPIKey(k1) = %+v, %v; want %+v", got, err, k1)
		}
		ids := func(user string) []string {
			ks, err := s.ListAPIKeys(ctx, user)
			if err != nil {
				t.Fatalf("ListAPIKeys(%q): %v", user, err)
			}
			var out []string
			for _, k := range ks {
				out = append(out, k.ID)
			}
			return out
		}
		if got := ids("carol"); !slices.Equal(got, []string{"k1", "k2", "k3"}) {
			t.Fatalf("ListAPIKeys(carol) = %v", got)
		}
		if err := s.DeleteAPIKey(ctx, "k3"); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "DeleteAPIKey twice", s.DeleteAPIKey(ctx, "k3"), ErrNotFound)

		// DeleteUser takes its keys and no one else's.
		if err := s.DeleteUser(ctx, "carol"); err != nil {
			t.Fatal(err)
		}
		if got := ids(""); !slices.Equal(got, []string{"d1"}) {
			t.Fatalf("API keys after DeleteUser(carol) = %v, want [d1]", got)
		}
		wantErr(t, "DeleteUser twice", s.DeleteUser(ctx, "carol"), ErrNotFound)
		_, err = s.CreateAPIKey(ctx, APIKey{ID: "k4", User: "carol", Hash: []byte("h")})
		wantErr(t, "CreateAPIKey of a deleted user", err, ErrNotFound)

		for i := 1; i < MaxAPIKeysPerUser; i++ {
			if _, err := s.CreateAPIKey(ctx, APIKey{ID: fmt.Sprintf("d-%d", i), User: "dave", Hash: []byte("d")}); err != nil {
				t.Fatal(err)
			}
		}
		_, err = s.CreateAPIKey(ctx, APIKey{ID: "d-over", User: "dave", Hash: []byte("d")})
		wantErr(t, "CreateAPIKey over the limit", err, ErrLimit)
		if err := s.DeleteUser(ctx, "dave"); err != nil {
			t.Fatalf("DeleteUser with %d keys: %v", MaxAPIKeysPerUser, err)
		}
		if got := ids(""); len(got) != 0 {
			t.Fatalf("API keys after DeleteUser(dave) = %v", got)
		}
	})

	t.Run("acls", func(t *testing.T) {
		mustCreateTenant(t, s, "teal")
		mustCreateTenant(t, s, "navy")
		x, y, z := testACL("teal", "User:x"), testACL("teal", "User:y"), testACL("navy", "User:x")
		if err := s.CreateACLs(ctx, []ACL{x, y, x, z}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateACLs(ctx, []ACL{x}); err != nil {
			t.Fatalf("CreateACLs of a stored binding: %v", err)
		}
		wantErr(t, "CreateACLs in a missing tenant", s.CreateACLs(ctx, []ACL{testACL("nowhere", "User:x")}), ErrNotFound)
		wantErr(t, "CreateACLs of an empty host", s.CreateACLs(ctx, []ACL{{Tenant: "teal", ResourceName: "t", Principal: "User:x"}}), ErrInvalidACL)
		teal, err := s.ListACLs(ctx, "teal")
		if err != nil || len(teal) != 2 || !slices.Contains(teal, x) || !slices.Contains(teal, y) {
			t.Fatalf("ListACLs(teal) = %+v, %v", teal, err)
		}
		if all, err := s.ListACLs(ctx, ""); err != nil || len(all) != 3 {
			t.Fatalf("ListACLs() = %+v, %v", all, err)
		}
		deleted, err := s.DeleteACLs(ctx, func(a ACL) bool { return a.Principal == "User:x" })
		if err != nil || len(deleted) != 2 || !slices.Contains(deleted, x) || !slices.Contains(deleted, z) {
			t.Fatalf("DeleteACLs(User:x) = %+v, %v", deleted, err)
		}
		if teal, _ := s.ListACLs(ctx, "teal"); !slices.Equal(teal, []ACL{y}) {
			t.Fatalf("ListACLs(teal) after DeleteACLs = %+v", teal)
		}
		// A deleted tenant takes its bindings along.
		if err := s.DeleteTenant(ctx, "teal"); err != nil {
			t.Fatal(err)
		}
		mustCreateTenant(t, s, "teal")
		if teal, _ := s.ListACLs(ctx, "teal"); len(teal) != 0 {
			t.Fatalf("a re-created tenant inherited bindings %+v", teal)
		}
	})
}

// TestDeleteACLsConcurrentWithCreate: while one writer creates bindings
// and another keeps deleting every binding of the tenant, each created
// binding ends either returned by exactly one DeleteACLs or still stored:
// none is lost between a delete's read and its write.
func TestDeleteACLsConcurrentWithCreate(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	const n = 60
	done := make(chan struct{})
	var wg sync.WaitGroup
	var createErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range n {
			if err := s.CreateACLs(ctx, []ACL{testACL("acme", fmt.Sprintf("User:u%d", i))}); err != nil {
				createErr = err
				return
			}
		}
	}()
	deletedBy := map[string]int{}
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		deleted, err := s.DeleteACLs(ctx, func(a ACL) bool { return a.Tenant == "acme" })
		if err != nil {
			t.Fatalf("DeleteACLs: %v", err)
		}
		for _, a := range deleted {
			deletedBy[a.Principal]++
		}
	}
	waitGroupWithin(t, &wg, "the creating goroutine")
	if createErr != nil {
		t.Fatalf("CreateACLs: %v", createErr)
	}
	left, err := s.ListACLs(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range left {
		deletedBy[a.Principal]++
	}
	for i := range n {
		if p := fmt.Sprintf("User:u%d", i); deletedBy[p] != 1 {
			t.Errorf("binding of %s was deleted or kept %d times, want exactly once", p, deletedBy[p])
		}
	}
	t.Logf("%d of %d bindings deleted concurrently", n-len(left), n)
}

// waitSnapshot waits until cond holds for v's snapshot and returns it.
func waitSnapshot(t *testing.T, v *SecurityView, what string, cond func(SecuritySnapshot) bool) SecuritySnapshot {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		ch := v.Changed()
		if snap := v.Snapshot(); cond(snap) {
			return snap
		}
		select {
		case <-ch:
		case <-v.Done():
			t.Fatalf("view stopped while waiting for %s", what)
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; snapshot %+v", testTimeout, what, v.Snapshot())
		}
	}
}

// TestWatchSecurity: the view starts from the stored state, follows a change
// (a user and its API keys go in one snapshot), keeps old snapshots as they
// were, and stops with its ctx.
func TestWatchSecurity(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	mustCreateUser(t, s, "alice", "acme")
	if _, err := s.CreateAPIKey(ctx, APIKey{ID: "k1", User: "alice", Hash: []byte("h")}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateACLs(ctx, []ACL{testACL("acme", "User:alice")}); err != nil {
		t.Fatal(err)
	}
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := s.WatchSecurity(vctx)
	if err != nil {
		t.Fatal(err)
	}
	first := v.Snapshot()
	if _, ok := first.Users["alice"]; !ok || len(first.APIKeys) != 1 || len(first.ACLs) != 1 || first.Tenants["acme"].Name != "acme" || first.Revision == 0 {
		t.Fatalf("first snapshot %+v", first)
	}

	start := time.Now()
	mustCreateUser(t, s, "bob", "acme")
	waitSnapshot(t, v, "bob", func(s SecuritySnapshot) bool { _, ok := s.Users["bob"]; return ok })
	t.Logf("a new user reached the view in %v", time.Since(start))
	if _, ok := first.Users["bob"]; ok {
		t.Fatal("an earlier snapshot changed")
	}

	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	snap := waitSnapshot(t, v, "alice gone", func(s SecuritySnapshot) bool { _, ok := s.Users["alice"]; return !ok })
	if len(snap.APIKeys) != 0 {
		t.Fatalf("a snapshot without alice still has her API keys: %+v", snap.APIKeys)
	}
	if _, err := s.DeleteACLs(ctx, func(ACL) bool { return true }); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, v, "no ACLs", func(s SecuritySnapshot) bool { return len(s.ACLs) == 0 })

	// An undecodable record is named, not silently dropped.
	bad := s.aclsPrefix("acme") + "0000"
	if _, err := s.Client().Put(ctx, bad, "{"); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, v, "the corrupt key", func(s SecuritySnapshot) bool { return slices.Equal(s.Corrupt, []string{bad}) })
	if _, err := s.Client().Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, v, "the corrupt key gone", func(s SecuritySnapshot) bool { return len(s.Corrupt) == 0 })

	cancel()
	recvWithin(t, v.Done(), "the view to stop with its ctx")
}

// TestWatchSecurityAfterCompaction: a view whose next revision was
// compacted away reads everything again and converges; a live view keeps
// following across a compaction.
func TestWatchSecurityAfterCompaction(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	mustCreateTenant(t, s, "acme")
	mustCreateUser(t, s, "alice", "acme")
	live, err := s.WatchSecurity(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A watcher that read the state and fell behind: its revision is
	// compacted before it follows.
	behind, err := s.loadSecurity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	mustCreateUser(t, s, "bob", "acme")
	if err := s.CreateACLs(ctx, []ACL{testACL("acme", "User:bob")}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Client().Put(ctx, s.prefix+"unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if !s.followSecurity(ctx, behind) {
		t.Fatal("followSecurity on an open store")
	}
	converged := func(s SecuritySnapshot) bool {
		_, alice := s.Users["alice"]
		_, bob := s.Users["bob"]
		return !alice && bob && len(s.ACLs) == 1
	}
	snap := waitSnapshot(t, behind.view, "the compacted view to converge", converged)
	if snap.Revision < resp.Header.Revision {
		t.Fatalf("converged at revision %d, before the compaction at %d", snap.Revision, resp.Header.Revision)
	}
	waitSnapshot(t, live, "the live view to converge", converged)

	mustCreateUser(t, s, "carol", "acme")
	for _, v := range []*SecurityView{behind.view, live} {
		waitSnapshot(t, v, "carol after the compaction", func(s SecuritySnapshot) bool { _, ok := s.Users["carol"]; return ok })
	}
}
