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
// Who may manage (the authorise rules, authzManageACLs and
// authzManageUsers):
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
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
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

// authzManageACLs: op (ALTER or DESCRIBE) on the caller's tenant's
// cluster, or the tenant-admin role.
func authzManageACLs(op acl.Operation) authzRule {
	return func(c *authzCheck, req *request) authzResult {
		if c.b.withRole(c.id).IsTenantAdmin() || c.cluster(op) {
			return authzResult{}
		}
		msg := fmt.Sprintf("not authorized: %s on the cluster of tenant %q is needed to manage ACLs", op, c.id.Principal.Tenant)
		return authzResult{refused: refuseAdmin(req, kerr.ClusterAuthorizationFailed.Code, msg)}
	}
}

// authzManageUsers: the tenant-admin or super role.
func authzManageUsers(c *authzCheck, req *request) authzResult {
	if c.b.withRole(c.id).IsTenantAdmin() {
		return authzResult{}
	}
	c.b.Logger.Debug().Str("principal", c.id.Principal.String()).Str("tenant", c.id.Principal.Tenant).
		Str("api", apiName(req.key)).Msg("refused: not a tenant admin")
	msg := fmt.Sprintf("not authorized: managing SCRAM credentials needs the tenant-admin role in tenant %q", c.id.Principal.Tenant)
	return authzResult{refused: refuseAdmin(req, kerr.ClusterAuthorizationFailed.Code, msg)}
}

// refuseAdmin answers a whole administrative request with code: every
// creation, filter and user gets it, as Kafka does.
func refuseAdmin(req *request, code int16, msg string) kmsg.Response {
	resp := newResponse(req)
	m := kmsg.StringPtr(msg)
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for range req.body.(*kmsg.CreateACLsRequest).Creations {
			r.Results = append(r.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: m})
		}
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.DeleteACLsResponse:
		for range req.body.(*kmsg.DeleteACLsRequest).Filters {
			r.Results = append(r.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: m})
		}
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, u := range alteredUsers(req.body.(*kmsg.AlterUserSCRAMCredentialsRequest)) {
			r.Results = append(r.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: u, ErrorCode: code, ErrorMessage: m})
		}
	}
	return resp
}

// Errors of the administrative APIs that name no store or acl error.
var (
	errSecurityDisabled = errors.New("ACLs are not enforced: the broker runs without security (start it with --security)")
	errUnknownMechanism = errors.New("unknown SCRAM mechanism")
	errDuplicate        = errors.New("named twice in one request")
	errUnknownUser      = errors.New("no such user")
)

// adminErrorCodes maps the errors of the administrative APIs to Kafka's
// codes, first match wins; anything else is node.ErrorCode's.
var adminErrorCodes = []struct {
	err  error
	code int16
}{
	{errSecurityDisabled, kerr.SecurityDisabled.Code},
	{errUnknownMechanism, kerr.UnsupportedSaslMechanism.Code},
	{errDuplicate, kerr.DuplicateResource.Code},
	{errUnknownUser, kerr.ResourceNotFound.Code},
	{acl.ErrInvalidBinding, kerr.InvalidRequest.Code},
	{meta.ErrInvalidACL, kerr.InvalidRequest.Code},
	{auth.ErrInvalidCredential, kerr.UnacceptableCredential.Code},
	{meta.ErrInvalidCredential, kerr.UnacceptableCredential.Code},
	{meta.ErrInvalidName, kerr.InvalidRequest.Code},
	{meta.ErrNotFound, kerr.ResourceNotFound.Code},
}

// adminErrorCode is the Kafka code of an administrative API's error.
func adminErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	for _, m := range adminErrorCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return node.ErrorCode(err)
}

// adminError is the code and message of err for a result.
func adminError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return adminErrorCode(err), kmsg.StringPtr(err.Error())
}

// callerOf is the identity of a handler's request, with its role.
func (b *Server) callerOf(ctx context.Context) auth.Identity {
	id, _ := auth.IdentityFrom(ctx) // the pipeline always sets one
	return b.withRole(id)
}

// bindingOf converts one CreateAcls creation into a binding of tenant and
// validates it.
func bindingOf(tenant string, c *kmsg.CreateACLsRequestCreation) (acl.Binding, error) {
	b := acl.Binding{
		Tenant:       tenant,
		ResourceType: acl.ResourceType(c.ResourceType),
		ResourceName: c.ResourceName,
		PatternType:  acl.PatternType(c.ResourcePatternType),
		Principal:    c.Principal,
		Host:         c.Host,
		Operation:    acl.Operation(c.Operation),
		Permission:   acl.Permission(c.PermissionType),
	}
	if h, err := acl.CanonicalHost(c.Host); err == nil {
		b.Host = h // Validate refuses a host it cannot read
	}
	if err := b.Validate(); err != nil {
		return acl.Binding{}, err
	}
	return b, nil
}

// aclFilter is a DescribeAcls or DeleteAcls filter as the wire has it.
type aclFilter struct {
	resourceType    kmsg.ACLResourceType
	name            *string
	pattern         kmsg.ACLResourcePatternType
	principal, host *string
	operation       kmsg.ACLOperation
	permission      kmsg.ACLPermissionType
}

