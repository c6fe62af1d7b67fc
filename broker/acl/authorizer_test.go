package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// b builds a binding from a compact form for the tables:
// "tenant topic|group|cluster|txn literal|prefixed NAME PRINCIPAL HOST OP allow|deny".
func b(t testing.TB, s string) Binding {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 8 {
		t.Fatalf("binding %q: want 8 fields", s)
	}
	rt, err1 := ParseResourceType(strings.Replace(f[1], "txn", "transactional-id", 1))
	pt, err2 := ParsePatternType(f[2])
	op, err3 := ParseOperation(f[6])
	perm, err4 := ParsePermission(f[7])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatalf("binding %q: %v", s, err)
	}
	return Binding{Tenant: f[0], ResourceType: rt, PatternType: pt, ResourceName: f[3], Principal: f[4],
		Host: f[5], Operation: op, Permission: perm}
}

// r builds a request: "tenant PRINCIPAL HOST OP topic|group|cluster|txn NAME";
// tenant "-" stands for no tenant.
func r(t testing.TB, s string) Request {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 6 {
		t.Fatalf("request %q: want 6 fields", s)
	}
	op, err := ParseOperation(f[3])
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ParseResourceType(strings.Replace(f[4], "txn", "transactional-id", 1))
	if err != nil {
		t.Fatal(err)
	}
	if f[0] == "-" {
		f[0] = ""
	}
	return Request{Tenant: f[0], Principal: f[1], Host: f[2], Operation: op, ResourceType: rt, ResourceName: f[5]}
}

// The bindings most cases of TestAuthorize run against.
var common = []string{
	"t1 topic literal orders User:alice * read allow",
	"t1 topic literal orders User:mallory * all deny",
	"t1 topic prefixed logs- User:alice * write allow",
	"t1 topic literal logs-secret User:alice * write deny",
	"t1 topic literal * User:auditor * describe allow",
	"t1 topic literal payments User:* * read allow",
	"t1 topic literal payments User:bob 10.0.0.9 read deny",
	"t1 topic literal metrics User:carol 10.0.0.1 write allow",
	"t1 topic literal configs User:carol * alter-configs allow",
	"t1 topic literal deleting User:carol * delete allow",
	"t1 topic literal altering User:carol * alter allow",
	"t1 topic literal creating User:carol * create allow",
	"t1 topic literal readdeny User:carol * read deny",
	"t1 topic literal readdeny User:carol * describe allow",
	"t1 topic literal descdeny User:carol * read allow",
	"t1 topic literal descdeny User:carol * describe deny",
	"t1 group prefixed app- User:alice * read allow",
	"t1 group literal app-locked User:* * all deny",
	"t1 cluster literal kafka-cluster User:ops * alter allow",
	"t1 txn literal tx-1 User:alice * write allow",
	"t2 topic literal orders User:bob * all allow",
	"t2 topic literal * User:alice * all allow",
}

