package kafka_test

// The ACL and SCRAM credential APIs over real sockets: franz-go's kadm
// against a broker whose users and bindings live in its own metadata store
// (embedded etcd), with SCRAM logins checked against the same store.

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka"
	"github.com/sluice-mq/sluice/meta"
)

// storeSecurity stands in for the broker's security Guard: it reads users,
// roles and bindings from the broker's own metadata store at every call, so
// what the Kafka APIs write is what the next login and check see.
type storeSecurity struct {
	store atomic.Pointer[meta.Store] // set once the broker runs
}

func (s *storeSecurity) user(name string) (meta.User, bool) {
	st := s.store.Load()
	if st == nil {
		return meta.User{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := st.GetUser(ctx, name)
	return u, err == nil
}

func (s *storeSecurity) lookup(mechanism, user string) (auth.ScramCredential, string, bool) {
	if mechanism == auth.MechanismPlain {
		mechanism = auth.MechanismScramSHA256
	}
	u, ok := s.user(user)
	if !ok {
		return auth.ScramCredential{}, "", false
	}
	k, ok := u.Scram[mechanism]
	if !ok {
		return auth.ScramCredential{}, "", false
	}
	return auth.ScramCredential{Mechanism: mechanism, Salt: k.Salt, Iterations: k.Iterations,
		StoredKey: k.StoredKey, ServerKey: k.ServerKey}, u.Tenant, true
}

// Identity gives a stored user its role, as the Guard does.
func (s *storeSecurity) Identity(p auth.Principal) auth.Identity {
	id := auth.Identity{Principal: p}
	if u, ok := s.user(p.User); ok {
		id.Principal.Tenant, id.Role = u.Tenant, u.Role
	}
	return id
}

func (s *storeSecurity) Enabled() bool { return true }

func (s *storeSecurity) Authorize(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision {
	if s.Identity(id.Principal).IsSuper() {
		return acl.Decision{Allowed: true, Reason: "super user"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stored, err := s.store.Load().ListACLs(ctx, "")
	if err != nil {
		return acl.Decision{Reason: err.Error()}
	}
	var bs []acl.Binding
	for _, a := range stored {
		bs = append(bs, acl.Binding{Tenant: a.Tenant, ResourceType: acl.ResourceType(a.ResourceType),
			ResourceName: a.ResourceName, PatternType: acl.PatternType(a.PatternType), Principal: a.Principal,
			Host: a.Host, Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)})
	}
	az, _ := acl.NewAuthorizer(acl.Config{})
	if err := az.Replace(bs); err != nil {
		return acl.Decision{Reason: err.Error()}
	}
	if h, err := acl.CanonicalHost(host); err == nil {
		host = h
	}
	return az.Authorize(acl.Request{Tenant: id.Principal.Tenant, Principal: id.Principal.String(), Host: host,
		Operation: op, ResourceType: rt, ResourceName: name})
}

// adminFixture is a broker with tenants team-a and team-b and their users.
type adminFixture struct {
	sb  *secureBroker
	sec *storeSecurity
}

// Users of the fixture: name → tenant, role; every password is name+"-pw".
var fixtureUsers = []meta.User{
	{Name: "root", Tenant: meta.SystemTenant, Role: meta.RoleSuper},
	{Name: "ada", Tenant: "team-a", Role: meta.RoleTenantAdmin},
	{Name: "carl", Tenant: "team-a"},
	{Name: "bea", Tenant: "team-b", Role: meta.RoleTenantAdmin},
	{Name: "bo", Tenant: "team-b"},
}

func startAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	sec := &storeSecurity{}
	sb := startSecureBroker(t, func(c *broker.Config) {
		c.SASLEnabledMechanisms = []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512}
	}, kafka.WithCredentials(sec.lookup), kafka.WithAuthorizer(sec))
	sec.store.Store(sb.Store)
	ctx := context.Background()
	for _, tn := range []string{meta.SystemTenant, "team-a", "team-b"} {
		if _, err := sb.Store.EnsureTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range fixtureUsers {
		u.Scram = map[string]meta.ScramKeys{}
		for _, m := range []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512} {
			c, err := auth.NewScramCredential(m, u.Name+"-pw", auth.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			u.Scram[m] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
		}
		if _, err := sb.Store.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	return &adminFixture{sb: sb, sec: sec}
}

// admin is a kadm client logged in as user with password over SASL_PLAINTEXT.
func (f *adminFixture) admin(t *testing.T, user, password string) *kadm.Client {
	t.Helper()
	cl := f.sb.client(t, "SASL_PLAINTEXT", kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()),
		kgo.RequestRetries(0))
	return kadm.NewClient(cl)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// created creates the bindings of b as cl and checks that every creation
// succeeded.
func created(t *testing.T, cl *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	rs, err := cl.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("create %s %s %q: %v: %s", r.Principal, r.Type, r.Name, r.Err, r.ErrMessage)
		}
	}
}

// described lists the bindings b selects as cl, failing on any error.
func described(t *testing.T, cl *kadm.Client, b *kadm.ACLBuilder) []kadm.DescribedACL {
	t.Helper()
	rs, err := cl.DescribeACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	var out []kadm.DescribedACL
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("describe: %v: %s", r.Err, r.ErrMessage)
		}
		out = append(out, r.Described...)
	}
	return out
}