// filterOf converts a wire filter into an acl.Filter of tenant. none is
// true for a filter that can select no binding: Kafka's null matches any
// value and the empty string only itself, which no stored binding has.
func filterOf(tenant string, w aclFilter) (f acl.Filter, none bool, err error) {
	f = acl.Filter{
		Tenant:       tenant,
		ResourceType: acl.ResourceType(w.resourceType),
		PatternType:  acl.PatternType(w.pattern),
		Operation:    acl.Operation(w.operation),
		Permission:   acl.Permission(w.permission),
	}
	if err := f.Validate(); err != nil {
		return acl.Filter{}, false, err
	}
	for _, s := range []*string{w.name, w.principal, w.host} {
		if s != nil && *s == "" {
			none = true
		}
	}
	if w.name != nil {
		f.ResourceName = *w.name
	}
	if w.principal != nil {
		f.Principal = *w.principal
	}
	if w.host != nil {
		f.Host = *w.host
		if h, err := acl.CanonicalHost(f.Host); err == nil {
			f.Host = h // a host no binding can have stays as given and selects nothing
		}
	}
	return f, none, nil
}

func bindingOfMeta(a meta.ACL) acl.Binding {
	return acl.Binding{
		Tenant: a.Tenant, ResourceType: acl.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: acl.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission),
	}
}

func metaOfBinding(b acl.Binding) meta.ACL {
	return meta.ACL{
		Tenant: b.Tenant, ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName,
		PatternType: int8(b.PatternType), Principal: b.Principal, Host: b.Host,
		Operation: int8(b.Operation), Permission: int8(b.Permission),
	}
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
			err = errSecurityDisabled
		case !acl.CanManage(tenant, caller.IsSuper(), tenant):
			err = fmt.Errorf("%w: the caller belongs to no tenant", acl.ErrInvalidBinding)
		default:
			if bd, err = bindingOf(tenant, &r.Creations[i]); err == nil {
				err = b.foreignPrincipal(ctx, caller, bd)
			}
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = adminError(err)
			continue
		}
		store = append(store, metaOfBinding(bd))
		stored = append(stored, i)
	}
	if len(store) > 0 {
		if err := b.Store.CreateACLs(ctx, store); err != nil {
			for _, i := range stored {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = adminError(err)
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
		resp.ErrorCode, resp.ErrorMessage = adminError(errSecurityDisabled)
		return done(resp), nil
	}
	f, none, err := filterOf(caller.Principal.Tenant, aclFilter{
		resourceType: r.ResourceType, name: r.ResourceName, pattern: r.ResourcePatternType,
		principal: r.Principal, host: r.Host, operation: r.Operation, permission: r.PermissionType,
	})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminError(err)
		return done(resp), nil
	}
	if none || caller.Principal.Tenant == "" {
		return done(resp), nil
	}
	all, err := b.Store.ListACLs(ctx, caller.Principal.Tenant)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminError(err)
		return done(resp), nil
	}
	var matched []acl.Binding
	for _, a := range all {
		if bd := bindingOfMeta(a); f.Matches(bd) {
			matched = append(matched, bd)
		}
	}
	resp.Resources = describeResources(matched)
	return done(resp), nil
}

// describeResources groups bindings by resource pattern, in a stable order.
func describeResources(bs []acl.Binding) []kmsg.DescribeACLsResponseResource {
	slices.SortFunc(bs, func(x, y acl.Binding) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.PatternType, y.PatternType),
			strings.Compare(x.ResourceName, y.ResourceName), strings.Compare(x.Principal, y.Principal),
			strings.Compare(x.Host, y.Host), cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.Permission, y.Permission))
	})
	var out []kmsg.DescribeACLsResponseResource
	for _, bd := range bs {
		n := len(out)
		if n == 0 || out[n-1].ResourceType != kmsg.ACLResourceType(bd.ResourceType) ||
			out[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(bd.PatternType) || out[n-1].ResourceName != bd.ResourceName {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(bd.ResourceType), bd.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(bd.PatternType)
			out = append(out, res)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = bd.Principal, bd.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
		out[n-1].ACLs = append(out[n-1].ACLs, e)
	}
	return out
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
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = adminError(errSecurityDisabled)
			continue
		}
		f, none, err := filterOf(tenant, aclFilter{
			resourceType: w.ResourceType, name: w.ResourceName, pattern: w.ResourcePatternType,
			principal: w.Principal, host: w.Host, operation: w.Operation, permission: w.PermissionType,
		})
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = adminError(err)
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
		bd := bindingOfMeta(a)
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
			if bd := bindingOfMeta(a); f.Matches(bd) {
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, matchingACL(bd))
			}
		}
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = adminError(err)
		}
	}
	if len(deleted) > 0 {
		b.Logger.Info().Str("principal", caller.Principal.String()).Str("tenant", tenant).
			Int("bindings", len(deleted)).Msg("ACL bindings deleted")
	}
	return done(resp), nil
}

func matchingACL(bd acl.Binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName = kmsg.ACLResourceType(bd.ResourceType), bd.ResourceName
	m.ResourcePatternType = kmsg.ACLResourcePatternType(bd.PatternType)
	m.Principal, m.Host = bd.Principal, bd.Host
	m.Operation, m.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
	return m
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