func TestAuthorize(t *testing.T) {
	cases := []struct {
		name     string
		extra    []string // bindings besides common
		noCommon bool
		everyone bool // AllowEveryoneIfNoACLFound
		req      string
		allowed  bool
		reason   string // substring of Decision.Reason, if set
	}{
		{name: "literal allow", req: "t1 User:alice 10.0.0.1 read topic orders", allowed: true, reason: "ALLOW User:alice"},
		{name: "other operation", req: "t1 User:alice 10.0.0.1 write topic orders", reason: reasonNoAllow},
		{name: "other principal", req: "t1 User:bob 10.0.0.1 read topic orders", reason: reasonNoAllow},
		{name: "other name", req: "t1 User:alice 10.0.0.1 read topic orders2"},
		{name: "literal is not a prefix", req: "t1 User:alice 10.0.0.1 read topic order"},
		{name: "deny all refuses read", req: "t1 User:mallory 10.0.0.1 read topic orders", reason: "DENY User:mallory"},
		{name: "deny all refuses describe", req: "t1 User:mallory 10.0.0.1 describe topic orders"},
		{name: "prefixed allow", req: "t1 User:alice 10.0.0.1 write topic logs-app", allowed: true},
		{name: "prefixed allows the prefix itself", req: "t1 User:alice 10.0.0.1 write topic logs-", allowed: true},
		{name: "prefixed needs the whole prefix", req: "t1 User:alice 10.0.0.1 write topic logs"},
		{name: "literal deny beats prefixed allow", req: "t1 User:alice 10.0.0.1 write topic logs-secret",
			reason: "DENY User:alice from * to WRITE TOPIC LITERAL \"logs-secret\""},
		{name: "deny of one name leaves its neighbours", req: "t1 User:alice 10.0.0.1 write topic logs-secret2", allowed: true},
		{name: "wildcard name", req: "t1 User:auditor 10.0.0.1 describe topic anything", allowed: true},
		{name: "wildcard name covers a literal name too", req: "t1 User:auditor 10.0.0.1 describe topic orders", allowed: true},
		{name: "wildcard name but not read", req: "t1 User:auditor 10.0.0.1 read topic anything"},
		{name: "wildcard principal", req: "t1 User:zed 10.0.0.7 read topic payments", allowed: true},
		{name: "deny on one host", req: "t1 User:bob 10.0.0.9 read topic payments", reason: "DENY User:bob from 10.0.0.9"},
		{name: "deny host leaves other hosts", req: "t1 User:bob 10.0.0.8 read topic payments", allowed: true},
		{name: "allow on one host", req: "t1 User:carol 10.0.0.1 write topic metrics", allowed: true},
		{name: "allow on one host, other host", req: "t1 User:carol 10.0.0.2 write topic metrics"},
		{name: "write implies describe", req: "t1 User:carol 10.0.0.1 describe topic metrics", allowed: true},
		{name: "read implies describe", req: "t1 User:alice 10.0.0.1 describe topic orders", allowed: true},
		{name: "delete implies describe", req: "t1 User:carol 10.0.0.1 describe topic deleting", allowed: true},
		{name: "alter implies describe", req: "t1 User:carol 10.0.0.1 describe topic altering", allowed: true},
		{name: "create does not imply describe", req: "t1 User:carol 10.0.0.1 describe topic creating"},
		{name: "alter-configs implies describe-configs", req: "t1 User:carol 10.0.0.1 describe-configs topic configs", allowed: true},
		{name: "alter-configs does not imply describe", req: "t1 User:carol 10.0.0.1 describe topic configs"},
		{name: "describe does not imply read", req: "t1 User:auditor 10.0.0.1 read topic orders"},
		{name: "deny read does not refuse describe", req: "t1 User:carol 10.0.0.1 describe topic readdeny", allowed: true},
		{name: "deny describe beats implied describe", req: "t1 User:carol 10.0.0.1 describe topic descdeny"},
		{name: "deny describe leaves read", req: "t1 User:carol 10.0.0.1 read topic descdeny", allowed: true},
		{name: "all allows everything", extra: []string{"t1 topic literal x User:dan * all allow"},
			req: "t1 User:dan 10.0.0.1 alter-configs topic x", allowed: true},
		{name: "group prefixed", req: "t1 User:alice 10.0.0.1 read group app-1", allowed: true},
		{name: "group deny for everyone", req: "t1 User:alice 10.0.0.1 read group app-locked", reason: "DENY User:*"},
		{name: "group is not a topic", req: "t1 User:alice 10.0.0.1 read topic app-1"},
		{name: "topic is not a group", req: "t1 User:alice 10.0.0.1 read group orders"},
		{name: "cluster alter", req: "t1 User:ops 10.0.0.1 alter cluster kafka-cluster", allowed: true},
		{name: "cluster alter implies describe", req: "t1 User:ops 10.0.0.1 describe cluster kafka-cluster", allowed: true},
		{name: "cluster create", req: "t1 User:ops 10.0.0.1 create cluster kafka-cluster"},
		{name: "transactional id", req: "t1 User:alice 10.0.0.1 write txn tx-1", allowed: true},
		{name: "transactional id describe", req: "t1 User:alice 10.0.0.1 describe txn tx-1", allowed: true},
		{name: "transactional id other", req: "t1 User:alice 10.0.0.1 write txn tx-2"},

		// Tenant isolation.
		{name: "other tenant's allow", req: "t2 User:alice 10.0.0.1 read topic orders", allowed: true},
		{name: "t2 allow does not reach t1", req: "t1 User:bob 10.0.0.1 write topic orders"},
		{name: "t1 deny does not reach t2", req: "t2 User:mallory 10.0.0.1 read topic orders", reason: reasonNoAllow},
		{name: "t1 cluster admin is not t2's", req: "t2 User:ops 10.0.0.1 alter cluster kafka-cluster"},
		{name: "unknown tenant", req: "t3 User:alice 10.0.0.1 read topic orders"},
		{name: "empty tenant", req: "- User:alice 10.0.0.1 read topic orders"},

		// Super users.
		{name: "super user", req: "t1 User:root 10.0.0.1 write topic anything", allowed: true, reason: reasonSuperUser},
		{name: "super user beats deny", extra: []string{"t1 topic literal * User:root * all deny"},
			req: "t1 User:root 10.0.0.1 delete topic orders", allowed: true},
		{name: "super user in any tenant", req: "t9 User:root 10.0.0.1 alter cluster kafka-cluster", allowed: true},

		// allow.everyone.if.no.acl.found.
		{name: "no acl, everyone off", req: "t1 User:zed 10.0.0.1 read group fresh"},
		{name: "no acl, everyone on", everyone: true, req: "t1 User:zed 10.0.0.1 read group fresh", allowed: true,
			reason: reasonNoACL},
		{name: "no acl at all, everyone on", noCommon: true, everyone: true,
			req: "t1 User:zed 10.0.0.1 alter cluster kafka-cluster", allowed: true},
		{name: "someone else's acl ends everyone", everyone: true, req: "t1 User:zed 10.0.0.1 read topic orders",
			reason: reasonNoAllow},
		{name: "acl for another op ends everyone", everyone: true, req: "t1 User:alice 10.0.0.1 write topic orders"},
		{name: "prefixed acl ends everyone", everyone: true, req: "t1 User:zed 10.0.0.1 read topic logs-x"},
		{name: "wildcard acl ends everyone", everyone: true, req: "t2 User:zed 10.0.0.1 read topic fresh"},
		{name: "everyone on, other tenant's acl does not count", everyone: true,
			extra: []string{"t2 topic literal fresh User:bob * read allow"},
			req:   "t1 User:zed 10.0.0.1 read group fresh", allowed: true},
		{name: "everyone on, deny still wins", everyone: true, req: "t1 User:mallory 10.0.0.1 read topic orders"},

		// IdempotentWrite (Kafka 2.8+).
		{name: "idempotent write implied by topic write", req: "t1 User:alice 10.0.0.1 idempotent-write cluster kafka-cluster",
			allowed: true, reason: reasonIdempotent},
		{name: "idempotent write: topic write on another host", req: "t1 User:carol 10.0.0.2 idempotent-write cluster kafka-cluster"},
		{name: "idempotent write: host of the topic write", req: "t1 User:carol 10.0.0.1 idempotent-write cluster kafka-cluster",
			allowed: true},
		{name: "idempotent write: read is not enough", req: "t1 User:auditor 10.0.0.1 idempotent-write cluster kafka-cluster"},
		{name: "idempotent write: other tenant's write", req: "t2 User:carol 10.0.0.1 idempotent-write cluster kafka-cluster"},
		{name: "idempotent write: explicit deny wins",
			extra: []string{"t1 cluster literal kafka-cluster User:alice * idempotent-write deny"},
			req:   "t1 User:alice 10.0.0.1 idempotent-write cluster kafka-cluster"},
		{name: "idempotent write: explicit allow", extra: []string{"t1 cluster literal kafka-cluster User:dan * idempotent-write allow"},
			req: "t1 User:dan 10.0.0.1 idempotent-write cluster kafka-cluster", allowed: true},
		{name: "idempotent write: only denied topics", noCommon: true, extra: []string{
			"t1 topic prefixed a User:dan * write allow", "t1 topic prefixed a User:dan * write deny"},
			req: "t1 User:dan 10.0.0.1 idempotent-write cluster kafka-cluster"},

		// Requests that cannot be decided.
		{name: "request op all", req: "t1 User:alice 10.0.0.1 all topic orders", reason: reasonInvalidPrefix},
		{name: "request op any", req: "t1 User:alice 10.0.0.1 any topic orders"},
		{name: "request resource any", req: "t1 User:alice 10.0.0.1 read any orders"},
		{name: "request without principal type", extra: []string{"t1 topic literal * User:* * all allow"},
			req: "t1 alice 10.0.0.1 read topic orders2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var specs []string
			if !c.noCommon {
				specs = append(specs, common...)
			}
			specs = append(specs, c.extra...)
			bs := make([]Binding, len(specs))
			for i, s := range specs {
				bs[i] = b(t, s)
			}
			a, err := NewAuthorizer(Config{SuperUsers: []string{"User:root"}, AllowEveryoneIfNoACLFound: c.everyone})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Replace(bs); err != nil {
				t.Fatal(err)
			}
			req := r(t, c.req)
			d := a.Authorize(req)
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("Authorize(%+v) = %+v, want allowed %v with reason containing %q", req, d, c.allowed, c.reason)
			}
			if d.Reason == "" {
				t.Fatal("empty reason")
			}
			if ref := naiveAuthorize(bs, []string{"User:root"}, c.everyone, req); ref != c.allowed {
				t.Fatalf("the naive reference says %v", ref)
			}
		})
	}
}

