package kafka

// CreateAcls (key 30), DescribeAcls (29) and DeleteAcls (31), v1-3 (v2+
// flexible; v0 is gone from Kafka 4 and has no pattern type), over the
// metadata store's ACL bindings; and the pieces the five administrative
// APIs share with api_user_scram.go: the caller's role, the authorise
// rules, the refusal of a whole request, and the edge's error codes.
//
// Tenancy: a binding belongs to the caller's tenant, always. Kafka's wire
// form has no field for a tenant, and a resource name or principal cannot
// carry one (they are the tenant-local names the authoriser compares), so a
// super user creates, lists and deletes the bindings of its own tenant
// here; it manages another tenant's with `sluicectl acl add|ls|rm --tenant T`
// (the HTTP admin API's /v1/acls). A super user's binding whose principal is
// a user of another tenant would never apply, so it is refused with a
// message that says so.
//
// Who may manage (the authorise rules, authz.ManageACLs and
// authz.ManageUsers):
//   - ACLs: Kafka's rule, ALTER on the cluster resource to create and delete,
//     DESCRIBE to list, in the caller's own tenant; the tenant-admin and
//     super roles stand for both. So a tenant's ordinary user granted ALTER
//     on its tenant's cluster manages that tenant's ACLs, as in Kafka.
//   - SCRAM credentials: the tenant-admin or super role only. An ACL never
//     grants it: changing another user's password takes over that user,
//     which no ACL of a tenant should be able to hand out (the HTTP admin API
//     has the same rule).
//
// The role comes from the identity the pipeline authenticated; while the
// pipeline sets none, the Authorizer supplies it when it is the broker's
// security Guard (identitySource).
//
// Invariant: every store call of these handlers is scoped to the caller's
// tenant (a Filter with Tenant set, never AnyTenant), except the SCRAM
// APIs of a super user, whose users are unique in the cluster.
// Invariant: each creation and each deletion filter has its own result, in
// request order, with Kafka's code and a message.

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka/authz"
	"github.com/sluice-mq/sluice/meta"
)

// identitySource is what the broker's security Guard adds to an
// Authorizer: a principal's stored tenant and role.
type identitySource interface {
	Identity(p auth.Principal) auth.Identity
}

// securitySwitch is implemented by an Authorizer that can be off (the
// Guard with security disabled).
type securitySwitch interface{ Enabled() bool }

// withRole returns id with its role: the pipeline's when it set one,
// otherwise the identity source's, provided it names the same principal.
func (b *Server) withRole(id auth.Identity) auth.Identity {
	if id.Role != auth.RoleUser {
		return id
	}
	src, ok := b.authorizer.(identitySource)
	if !ok {
		return id
	}
	if r := src.Identity(id.Principal); r.Principal == id.Principal {
		return r
	}
	return id
}

// aclsEnforced reports whether the authorise stage applies ACLs: not with
// AllowAll, nor with an Authorizer that is switched off. Kafka answers the
// ACL APIs SECURITY_DISABLED without an authoriser; so does this broker.
func (b *Server) aclsEnforced() bool {
	if _, ok := b.authorizer.(AllowAll); ok {
		return false
	}
	if s, ok := b.authorizer.(securitySwitch); ok {
		return s.Enabled()
	}
	return true
}

// callerOf is the identity of a handler's request, with its role.
func (b *Server) callerOf(ctx context.Context) auth.Identity {
	id, _ := auth.IdentityFrom(ctx) // the pipeline always sets one
	return b.withRole(id)
}

// foreignPrincipal refuses a super user's binding for a user of another
// tenant: it would be stored in the super user's tenant and never apply.
func (b *Server) foreignPrincipal(ctx context.Context, caller auth.Identity, bd acl.Binding) error {
	name, _ := strings.CutPrefix(bd.Principal, acl.PrincipalPrefix)
	if !caller.IsSuper() || bd.Principal == acl.AnyPrincipal {
		return nil
	}
	u, err := b.Store.GetUser(ctx, name)
	if err != nil || u.Tenant == caller.Principal.Tenant {
		return nil // not a known user: Kafka lets a binding name anyone
	}
	return fmt.Errorf("%w: user %q belongs to tenant %q and this binding would be stored in tenant %q, where it never applies; "+
		"bindings of another tenant are managed with `sluicectl acl add --tenant %s` (POST /v1/acls)",
		acl.ErrInvalidBinding, name, u.Tenant, caller.Principal.Tenant, u.Tenant)
}

