package security

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

const testTimeout = 30 * time.Second

func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Must(t)
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens a store on a fresh embedded etcd member.
func openStore(t *testing.T) *meta.Store {
	t.Helper()
	st, err := meta.Open(testContext(t), meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeAddr(t), ListenPeer: freeAddr(t), StartTimeout: testTimeout}, zerolog.Nop())
	if err != nil {
		t.Fatalf("meta.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func startGuard(t *testing.T, st *meta.Store, cfg Config) *Guard {
	t.Helper()
	g, err := Start(testContext(t), st, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

func writePassword(t *testing.T, pw string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin-password")
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func createUser(t *testing.T, st *meta.Store, name, tenant, role, password string) {
	t.Helper()
	scram := map[string]meta.ScramKeys{}
	for _, m := range []string{meta.ScramSHA256, meta.ScramSHA512} {
		c, err := auth.NewScramCredential(m, password, auth.DefaultIterations)
		if err != nil {
			t.Fatal(err)
		}
		scram[m] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	}
	if _, err := st.CreateUser(testContext(t), meta.User{Name: name, Tenant: tenant, Role: role, Scram: scram}); err != nil {
		t.Fatalf("CreateUser(%s): %v", name, err)
	}
}

// awaitRevision waits until g applies the store's current revision.
func awaitRevision(t *testing.T, st *meta.Store, g *Guard) {
	t.Helper()
	resp, err := st.Client().Get(testContext(t), "probe-revision")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	deadline := time.Now().Add(10 * time.Second)
	for g.Revision() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("guard at revision %d, store at %d after 10s", g.Revision(), rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGuardBootstrapAndLookup(t *testing.T) {
	st := openStore(t)
	g := startGuard(t, st, Config{Enabled: true, AdminPasswordFile: writePassword(t, "s3cret")})

	for _, tn := range []string{meta.SystemTenant, meta.DefaultTenant} {
		if _, err := st.GetTenant(testContext(t), tn); err != nil {
			t.Errorf("tenant %s after bootstrap: %v", tn, err)
		}
	}
	for _, mech := range []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512} {
		cred, tenant, ok := g.ScramLookup(mech, AdminUser)
		if !ok || tenant != meta.SystemTenant || !cred.VerifyPassword("s3cret") || cred.Mechanism != mech {
			t.Errorf("ScramLookup(%s, admin) = %+v, %q, %v", mech, cred.Mechanism, tenant, ok)
		}
	}
	if _, _, ok := g.ScramLookup(auth.MechanismScramSHA512, "nobody"); ok {
		t.Error("ScramLookup found a user that does not exist")
	}
	id, err := g.CheckBasic(AdminUser, "s3cret")
	if err != nil || !id.IsSuper() || id.Principal != (auth.Principal{Tenant: meta.SystemTenant, User: AdminUser}) {
		t.Errorf("CheckBasic(admin) = %+v, %v", id, err)
	}
	if _, err := g.CheckBasic(AdminUser, "wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("CheckBasic with a wrong password: %v", err)
	}

	// A second start with another password changes nothing.
	g2 := startGuard(t, st, Config{Enabled: true, AdminPasswordFile: writePassword(t, "other")})
	if _, err := g2.CheckBasic(AdminUser, "s3cret"); err != nil {
		t.Errorf("the bootstrap overwrote admin's password: %v", err)
	}
	if _, err := g2.CheckBasic(AdminUser, "other"); err == nil {
		t.Error("the second password file's password works")
	}
}

func TestGuardAPIKeysAndRoles(t *testing.T) {
	st := openStore(t)
	ctx := testContext(t)
	if _, err := st.CreateTenant(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	createUser(t, st, "alice", "team-a", meta.RoleTenantAdmin, "pw-alice")
	createUser(t, st, "bob", "team-a", meta.RoleUser, "pw-bob")
	key, kid, hash, err := auth.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateAPIKey(ctx, meta.APIKey{ID: kid, User: "bob", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	g := startGuard(t, st, Config{Enabled: true, SuperUsers: []string{"User:carol"}})

	id, err := g.CheckAPIKey(key)
	if err != nil || id.Principal != (auth.Principal{Tenant: "team-a", User: "bob"}) || id.Role != auth.RoleUser {
		t.Errorf("CheckAPIKey = %+v, %v", id, err)
	}
	other, _, _, _ := auth.NewAPIKey()
	for _, bad := range []string{other, key[:len(key)-1] + "a", "", "sk_x"} {
		if bad == key {
			continue
		}
		if _, err := g.CheckAPIKey(bad); !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("CheckAPIKey(%q) = %v, want ErrInvalidCredentials", bad, err)
		}
	}
	cases := []struct {
		p    auth.Principal
		want auth.Identity
	}{
		{auth.Principal{User: "alice"}, auth.Identity{Principal: auth.Principal{Tenant: "team-a", User: "alice"}, Role: auth.RoleTenantAdmin}},
		{auth.Principal{User: "bob"}, auth.Identity{Principal: auth.Principal{Tenant: "team-a", User: "bob"}}},
		{auth.Principal{User: "carol"}, auth.Identity{Principal: auth.Principal{Tenant: meta.SystemTenant, User: "carol"}, Role: auth.RoleSuper}},
		{auth.Principal{User: "cert-only"}, auth.Identity{Principal: auth.Principal{Tenant: auth.DefaultTenant, User: "cert-only"}}},
	}
	for _, c := range cases {
		if got := g.Identity(c.p); got != c.want {
			t.Errorf("Identity(%+v) = %+v, want %+v", c.p, got, c.want)
		}
	}
	if !g.UserExists("bob") || g.UserExists("carol") {
		t.Error("UserExists does not follow the stored users")
	}

	// Deleting bob revokes his key within the watch's delay.
	if err := st.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	awaitRevision(t, st, g)
	if _, err := g.CheckAPIKey(key); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("the key of a deleted user still works: %v", err)
	}
	if g.UserExists("bob") {
		t.Error("UserExists(bob) after his deletion")
	}
}

func TestGuardAuthorize(t *testing.T) {
	st := openStore(t)
	ctx := testContext(t)
	if _, err := st.CreateTenant(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	createUser(t, st, "alice", "team-a", meta.RoleUser, "pw")
	g := startGuard(t, st, Config{Enabled: true, SuperUsers: []string{"User:root"}})
	alice := g.Identity(auth.Principal{User: "alice"})
	root := g.Identity(auth.Principal{User: "root"})
	read := func(id auth.Identity, topic string) bool {
		return g.Authorize(id, "10.0.0.1", acl.OpRead, acl.ResourceTopic, topic).Allowed
	}
	if read(alice, "orders") {
		t.Error("alice reads orders without any ACL (allow-everyone is off)")
	}
	if !read(root, "orders") {
		t.Error("a super user is refused")
	}
	if err := st.CreateACLs(ctx, []meta.ACL{{Tenant: "team-a", ResourceType: int8(acl.ResourceTopic), ResourceName: "orders",
		PatternType: int8(acl.PatternLiteral), Principal: "User:alice", Host: "*",
		Operation: int8(acl.OpRead), Permission: int8(acl.PermissionAllow)}}); err != nil {
		t.Fatal(err)
	}
	awaitRevision(t, st, g)
	if !read(alice, "orders") || read(alice, "payments") {
		t.Error("the ALLOW binding on orders is not applied as written")
	}
	// The same name in another tenant is another resource.
	if read(auth.Identity{Principal: auth.Principal{Tenant: "team-b", User: "alice"}}, "orders") {
		t.Error("team-a's binding allowed a principal of team-b")
	}

	// An undecodable ACL record may be a lost DENY: everything but the
	// super users is refused until it is gone.
	bad := st.Prefix() + "security/acls/team-a/ffffffffffffffffffffffffffffffff"
	if _, err := st.Client().Put(ctx, bad, "{not json"); err != nil {
		t.Fatal(err)
	}
	awaitRevision(t, st, g)
	if d := g.Authorize(alice, "10.0.0.1", acl.OpRead, acl.ResourceTopic, "orders"); d.Allowed {
		t.Error("a corrupt record did not make the guard fail closed")
	} else if d.Reason == "" {
		t.Error("the fail-closed refusal gives no reason")
	}
	if !read(root, "orders") {
		t.Error("failing closed refused a super user")
	}
	if _, err := st.Client().Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	awaitRevision(t, st, g)
	if !read(alice, "orders") {
		t.Error("the guard stays closed after the corrupt record is gone")
	}
}

func TestGuardDisabledAllowsAll(t *testing.T) {
	st := openStore(t)
	g := startGuard(t, st, Config{})
	if d := g.Authorize(auth.Identity{Principal: auth.Anonymous}, "127.0.0.1", acl.OpWrite, acl.ResourceTopic, "x"); !d.Allowed {
		t.Errorf("security off refused the anonymous principal: %s", d.Reason)
	}
	if g.Enabled() {
		t.Error("Enabled with a zero Config")
	}
}

func TestGuardRefusesBadSuperUsers(t *testing.T) {
	st := openStore(t)
	if _, err := Start(testContext(t), st, Config{SuperUsers: []string{"User:*"}}); err == nil {
		t.Error("Start accepted User:* as a super user")
	}
	if _, err := Start(testContext(t), st, Config{AdminPasswordFile: writePassword(t, "")}); err == nil {
		t.Error("Start accepted an empty admin password")
	}
}
