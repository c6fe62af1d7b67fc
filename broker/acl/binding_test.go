package acl

import (
	"errors"
	"slices"
	"testing"
)

// topicACL is a valid binding on a literal topic of tenant "t1" for the tests to vary.
func topicACL(name string, op Operation, perm Permission) Binding {
	return Binding{Tenant: "t1", ResourceType: ResourceTopic, ResourceName: name, PatternType: PatternLiteral,
		Principal: "User:alice", Host: AnyHost, Operation: op, Permission: perm}
}

func TestBindingValidate(t *testing.T) {
	ok := topicACL("orders", OpRead, PermissionAllow)
	with := func(f func(*Binding)) Binding { b := ok; f(&b); return b }
	cases := []struct {
		name  string
		b     Binding
		valid bool
	}{
		{"literal topic", ok, true},
		{"wildcard name", with(func(b *Binding) { b.ResourceName = AnyName }), true},
		{"prefixed", with(func(b *Binding) { b.PatternType = PatternPrefixed; b.ResourceName = "ord" }), true},
		{"wildcard principal", with(func(b *Binding) { b.Principal = AnyPrincipal }), true},
		{"ipv4 host", with(func(b *Binding) { b.Host = "10.0.0.1" }), true},
		{"ipv6 host", with(func(b *Binding) { b.Host = "2001:db8::1" }), true},
		{"deny all", with(func(b *Binding) { b.Operation = OpAll; b.Permission = PermissionDeny }), true},
		{"cluster", with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.Operation = ResourceCluster, ClusterName, OpIdempotentWrite
		}), true},
		{"group read", with(func(b *Binding) { b.ResourceType = ResourceGroup }), true},
		{"txn id write", with(func(b *Binding) { b.ResourceType, b.Operation = ResourceTransactionalID, OpWrite }), true},

		{"no tenant", with(func(b *Binding) { b.Tenant = "" }), false},
		{"resource any", with(func(b *Binding) { b.ResourceType = ResourceAny }), false},
		{"resource unknown", with(func(b *Binding) { b.ResourceType = ResourceUnknown }), false},
		{"delegation token", with(func(b *Binding) { b.ResourceType = 6 }), false},
		{"pattern match", with(func(b *Binding) { b.PatternType = PatternMatch }), false},
		{"pattern any", with(func(b *Binding) { b.PatternType = PatternAny }), false},
		{"empty name", with(func(b *Binding) { b.ResourceName = "" }), false},
		{"prefixed star", with(func(b *Binding) { b.PatternType = PatternPrefixed; b.ResourceName = AnyName }), false},
		{"cluster other name", with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.Operation = ResourceCluster, "c", OpAlter
		}), false},
		{"cluster prefixed", with(func(b *Binding) {
			b.ResourceType, b.ResourceName, b.PatternType, b.Operation = ResourceCluster, ClusterName, PatternPrefixed, OpAlter
		}), false},
		{"op any", with(func(b *Binding) { b.Operation = OpAny }), false},
		{"op unknown", with(func(b *Binding) { b.Operation = OpUnknown }), false},
		{"op 13", with(func(b *Binding) { b.Operation = 13 }), false},
		{"unsupported op", with(func(b *Binding) { b.Operation = OpIdempotentWrite }), false},
		{"permission any", with(func(b *Binding) { b.Permission = PermissionAny }), false},
		{"permission unknown", with(func(b *Binding) { b.Permission = PermissionUnknown }), false},
		{"principal without type", with(func(b *Binding) { b.Principal = "alice" }), false},
		{"principal empty name", with(func(b *Binding) { b.Principal = "User:" }), false},
		{"principal other type", with(func(b *Binding) { b.Principal = "Group:x" }), false},
		{"host name", with(func(b *Binding) { b.Host = "example.com" }), false},
		{"host empty", with(func(b *Binding) { b.Host = "" }), false},
		{"host mapped", with(func(b *Binding) { b.Host = "::ffff:10.0.0.1" }), false},
		{"host zone", with(func(b *Binding) { b.Host = "fe80::1%eth0" }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.b.Validate()
			if (err == nil) != c.valid {
				t.Fatalf("Validate(%s) = %v, want valid %v", c.b, err, c.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidBinding) {
				t.Fatalf("error %v does not wrap ErrInvalidBinding", err)
			}
		})
	}
}

