package acl

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveAuthorize is the reference the indexed Set is checked against: the
// rules of the package doc applied by looping over every binding, written
// without any of the Set's code.
func naiveAuthorize(bs []Binding, superUsers []string, everyone bool, req Request) bool {
	if slices.Contains(superUsers, req.Principal) {
		return true
	}
	if req.Operation < OpRead || req.Operation > OpIdempotentWrite ||
		req.ResourceType < ResourceTopic || req.ResourceType > ResourceTransactionalID ||
		!strings.HasPrefix(req.Principal, "User:") {
		return false
	}
	granting := map[Operation][]Operation{
		OpDescribe:        {OpDescribe, OpRead, OpWrite, OpDelete, OpAlter, OpAll},
		OpDescribeConfigs: {OpDescribeConfigs, OpAlterConfigs, OpAll},
	}[req.Operation]
	if granting == nil {
		granting = []Operation{req.Operation, OpAll}
	}
	named, denied, allowed := false, false, false
	for _, b := range bs {
		if b.Tenant != req.Tenant || b.ResourceType != req.ResourceType {
			continue
		}
		covers := (b.PatternType == PatternLiteral && (b.ResourceName == req.ResourceName || b.ResourceName == "*")) ||
			(b.PatternType == PatternPrefixed && strings.HasPrefix(req.ResourceName, b.ResourceName))
		if !covers {
			continue
		}
		named = true
		if (b.Principal != req.Principal && b.Principal != "User:*") || (b.Host != req.Host && b.Host != "*") {
			continue
		}
		if b.Permission == PermissionDeny && (b.Operation == req.Operation || b.Operation == OpAll) {
			denied = true
		}
		if b.Permission == PermissionAllow && slices.Contains(granting, b.Operation) {
			allowed = true
		}
	}
	switch {
	case denied:
		return false
	case allowed:
		return true
	case everyone && !named:
		return true
	case req.Operation == OpIdempotentWrite && req.ResourceType == ResourceCluster:
		return naiveAuthorizeAny(bs, superUsers, everyone, req.Tenant, req.Principal, req.Host, OpWrite, ResourceTopic)
	}
	return false
}

// naiveAuthorizeAny asks naiveAuthorize about every name that could be
// decided differently: each binding's name, each name one character under a
// binding's name ("~" never occurs in the generated names, so such a name is
// covered only by prefixes of the binding's name), and a name no binding of
// the generator can cover. Some name of a type is allowed exactly when one of
// these is.
func naiveAuthorizeAny(bs []Binding, superUsers []string, everyone bool, tenant, principal, host string,
	op Operation, rtype ResourceType) bool {
	req := Request{Tenant: tenant, Principal: principal, Host: host, Operation: op, ResourceType: rtype}
	if rtype == ResourceCluster {
		req.ResourceName = ClusterName
		return naiveAuthorize(bs, superUsers, everyone, req)
	}
	names := []string{"~"}
	for _, b := range bs {
		names = append(names, b.ResourceName, b.ResourceName+"~")
	}
	for _, n := range names {
		req.ResourceName = n
		if naiveAuthorize(bs, superUsers, everyone, req) {
			return true
		}
	}
	return false
}

// Small alphabets, so that generated bindings and requests collide often.
var (
	genTenants    = []string{"t1", "t2", "t3"}
	genNames      = []string{"o", "or", "ord", "orders", "orders-eu", "p", "pay", "*", "x"}
	genPrincipals = []string{"User:alice", "User:bob", "User:*", "User:root", "User:carol"}
	genHosts      = []string{"*", "10.0.0.1", "10.0.0.2"}
)

type byteSource struct{ data []byte }

func (s *byteSource) next(n int) int {
	if len(s.data) == 0 {
		return 0
	}
	v := int(s.data[0]) % n
	s.data = s.data[1:]
	return v
}