func TestAuthorizeAny(t *testing.T) {
	cases := []struct {
		name     string
		bindings []string
		everyone bool
		req      string // NAME is ignored
		want     bool
	}{
		{name: "nothing", req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "nothing, everyone", everyone: true, req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "one literal", bindings: []string{"t1 topic literal x User:a * read allow"},
			req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "other tenant", bindings: []string{"t2 topic literal x User:a * read allow"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "other type", bindings: []string{"t1 group literal x User:a * read allow"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "implied describe", bindings: []string{"t1 group prefixed x User:a * read allow"},
			req: "t1 User:a 1.1.1.1 describe group -", want: true},
		{name: "literal denied literally", bindings: []string{
			"t1 topic literal x User:a * read allow", "t1 topic literal x User:* * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "literal denied by prefix", bindings: []string{
			"t1 topic literal xy User:a * read allow", "t1 topic prefixed x User:a * all deny"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "prefix denied by shorter prefix", bindings: []string{
			"t1 topic prefixed xy User:a * read allow", "t1 topic prefixed x User:a * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "prefix partly denied by longer prefix", bindings: []string{
			"t1 topic prefixed x User:a * read allow", "t1 topic prefixed xy User:a * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "deny wildcard", bindings: []string{
			"t1 topic prefixed x User:a * read allow", "t1 topic literal * User:a * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "deny on another host", bindings: []string{
			"t1 topic literal x User:a * read allow", "t1 topic literal * User:a 2.2.2.2 read deny"},
			req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "allow wildcard, one deny", bindings: []string{
			"t1 topic literal * User:a * read allow", "t1 topic literal x User:a * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "everyone with wildcard binding", everyone: true, bindings: []string{"t1 topic literal * User:b * read allow"},
			req: "t1 User:a 1.1.1.1 read topic -"},
		{name: "everyone with literal binding", everyone: true, bindings: []string{"t1 topic literal x User:a * read deny"},
			req: "t1 User:a 1.1.1.1 read topic -", want: true},
		{name: "cluster", bindings: []string{"t1 cluster literal kafka-cluster User:a * alter allow"},
			req: "t1 User:a 1.1.1.1 describe cluster -", want: true},
		{name: "super user", req: "t1 User:root 1.1.1.1 delete topic -", want: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs := make([]Binding, len(c.bindings))
			for i, s := range c.bindings {
				bs[i] = b(t, s)
			}
			a, err := NewAuthorizer(Config{SuperUsers: []string{"User:root"}, AllowEveryoneIfNoACLFound: c.everyone})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Replace(bs); err != nil {
				t.Fatal(err)
			}
			q := r(t, c.req)
			if got := a.AuthorizeAny(q.Tenant, q.Principal, q.Host, q.Operation, q.ResourceType); got != c.want {
				t.Fatalf("AuthorizeAny = %v, want %v", got, c.want)
			}
		})
	}
}

func TestReplaceKeepsSetOnError(t *testing.T) {
	a, err := NewAuthorizer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	good := []Binding{b(t, "t1 topic literal x User:a * read allow"), b(t, "t1 topic literal x User:a * read allow")}
	if err := a.Replace(good); err != nil {
		t.Fatal(err)
	}
	if n := a.Set().Len(); n != 1 {
		t.Fatalf("duplicates kept: Len = %d", n)
	}
	req := r(t, "t1 User:a 1.1.1.1 read topic x")
	if !a.Authorize(req).Allowed {
		t.Fatal("not allowed")
	}
	bad := append(good, Binding{Tenant: "t1", ResourceType: ResourceTopic}, Binding{})
	err = a.Replace(bad)
	if !errors.Is(err, ErrInvalidBinding) || strings.Count(err.Error(), "invalid binding") != 2 {
		t.Fatalf("Replace(bad) = %v; want both invalid bindings named", err)
	}
	if !a.Authorize(req).Allowed || a.Set().Len() != 1 {
		t.Fatal("a failed Replace changed the current set")
	}
	if err := a.Replace(nil); err != nil || a.Authorize(req).Allowed {
		t.Fatalf("Replace(nil) = %v, still allowed %v", err, a.Authorize(req).Allowed)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, su := range [][]string{{"admin"}, {"User:"}, {AnyPrincipal}} {
		if _, err := NewAuthorizer(Config{SuperUsers: su}); err == nil {
			t.Errorf("super users %q accepted", su)
		}
	}
	a, err := NewAuthorizer(Config{SuperUsers: []string{"User:admin"}})
	if err != nil || !a.IsSuperUser("User:admin") || a.IsSuperUser("User:alice") {
		t.Fatalf("NewAuthorizer: %v", err)
	}
}

func TestCanManage(t *testing.T) {
	cases := []struct {
		caller string
		super  bool
		target string
		want   bool
	}{
		{"t1", false, "t1", true},
		{"t1", false, "t2", false},
		{"", false, "", false},
		{"t1", false, "", false},
		{"", false, "t1", false},
		{"system", true, "t1", true},
		{"system", true, "system", true},
		{"system", true, "", false},
	}
	for _, c := range cases {
		if got := CanManage(c.caller, c.super, c.target); got != c.want {
			t.Errorf("CanManage(%q, %v, %q) = %v, want %v", c.caller, c.super, c.target, got, c.want)
		}
	}
}

// TestReplaceConcurrent swaps sets while readers decide (run with -race):
// every decision is the one of a whole set, never of a half-built one.
func TestReplaceConcurrent(t *testing.T) {
	a, err := NewAuthorizer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	allow := []Binding{b(t, "t1 topic prefixed o User:a * read allow")}
	deny := append(slices.Clone(allow), b(t, "t1 topic literal orders User:* * read deny"))
	req := r(t, "t1 User:a 10.0.0.1 read topic orders")
	if err := a.Replace(deny); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 {
			if err := a.Replace([][]Binding{allow, deny}[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		d := a.Authorize(req)
		if d.Allowed != strings.Contains(d.Reason, "ALLOW") || d.Reason == reasonNoAllow {
			t.Fatalf("decision %+v belongs to neither set", d)
		}
	}
}
