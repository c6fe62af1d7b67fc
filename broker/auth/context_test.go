package auth

import (
	"context"
	"testing"
)

func TestIdentityContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := PrincipalFrom(ctx); ok {
		t.Fatal("a bare context carries a principal")
	}
	if _, ok := IdentityFrom(ctx); ok {
		t.Fatal("a bare context carries an identity")
	}

	alice := Principal{Tenant: "acme", User: "alice"}
	got, ok := PrincipalFrom(WithPrincipal(ctx, alice))
	if !ok || got != alice {
		t.Fatalf("PrincipalFrom(WithPrincipal) = %v, %v", got, ok)
	}
	id, _ := IdentityFrom(WithPrincipal(ctx, alice))
	if id.Role != RoleUser || id.IsSuper() || id.IsTenantAdmin() {
		t.Fatalf("WithPrincipal gave role %q", id.Role)
	}

	for _, tc := range []struct {
		role         string
		super, admin bool
	}{
		{RoleUser, false, false},
		{RoleTenantAdmin, false, true},
		{RoleSuper, true, true},
	} {
		in := Identity{Principal: alice, Role: tc.role}
		out, ok := IdentityFrom(WithIdentity(ctx, in))
		if !ok || out != in {
			t.Fatalf("IdentityFrom(WithIdentity(%v)) = %v, %v", in, out, ok)
		}
		if out.IsSuper() != tc.super || out.IsTenantAdmin() != tc.admin {
			t.Errorf("role %q: IsSuper %v IsTenantAdmin %v", tc.role, out.IsSuper(), out.IsTenantAdmin())
		}
		if p, _ := PrincipalFrom(WithIdentity(ctx, in)); p != alice {
			t.Errorf("PrincipalFrom(WithIdentity) = %v", p)
		}
	}
}