func handleCreateACLs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.CreateACLsRequest)
	resp := newResponse(req).(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	caller := b.callerOf(ctx)
	tenant := caller.Principal.Tenant
	var store []meta.ACL
	var stored []int // indexes of Results the store call decides
	for i := range r.Creations {
		res := &resp.Results[i]
		*res = kmsg.NewCreateACLsResponseResult()
		var err error
		var bd acl.Binding
		switch {
		case !b.aclsEnforced():
			err = authz.ErrSecurityDisabled
		case !acl.CanManage(tenant, caller.IsSuper(), tenant):
			err = fmt.Errorf("%w: the caller belongs to no tenant", acl.ErrInvalidBinding)
		default:
			if bd, err = authz.BindingOf(tenant, &r.Creations[i]); err == nil {
				err = b.foreignPrincipal(ctx, caller, bd)
			}
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = authz.AdminError(err)
			continue
		}
		store = append(store, authz.MetaOfBinding(bd))
		stored = append(stored, i)
	}
	if len(store) > 0 {
		if err := b.Store.CreateACLs(ctx, store); err != nil {
			for _, i := range stored {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = authz.AdminError(err)
			}
		} else {
			b.Logger.Info().Str("principal", caller.Principal.String()).Str("tenant", tenant).
				Int("bindings", len(store)).Msg("ACL bindings created")
		}
	}
	return done(resp), nil
}

func handleDescribeACLs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeACLsRequest)
	resp := newResponse(req).(*kmsg.DescribeACLsResponse)
	caller := b.callerOf(ctx)
	if !b.aclsEnforced() {
		resp.ErrorCode, resp.ErrorMessage = authz.AdminError(authz.ErrSecurityDisabled)
		return done(resp), nil
	}
	f, none, err := authz.FilterOf(caller.Principal.Tenant, authz.ACLFilter{
		ResourceType: r.ResourceType, Name: r.ResourceName, Pattern: r.ResourcePatternType,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = authz.AdminError(err)
		return done(resp), nil
	}
	if none || caller.Principal.Tenant == "" {
		return done(resp), nil
	}
	all, err := b.Store.ListACLs(ctx, caller.Principal.Tenant)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = authz.AdminError(err)
		return done(resp), nil
	}
	var matched []acl.Binding
	for _, a := range all {
		if bd := authz.BindingOfMeta(a); f.Matches(bd) {
			matched = append(matched, bd)
		}
	}
	resp.Resources = authz.DescribeResources(matched)
	return done(resp), nil
}

func handleDeleteACLs(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DeleteACLsRequest)
	resp := newResponse(req).(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	caller := b.callerOf(ctx)
	tenant := caller.Principal.Tenant
	filters := make([]*acl.Filter, len(r.Filters)) // nil: answered already, or selects nothing
	some := false
	for i, w := range r.Filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		if !b.aclsEnforced() {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = authz.AdminError(authz.ErrSecurityDisabled)
			continue
		}
		f, none, err := authz.FilterOf(tenant, authz.ACLFilter{
			ResourceType: w.ResourceType, Name: w.ResourceName, Pattern: w.ResourcePatternType,
			Principal: w.Principal, Host: w.Host, Operation: w.Operation, Permission: w.PermissionType,
		})
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = authz.AdminError(err)
			continue
		}
		if !none && tenant != "" {
			filters[i], some = &f, true
		}
	}
	if !some {
		return done(resp), nil
	}
	deleted, err := b.Store.DeleteACLs(ctx, func(a meta.ACL) bool {
		bd := authz.BindingOfMeta(a)
		for _, f := range filters {
			if f != nil && f.Matches(bd) {
				return true
			}
		}
		return false
	})
	for i, f := range filters {
		if f == nil {
			continue
		}
		for _, a := range deleted {
			if bd := authz.BindingOfMeta(a); f.Matches(bd) {
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, authz.MatchingACL(bd))
			}
		}
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = authz.AdminError(err)
		}
	}
	if len(deleted) > 0 {
		b.Logger.Info().Str("principal", caller.Principal.String()).Str("tenant", tenant).
			Int("bindings", len(deleted)).Msg("ACL bindings deleted")
	}
	return done(resp), nil
}

// adminAPIs returns the dispatch entries of the ACL and SCRAM credential
// APIs. The ACL APIs start at v1 as in Kafka 4: v0 has no pattern type.
func adminAPIs() map[int16]api {
	return map[int16]api{
		29: {min: 1, max: 3, handle: handleDescribeACLs},
		30: {min: 1, max: 3, handle: handleCreateACLs},
		31: {min: 1, max: 3, handle: handleDeleteACLs},
		50: {min: 0, max: 0, handle: handleDescribeUserSCRAMCredentials},
		51: {min: 0, max: 0, handle: handleAlterUserSCRAMCredentials},
	}
}