func TestCanonicalHost(t *testing.T) {
	cases := map[string]string{
		"*":                         "*",
		"10.0.0.1":                  "10.0.0.1",
		"::ffff:10.0.0.1":           "10.0.0.1",
		"2001:DB8:0:0:0:0:0:1":      "2001:db8::1",
		"example.com":               "",
		"":                          "",
		"10.0.0.1:9092":             "",
		"fe80::1%eth0":              "",
		"0000:0000:0000::0000:0001": "::1",
	}
	for in, want := range cases {
		got, err := CanonicalHost(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	lit := topicACL("orders", OpRead, PermissionAllow)
	star := topicACL(AnyName, OpWrite, PermissionDeny)
	pre := topicACL("ord", OpRead, PermissionAllow)
	pre.PatternType = PatternPrefixed
	other := topicACL("payments", OpRead, PermissionAllow)
	grp := lit
	grp.ResourceType = ResourceGroup
	bob := lit
	bob.Principal, bob.Host = "User:bob", "10.0.0.1"
	anyone := lit
	anyone.Principal = AnyPrincipal
	t2 := lit
	t2.Tenant = "t2"
	all := []Binding{lit, star, pre, other, grp, bob, anyone, t2}
	names := map[*Binding]string{}
	for i := range all {
		names[&all[i]] = []string{"lit", "star", "pre", "other", "grp", "bob", "anyone", "t2"}[i]
	}
	anyF := Filter{Tenant: "t1", ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	with := func(f func(*Filter)) Filter { x := anyF; f(&x); return x }
	cases := []struct {
		name string
		f    Filter
		want []string
	}{
		{"everything of t1", anyF, []string{"lit", "star", "pre", "other", "grp", "bob", "anyone"}},
		{"every tenant", with(func(f *Filter) { f.Tenant, f.AnyTenant = "", true }),
			[]string{"lit", "star", "pre", "other", "grp", "bob", "anyone", "t2"}},
		{"other tenant", with(func(f *Filter) { f.Tenant = "t2" }), []string{"t2"}},
		{"unknown tenant", with(func(f *Filter) { f.Tenant = "t3" }), nil},
		{"groups", with(func(f *Filter) { f.ResourceType = ResourceGroup }), []string{"grp"}},
		{"any pattern, exact name", with(func(f *Filter) { f.ResourceType, f.ResourceName = ResourceTopic, "orders" }),
			[]string{"lit", "bob", "anyone"}},
		{"any pattern, name ord", with(func(f *Filter) { f.ResourceName = "ord" }), []string{"pre"}},
		{"any pattern, name star is literal", with(func(f *Filter) { f.ResourceName = AnyName }), []string{"star"}},
		{"literal only", with(func(f *Filter) { f.ResourceType, f.PatternType = ResourceTopic, PatternLiteral }),
			[]string{"lit", "star", "other", "bob", "anyone"}},
		{"prefixed only", with(func(f *Filter) { f.PatternType = PatternPrefixed }), []string{"pre"}},
		{"literal named ord", with(func(f *Filter) { f.PatternType, f.ResourceName = PatternLiteral, "ord" }), nil},
		{"match orders", with(func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternMatch, "orders"
		}), []string{"lit", "star", "pre", "bob", "anyone"}},
		{"match ordinal", with(func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternMatch, "ordinal"
		}), []string{"star", "pre"}},
		{"match or", with(func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternMatch, "or"
		}), []string{"star"}},
		{"match without name", with(func(f *Filter) { f.ResourceType, f.PatternType = ResourceTopic, PatternMatch }),
			[]string{"lit", "star", "pre", "other", "bob", "anyone"}},
		{"principal exact", with(func(f *Filter) { f.Principal = "User:bob" }), []string{"bob"}},
		{"principal wildcard is exact too", with(func(f *Filter) { f.Principal = AnyPrincipal }), []string{"anyone"}},
		{"host", with(func(f *Filter) { f.Host = "10.0.0.1" }), []string{"bob"}},
		{"operation", with(func(f *Filter) { f.Operation = OpWrite }), []string{"star"}},
		{"deny", with(func(f *Filter) { f.Permission = PermissionDeny }), []string{"star"}},
		{"allow read of orders by alice", with(func(f *Filter) {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternLiteral, "orders"
			f.Principal, f.Host, f.Operation, f.Permission = "User:alice", AnyHost, OpRead, PermissionAllow
		}), []string{"lit"}},
	}
	set, err := NewSet(all)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.f.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var got []string
			for i := range all {
				if c.f.Matches(all[i]) {
					got = append(got, names[&all[i]])
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("matched %v, want %v", got, c.want)
			}
			if n := len(set.Matching(c.f)); n != len(c.want) {
				t.Fatalf("Set.Matching found %d, want %d", n, len(c.want))
			}
		})
	}
}

func TestFilterValidate(t *testing.T) {
	good := Filter{Tenant: "t1", ResourceType: ResourceAny, PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*Filter){
		"no tenant":        func(f *Filter) { f.Tenant = "" },
		"resource unknown": func(f *Filter) { f.ResourceType = ResourceUnknown },
		"pattern unknown":  func(f *Filter) { f.PatternType = PatternUnknown },
		"op unknown":       func(f *Filter) { f.Operation = OpUnknown },
		"perm unknown":     func(f *Filter) { f.Permission = PermissionUnknown },
		"resource user":    func(f *Filter) { f.ResourceType = 7 },
	} {
		bad := good
		f(&bad)
		if err := bad.Validate(); !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}
