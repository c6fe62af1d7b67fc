package acl

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchBindings makes n bindings over ten tenants, shaped like a shared
// cluster: mostly per-topic grants to one service principal each, team
// prefixes, consumer groups, transactional ids, a few DENYs, a few
// wildcards, and the cluster grants of each tenant's admin.
func benchBindings(n int) []Binding {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([]Binding, 0, n)
	for i := 0; len(out) < n; i++ {
		tenant := fmt.Sprintf("tenant-%d", i%10)
		user := fmt.Sprintf("User:svc-%d", rng.IntN(200))
		b := Binding{Tenant: tenant, Principal: user, Host: AnyHost, Permission: PermissionAllow,
			ResourceType: ResourceTopic, PatternType: PatternLiteral}
		switch k := i % 20; {
		case k < 12:
			b.ResourceName = fmt.Sprintf("topic-%d", rng.IntN(2000))
			b.Operation = []Operation{OpRead, OpWrite, OpDescribe}[rng.IntN(3)]
		case k < 15:
			b.PatternType, b.ResourceName = PatternPrefixed, fmt.Sprintf("team-%d.", rng.IntN(100))
			b.Operation = OpAll
		case k < 17:
			b.ResourceType, b.PatternType = ResourceGroup, PatternPrefixed
			b.ResourceName, b.Operation = fmt.Sprintf("app-%d-", rng.IntN(300)), OpRead
		case k == 17:
			b.ResourceType, b.ResourceName, b.Operation = ResourceTransactionalID, fmt.Sprintf("tx-%d", rng.IntN(300)), OpWrite
		case k == 18:
			b.ResourceName, b.Operation, b.Permission = fmt.Sprintf("topic-%d", rng.IntN(2000)), OpWrite, PermissionDeny
			b.Host = fmt.Sprintf("10.0.%d.%d", rng.IntN(4), rng.IntN(250))
		default:
			if rng.IntN(10) == 0 {
				b.ResourceName, b.Principal, b.Operation = AnyName, "User:auditor", OpDescribe
			} else {
				b.ResourceType, b.ResourceName, b.Operation = ResourceCluster, ClusterName, OpAlter
				b.Principal = "User:admin-" + tenant
			}
		}
		out = append(out, b)
	}
	return out
}

func benchRequests(n int) []Request {
	rng := rand.New(rand.NewPCG(8, 8))
	reqs := make([]Request, n)
	for i := range reqs {
		q := Request{Tenant: fmt.Sprintf("tenant-%d", rng.IntN(10)), Principal: fmt.Sprintf("User:svc-%d", rng.IntN(200)),
			Host: fmt.Sprintf("10.0.%d.%d", rng.IntN(4), rng.IntN(250)), ResourceType: ResourceTopic}
		switch rng.IntN(5) {
		case 0, 1:
			q.ResourceName, q.Operation = fmt.Sprintf("topic-%d", rng.IntN(2000)), []Operation{OpRead, OpWrite, OpDescribe}[rng.IntN(3)]
		case 2:
			q.ResourceName, q.Operation = fmt.Sprintf("team-%d.orders.v%d", rng.IntN(100), rng.IntN(5)), OpWrite
		case 3:
			q.ResourceType, q.ResourceName, q.Operation = ResourceGroup, fmt.Sprintf("app-%d-consumer", rng.IntN(300)), OpRead
		default:
			q.ResourceType, q.ResourceName, q.Operation = ResourceCluster, ClusterName, OpIdempotentWrite
		}
		reqs[i] = q
	}
	return reqs
}

// BenchmarkAuthorize decides a mix of requests (topics by literal and
// prefixed name, groups, IdempotentWrite on the cluster) against 10,000 bindings.
func BenchmarkAuthorize(b *testing.B) {
	a, err := NewAuthorizer(Config{SuperUsers: []string{"User:admin"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Replace(benchBindings(10_000)); err != nil {
		b.Fatal(err)
	}
	reqs := benchRequests(4096)
	allowed := 0
	for _, q := range reqs {
		if a.Authorize(q).Allowed {
			allowed++
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.Authorize(reqs[i&(len(reqs)-1)])
	}
	b.ReportMetric(float64(allowed)/float64(len(reqs)), "allowed-share")
}

// BenchmarkAuthorizeAny is the by-type check (listing filters) on the same bindings.
func BenchmarkAuthorizeAny(b *testing.B) {
	a, err := NewAuthorizer(Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Replace(benchBindings(10_000)); err != nil {
		b.Fatal(err)
	}
	reqs := benchRequests(4096)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q := reqs[i&(len(reqs)-1)]
		a.AuthorizeAny(q.Tenant, q.Principal, q.Host, OpRead, ResourceTopic)
	}
}

// BenchmarkNewSet is the cost of a watch event: rebuilding the Set of 10,000 bindings.
func BenchmarkNewSet(b *testing.B) {
	bs := benchBindings(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSet(bs); err != nil {
			b.Fatal(err)
		}
	}
}