func storedACLs(t *testing.T, st *meta.Store, tenant string) []meta.ACL {
	t.Helper()
	acls, err := st.ListACLs(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return acls
}

// A tenant admin creates, lists and deletes its tenant's bindings with
// kadm; another tenant's admin never sees or deletes them; an ordinary
// user is refused until an ACL grants it ALTER on its tenant's cluster.
func TestACLAPIs(t *testing.T) {
	f := startAdminFixture(t)
	ctx := testCtx(t)
	ada, bea := f.admin(t, "ada", "ada-pw"), f.admin(t, "bea", "bea-pw")

	created(t, ada, kadm.NewACLs().Allow("User:carl").Topics("orders").
		Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	created(t, ada, kadm.NewACLs().Deny("User:*").DenyHosts("::ffff:10.0.0.9").Groups("ops-").
		Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed))
	created(t, bea, kadm.NewACLs().Allow("User:bo").Topics("orders").
		Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))

	if got := storedACLs(t, f.sb.Store, "team-a"); len(got) != 3 {
		t.Fatalf("team-a stores %d bindings, want 3: %+v", len(got), got)
	}
	deny := storedACLs(t, f.sb.Store, "team-a")
	var hostOK bool
	for _, a := range deny {
		hostOK = hostOK || a.Host == "10.0.0.9" // stored in canonical form
	}
	if !hostOK {
		t.Errorf("the IPv4-mapped host is not stored as 10.0.0.9: %+v", deny)
	}

	all := kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	seenA := described(t, ada, all)
	if len(seenA) != 3 {
		t.Fatalf("ada describes %d bindings, want team-a's 3: %+v", len(seenA), seenA)
	}
	for _, d := range seenA {
		if d.Principal == "User:bo" {
			t.Fatalf("ada sees team-b's binding %+v", d)
		}
	}
	seenB := described(t, bea, all)
	if len(seenB) != 1 || seenB[0].Principal != "User:bo" || seenB[0].Operation != kadm.OpWrite {
		t.Fatalf("bea describes %+v, want only team-b's WRITE for User:bo", seenB)
	}

	// bea deletes with a filter that would match every binding of every
	// tenant: only team-b's goes.
	dr, err := bea.DeleteACLs(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	var deleted int
	for _, r := range dr {
		if r.Err != nil {
			t.Fatalf("delete: %v: %s", r.Err, r.ErrMessage)
		}
		for _, d := range r.Deleted {
			deleted++
			if d.Principal != "User:bo" {
				t.Errorf("bea deleted %+v", d)
			}
		}
	}
	if deleted != 1 || len(storedACLs(t, f.sb.Store, "team-b")) != 0 || len(storedACLs(t, f.sb.Store, "team-a")) != 3 {
		t.Fatalf("after bea's delete: %d deleted, team-a %d, team-b %d", deleted,
			len(storedACLs(t, f.sb.Store, "team-a")), len(storedACLs(t, f.sb.Store, "team-b")))
	}

	// A narrower filter: only the literal topic binding's READ.
	dr, err = ada.DeleteACLs(ctx, kadm.NewACLs().Allow("User:carl").AllowHosts().Topics("orders").
		Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil {
		t.Fatal(err)
	}
	if len(dr) != 1 || dr[0].Err != nil || len(dr[0].Deleted) != 1 || dr[0].Deleted[0].Operation != kadm.OpRead {
		t.Fatalf("ada's narrow delete: %+v", dr)
	}
	if n := len(storedACLs(t, f.sb.Store, "team-a")); n != 2 {
		t.Fatalf("team-a keeps %d bindings, want 2", n)
	}

	// carl, an ordinary user, is refused every ACL API.
	carl := f.admin(t, "carl", "carl-pw")
	cr, err := carl.CreateACLs(ctx, kadm.NewACLs().Allow("User:carl").Topics("x").Operations(kadm.OpAll).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(cr) != 1 || !errors.Is(cr[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("carl's create: %+v, want CLUSTER_AUTHORIZATION_FAILED", cr)
	}
	if dr, err := carl.DescribeACLs(ctx, all); err != nil || len(dr) != 1 || !errors.Is(dr[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("carl's describe: %+v %v, want CLUSTER_AUTHORIZATION_FAILED", dr, err)
	}
	if n := len(storedACLs(t, f.sb.Store, "team-a")); n != 2 {
		t.Fatalf("carl's refused create stored something: team-a has %d bindings", n)
	}

	// Kafka's model: ALTER on the tenant's cluster lets carl manage ACLs.
	created(t, ada, kadm.NewACLs().Allow("User:carl").Clusters().
		Operations(kadm.OpAlter).ResourcePatternType(kadm.ACLPatternLiteral))
	created(t, carl, kadm.NewACLs().Allow("User:carl").Topics("x").Operations(kadm.OpAll).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if got := described(t, carl, all); len(got) != 4 {
		t.Fatalf("carl describes %d bindings, want team-a's 4", len(got))
	}
}

// Invalid creations are refused one by one with INVALID_REQUEST and a
// message, next to a valid one that is stored; a super user's binding for
// another tenant's user is refused with the way to manage that tenant.
func TestCreateACLsPerItemErrors(t *testing.T) {
	f := startAdminFixture(t)
	ctx := testCtx(t)
	ada := f.admin(t, "ada", "ada-pw")
	rs, err := ada.CreateACLs(ctx, kadm.NewACLs().Allow("User:carl").AllowHosts("not-an-address", "*").
		Topics("t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	var good, bad int
	for _, r := range rs {
		switch {
		case r.Err == nil && r.Host == "*":
			good++
		case errors.Is(r.Err, kerr.InvalidRequest) && r.Host == "not-an-address" && strings.Contains(r.ErrMessage, "not-an-address"):
			bad++
		default:
			t.Errorf("unexpected result %+v", r)
		}
	}
	if good != 1 || bad != 1 || len(storedACLs(t, f.sb.Store, "team-a")) != 1 {
		t.Fatalf("%d good, %d refused, team-a stores %d; want 1, 1, 1", good, bad, len(storedACLs(t, f.sb.Store, "team-a")))
	}

	root := f.admin(t, "root", "root-pw")
	rs, err = root.CreateACLs(ctx, kadm.NewACLs().Allow("User:ada").Topics("t").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidRequest) || !strings.Contains(rs[0].ErrMessage, "--tenant team-a") {
		t.Fatalf("root's binding for team-a's user: %+v, want INVALID_REQUEST naming --tenant team-a", rs)
	}
	// In its own tenant a super user manages bindings like anyone.
	created(t, root, kadm.NewACLs().Allow("User:*").Topics("audit").Operations(kadm.OpDescribe).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if n := len(storedACLs(t, f.sb.Store, meta.SystemTenant)); n != 1 {
		t.Fatalf("system tenant stores %d bindings, want 1", n)
	}
}

// AlterUserScramCredentials changes a password: a new SCRAM login with it
// works, the old password fails; Describe shows mechanisms and iterations.
// A tenant admin cannot reach another tenant's user (answered as unknown),
// an ordinary user is refused, and a user must exist.
func TestUserSCRAMAPIs(t *testing.T) {
	f := startAdminFixture(t)
	ctx := testCtx(t)
	ada := f.admin(t, "ada", "ada-pw")

	res, err := ada.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carl", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "carl", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carl-new"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["carl"]; r.Err != nil {
		t.Fatalf("alter carl: %v: %s", r.Err, r.ErrMessage)
	}
	d, err := ada.DescribeUserSCRAMs(ctx, "carl")
	if err != nil {
		t.Fatal(err)
	}
	if c := d["carl"]; c.Err != nil || len(c.CredInfos) != 1 || c.CredInfos[0].Mechanism != kadm.ScramSha512 || c.CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe carl: %+v, want SCRAM-SHA-512 with 8192 iterations only", c)
	}

	login := func(user, pass string, sha512 bool) error {
		mech := scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		if sha512 {
			mech = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(f.sb.addr["SASL_PLAINTEXT"]), kgo.SASL(mech), kgo.RequestRetries(0))
		if err != nil {
			return err
		}
		defer cl.Close()
		return cl.Ping(ctx)
	}
	if err := login("carl", "carl-new", true); err != nil {
		t.Fatalf("login with the new password: %v", err)
	}
	if err := login("carl", "carl-pw", true); err == nil {
		t.Fatal("the old password still logs in")
	}
	if err := login("carl", "carl-pw", false); err == nil {
		t.Fatal("the deleted SCRAM-SHA-256 credential still logs in")
	}

	// Listing all: team-a's users only, for ada; every user for root.
	d, err = ada.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || d["ada"].User == "" || d["carl"].User == "" {
		t.Fatalf("ada lists %v, want ada and carl", d.Sorted())
	}
	root := f.admin(t, "root", "root-pw")
	if d, err = root.DescribeUserSCRAMs(ctx); err != nil || len(d) != len(fixtureUsers) {
		t.Fatalf("root lists %v (%v), want all %d users", d.Sorted(), err, len(fixtureUsers))
	}

	// bo is team-b's; nobody is nobody's: ada gets the same answer for both.
	res, err = ada.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bo", Mechanism: kadm.ScramSha512, Password: "stolen"},
		{User: "nobody", Mechanism: kadm.ScramSha512, Password: "x-pw"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"bo", "nobody"} {
		r := res[u]
		if !errors.Is(r.Err, kerr.ResourceNotFound) || !strings.Contains(r.ErrMessage, "sluicectl user create") {
			t.Errorf("ada alters %s: %v %q, want RESOURCE_NOT_FOUND naming sluicectl user create", u, r.Err, r.ErrMessage)
		}
	}
	if strings.ReplaceAll(res["bo"].ErrMessage, "bo", "X") != strings.ReplaceAll(res["nobody"].ErrMessage, "nobody", "X") {
		t.Errorf("another tenant's user and an unknown one answer differently: %q vs %q", res["bo"].ErrMessage, res["nobody"].ErrMessage)
	}
	d, err = ada.DescribeUserSCRAMs(ctx, "bo")
	if err != nil || !errors.Is(d["bo"].Err, kerr.ResourceNotFound) {
		t.Fatalf("ada describes bo: %+v %v, want RESOURCE_NOT_FOUND", d["bo"], err)
	}
	if err := login("bo", "bo-pw", true); err != nil {
		t.Fatalf("bo's password changed by another tenant's admin: %v", err)
	}

	// Iterations out of bounds: UNACCEPTABLE_CREDENTIAL. kadm checks the
	// bounds of a password itself, so send a salted one.
	salted := make([]byte, 64)
	res, err = ada.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carl", Mechanism: kadm.ScramSha512, Iterations: 1000, Salt: []byte("salt"), SaltedPassword: salted},
	})
	if err != nil || !errors.Is(res["carl"].Err, kerr.UnacceptableCredential) {
		t.Fatalf("1000 iterations: %+v %v, want UNACCEPTABLE_CREDENTIAL", res["carl"], err)
	}

	// A super user reaches every tenant's users.
	res, err = root.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bo", Mechanism: kadm.ScramSha256, Password: "bo-new"}})
	if err != nil || res["bo"].Err != nil {
		t.Fatalf("root alters bo: %+v %v", res["bo"], err)
	}
	if err := login("bo", "bo-new", false); err != nil {
		t.Fatalf("bo's new SCRAM-SHA-256 password: %v", err)
	}

	// An ordinary user is refused, even for itself.
	carl := f.admin(t, "carl", "carl-new")
	res, err = carl.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carl", Mechanism: kadm.ScramSha512, Password: "mine"}})
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["carl"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("carl alters itself: %+v %v, want CLUSTER_AUTHORIZATION_FAILED", res["carl"], err)
	}
	if _, err := carl.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("carl describes: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if err := login("carl", "carl-new", true); err != nil {
		t.Fatalf("carl's refused alteration changed its password: %v", err)
	}
}

// Without an authoriser (the development default) the ACL APIs answer
// SECURITY_DISABLED, as Kafka does, and the anonymous principal, which has
// no role, may not touch credentials.
func TestAdminAPIsWithoutSecurity(t *testing.T) {
	sb := startSecureBroker(t, nil, kafka.WithCredentials(testUsers.lookup(t)))
	ctx := testCtx(t)
	adm := kadm.NewClient(sb.client(t, "PLAINTEXT", kgo.RequestRetries(0)))
	rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:x").Topics("t").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("create: %+v %v, want SECURITY_DISABLED", rs, err)
	}
	dr, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(dr) != 1 || !errors.Is(dr[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("describe: %+v %v, want SECURITY_DISABLED", dr, err)
	}
	if _, err := adm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe credentials: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}