func genBinding(s *byteSource) Binding {
	rt := ResourceType(2 + s.next(4))
	ops := append([]Operation{OpAll}, supportedOps[rt]...)
	b := Binding{
		Tenant:       genTenants[s.next(2)],
		ResourceType: rt,
		PatternType:  PatternLiteral + PatternType(s.next(2)),
		ResourceName: genNames[s.next(len(genNames))],
		Principal:    genPrincipals[s.next(4)], // User:carol only asks: some requests have no binding of their own
		Host:         genHosts[s.next(len(genHosts))],
		Operation:    ops[s.next(len(ops))],
		Permission:   PermissionDeny + Permission(s.next(2)),
	}
	if rt == ResourceCluster {
		b.ResourceName, b.PatternType = ClusterName, PatternLiteral
	}
	if b.PatternType == PatternPrefixed && b.ResourceName == AnyName {
		b.PatternType = PatternLiteral
	}
	return b
}

func genRequest(s *byteSource) Request {
	req := Request{
		Tenant:       genTenants[s.next(len(genTenants))],
		Principal:    genPrincipals[s.next(len(genPrincipals))],
		Host:         genHosts[1+s.next(2)],
		Operation:    Operation(1 + s.next(12)), // includes Any and All, which are refused
		ResourceType: ResourceType(1 + s.next(5)),
		ResourceName: genNames[s.next(len(genNames))],
	}
	if req.ResourceType == ResourceCluster {
		req.ResourceName = ClusterName
	}
	return req
}

// checkAgainstReference builds bindings and requests from data and checks
// that the Authorizer and the naive reference agree on every request, for
// Authorize and AuthorizeAny.
func checkAgainstReference(t *testing.T, data []byte) {
	s := &byteSource{data: data}
	everyone := s.next(2) == 1
	bs := make([]Binding, s.next(24))
	for i := range bs {
		bs[i] = genBinding(s)
	}
	superUsers := []string{"User:root"}
	a, err := NewAuthorizer(Config{SuperUsers: superUsers, AllowEveryoneIfNoACLFound: everyone})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Replace(bs); err != nil {
		t.Fatalf("generated bindings refused: %v", err)
	}
	for len(s.data) > 0 {
		req := genRequest(s)
		d := a.Authorize(req)
		if want := naiveAuthorize(bs, superUsers, everyone, req); d.Allowed != want {
			t.Fatalf("Authorize(%+v) = %+v; reference says %v\neveryone=%v bindings:\n%s",
				req, d, want, everyone, bindingList(bs))
		}
		got := a.AuthorizeAny(req.Tenant, req.Principal, req.Host, req.Operation, req.ResourceType)
		want := naiveAuthorizeAny(bs, superUsers, everyone, req.Tenant, req.Principal, req.Host, req.Operation, req.ResourceType)
		if got != want {
			t.Fatalf("AuthorizeAny(%q, %q, %q, %s, %s) = %v; reference says %v\neveryone=%v bindings:\n%s",
				req.Tenant, req.Principal, req.Host, req.Operation, req.ResourceType, got, want, everyone, bindingList(bs))
		}
	}
}

func bindingList(bs []Binding) string {
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString("  " + b.String() + "\n")
	}
	return sb.String()
}

// FuzzAuthorize checks the indexed Set against the naive reference on
// generated bindings and requests.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 5, 0, 0, 1, 3, 0, 1, 0, 1, 0, 0, 0, 0, 0, 2, 0, 2, 0, 3})
	f.Add([]byte("allow everyone if no acl found, and a few bindings and requests"))
	rng := rand.New(rand.NewPCG(19, 19))
	for range 8 {
		seed := make([]byte, 64+rng.IntN(128))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(checkAgainstReference)
}

// TestAuthorizeAgreesWithReference runs the fuzz check on many seeded random
// inputs, so plain `go test` covers more than the fuzz corpus.
func TestAuthorizeAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		data := make([]byte, 16+rng.IntN(256))
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		checkAgainstReference(t, data)
	}
}
