package secapi

// This file owns the ACL routes: add bindings, list them through a filter,
// delete them through a filter. Names are read with acl.Parse* (kafka-acls'
// spellings) and checked with acl.Binding.Validate before anything is
// stored; answers print Kafka's enum names.
//
// Invariant: every binding written or filter applied names a tenant the
// caller manages (acl.CanManage), or every tenant for a super user's
// filter without one.

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/meta"
)

// maxBindings bounds the bindings of one POST /v1/acls.
const maxBindings = 1000

// Binding is one ACL binding as the API reads and writes it.
type Binding struct {
	// Tenant defaults to the request's tenant, and that to the caller's.
	Tenant       string `json:"tenant,omitempty"`
	ResourceType string `json:"resource_type"`           // topic, group, cluster, transactional-id
	ResourceName string `json:"resource_name,omitempty"` // default "kafka-cluster" for the cluster
	PatternType  string `json:"pattern_type,omitempty"`  // literal (default) or prefixed
	Principal    string `json:"principal"`               // User:<name> or User:*
	Host         string `json:"host,omitempty"`          // an IP address or "*" (default)
	Operation    string `json:"operation"`
	Permission   string `json:"permission"` // allow or deny
}

// Filter selects bindings (acl.Filter): a field left out matches any value.
type Filter struct {
	ResourceType string `json:"resource_type,omitempty"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"` // any (default), literal, prefixed or match
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`
}

// CreateACLsRequest is the body of POST /v1/acls.
type CreateACLsRequest struct {
	Tenant   string    `json:"tenant,omitempty"`
	Bindings []Binding `json:"bindings"`
}

// DeleteACLsRequest is the body of POST /v1/acls:delete. Filter is
// required; {} selects every binding of the tenant.
type DeleteACLsRequest struct {
	Tenant string  `json:"tenant,omitempty"`
	Filter *Filter `json:"filter"`
}

// BindingList is the answer of GET /v1/acls and POST /v1/acls.
type BindingList struct {
	Bindings []Binding `json:"bindings"`
}

// DeletedBindings is the answer of POST /v1/acls:delete.
type DeletedBindings struct {
	Deleted []Binding `json:"deleted"`
}

func bindingOut(b acl.Binding) Binding {
	return Binding{Tenant: b.Tenant, ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName,
		PatternType: b.PatternType.String(), Principal: b.Principal, Host: b.Host,
		Operation: b.Operation.String(), Permission: b.Permission.String()}
}

func fromMeta(a meta.ACL) acl.Binding {
	return acl.Binding{Tenant: a.Tenant, ResourceType: acl.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: acl.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)}
}

func toMeta(b acl.Binding) meta.ACL {
	return meta.ACL{Tenant: b.Tenant, ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName,
		PatternType: int8(b.PatternType), Principal: b.Principal, Host: b.Host,
		Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

// parseBinding reads one binding of a request; field names the binding in
// messages ("bindings[2]").
func parseBinding(in Binding, field, tenant string) (acl.Binding, error) {
	bad := func(sub, format string, args ...any) error {
		return badRequest("%s.%s: %s", field, sub, fmt.Sprintf(format, args...))
	}
	if in.Tenant != "" {
		tenant = in.Tenant
	}
	if err := validTenant(tenant); err != nil {
		return acl.Binding{}, badRequest("%s.tenant: %s", field, err.Error())
	}
	b := acl.Binding{Tenant: tenant, ResourceName: in.ResourceName, Principal: in.Principal, Host: in.Host}
	var err error
	if in.ResourceType == "" {
		return b, bad("resource_type", "required (topic, group, cluster or transactional-id)")
	}
	if b.ResourceType, err = acl.ParseResourceType(in.ResourceType); err != nil {
		return b, bad("resource_type", "%q is not topic, group, cluster or transactional-id", in.ResourceType)
	}
	if b.ResourceName == "" && b.ResourceType == acl.ResourceCluster {
		b.ResourceName = acl.ClusterName
	}
	if b.ResourceName == "" {
		return b, bad("resource_name", "required (a name, a prefix with pattern_type prefixed, or * for every %s)",
			strings.ToLower(b.ResourceType.String()))
	}
	b.PatternType = acl.PatternLiteral
	if in.PatternType != "" {
		if b.PatternType, err = acl.ParsePatternType(in.PatternType); err != nil {
			return b, bad("pattern_type", "%q is not literal or prefixed", in.PatternType)
		}
	}
	if b.Principal == "" {
		return b, bad("principal", "required (User:<name>, or User:* for everyone)")
	}
	if !strings.HasPrefix(b.Principal, acl.PrincipalPrefix) || b.Principal == acl.PrincipalPrefix {
		return b, bad("principal", "%q is not of the form User:<name> or User:*", b.Principal)
	}
	if b.Host == "" {
		b.Host = acl.AnyHost
	}
	if b.Host, err = acl.CanonicalHost(b.Host); err != nil {
		return b, bad("host", "%q is neither * nor an IP address", in.Host)
	}
	if in.Operation == "" {
		return b, bad("operation", "required (read, write, create, delete, alter, describe, ...)")
	}
	if b.Operation, err = acl.ParseOperation(in.Operation); err != nil {
		return b, bad("operation", "%q is not an operation", in.Operation)
	}
	if in.Permission == "" {
		return b, bad("permission", "required (allow or deny)")
	}
	if b.Permission, err = acl.ParsePermission(in.Permission); err != nil {
		return b, bad("permission", "%q is not allow or deny", in.Permission)
	}
	if err := b.Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), acl.ErrInvalidBinding.Error()+": ")
		return b, badRequest("%s: %s", field, msg)
	}
	return b, nil
}

// parseFilter reads a filter; an empty field matches any value. Tenant is
// left to the caller.
func parseFilter(in Filter, field string) (acl.Filter, error) {
	bad := func(sub, format string, args ...any) error {
		return badRequest("%s%s: %s", field, sub, fmt.Sprintf(format, args...))
	}
	f := acl.Filter{ResourceType: acl.ResourceAny, ResourceName: in.ResourceName, PatternType: acl.PatternAny,
		Principal: in.Principal, Host: in.Host, Operation: acl.OpAny, Permission: acl.PermissionAny}
	var err error
	if in.ResourceType != "" {
		if f.ResourceType, err = acl.ParseResourceType(in.ResourceType); err != nil {
			return f, bad("resource_type", "%q is not any, topic, group, cluster or transactional-id", in.ResourceType)
		}
	}
	if in.PatternType != "" {
		if f.PatternType, err = acl.ParsePatternType(in.PatternType); err != nil {
			return f, bad("pattern_type", "%q is not any, literal, prefixed or match", in.PatternType)
		}
	}
	if f.PatternType == acl.PatternMatch && f.ResourceName == "" {
		return f, bad("resource_name", "pattern type match needs a resource name to match")
	}
	if f.Principal != "" && !strings.HasPrefix(f.Principal, acl.PrincipalPrefix) {
		return f, bad("principal", "%q is not of the form User:<name> or User:*", f.Principal)
	}
	if f.Host != "" {
		if f.Host, err = acl.CanonicalHost(f.Host); err != nil {
			return f, bad("host", "%q is neither * nor an IP address", in.Host)
		}
	}
	if in.Operation != "" {
		if f.Operation, err = acl.ParseOperation(in.Operation); err != nil {
			return f, bad("operation", "%q is not an operation", in.Operation)
		}
	}
	if in.Permission != "" {
		if f.Permission, err = acl.ParsePermission(in.Permission); err != nil {
			return f, bad("permission", "%q is not any, allow or deny", in.Permission)
		}
	}
	return f, nil
}

// filterScope sets f's tenant: the one named, else the caller's own, or
// every tenant for a super user who names none; and checks that the caller
// manages it.
func (c caller) filterScope(f *acl.Filter, tenant, what string) error {
	switch {
	case tenant != "":
		if err := validTenant(tenant); err != nil {
			return err
		}
		f.Tenant = tenant
	case c.IsSuper():
		f.AnyTenant = true
		return nil
	default:
		f.Tenant = c.tenant()
	}
	return c.mustManage(f.Tenant, what)
}

func (a *api) createACLs(w http.ResponseWriter, r *http.Request) {
	const what = "create ACLs"
	c, err := callerOf(r)
	var req CreateACLsRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	var bs []acl.Binding
	if err == nil {
		bs, err = c.parseBindings(req, what)
	}
	if err != nil {
		a.writeError(w, r, err, "ACL")
		return
	}
	ms := make([]meta.ACL, len(bs))
	out := BindingList{Bindings: make([]Binding, len(bs))}
	for i, b := range bs {
		ms[i], out.Bindings[i] = toMeta(b), bindingOut(b)
	}
	if err := a.store.CreateACLs(r.Context(), ms); err != nil {
		a.writeError(w, r, err, "ACL")
		return
	}
	for _, b := range bs {
		a.log.Info().Str("binding", b.String()).Str("by", c.Principal.String()).Msg("ACL binding created")
	}
	writeJSON(w, http.StatusCreated, out)
}

// parseBindings reads every binding of req and checks that the caller
// manages each one's tenant.
func (c caller) parseBindings(req CreateACLsRequest, what string) ([]acl.Binding, error) {
	switch {
	case len(req.Bindings) == 0:
		return nil, badRequest("%s: field bindings is required and must hold at least one binding", what)
	case len(req.Bindings) > maxBindings:
		return nil, badRequest("%s: %d bindings, at most %d in one request", what, len(req.Bindings), maxBindings)
	}
	tenant := req.Tenant
	if tenant == "" {
		tenant = c.tenant()
	}
	bs := make([]acl.Binding, 0, len(req.Bindings))
	var tenants []string
	for i, in := range req.Bindings {
		b, err := parseBinding(in, fmt.Sprintf("bindings[%d]", i), tenant)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(tenants, b.Tenant) {
			if err := c.mustManage(b.Tenant, what); err != nil {
				return nil, err
			}
			tenants = append(tenants, b.Tenant)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// filterParams are the query parameters of GET /v1/acls.
var filterParams = []string{"tenant", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"}

func (a *api) listACLs(w http.ResponseWriter, r *http.Request) {
	const what = "list ACLs"
	c, err := callerOf(r)
	q := r.URL.Query()
	if err == nil {
		err = onlyParams(q, filterParams)
	}
	var f acl.Filter
	if err == nil {
		f, err = parseFilter(Filter{ResourceType: q.Get("resource_type"), ResourceName: q.Get("resource_name"),
			PatternType: q.Get("pattern_type"), Principal: q.Get("principal"), Host: q.Get("host"),
			Operation: q.Get("operation"), Permission: q.Get("permission")}, "query parameter ")
	}
	if err == nil {
		err = c.filterScope(&f, q.Get("tenant"), what)
	}
	var all []meta.ACL
	if err == nil {
		all, err = a.store.ListACLs(r.Context(), f.Tenant)
	}
	if err != nil {
		a.writeError(w, r, err, "ACL")
		return
	}
	out := BindingList{Bindings: []Binding{}}
	for _, m := range all {
		if b := fromMeta(m); f.Matches(b) {
			out.Bindings = append(out.Bindings, bindingOut(b))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// onlyParams refuses a query parameter the route does not take, so that a
// misspelt filter does not silently match everything.
func onlyParams(q url.Values, known []string) error {
	for k, v := range q {
		if !slices.Contains(known, k) {
			return badRequest("unknown query parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return badRequest("query parameter %q given %d times", k, len(v))
		}
	}
	return nil
}

func (a *api) deleteACLs(w http.ResponseWriter, r *http.Request) {
	const what = "delete ACLs"
	c, err := callerOf(r)
	var req DeleteACLsRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil && req.Filter == nil {
		err = badRequest("%s: field filter is required ({} selects every binding of the tenant)", what)
	}
	var f acl.Filter
	if err == nil {
		f, err = parseFilter(*req.Filter, "filter.")
	}
	if err == nil {
		err = c.filterScope(&f, req.Tenant, what)
	}
	var deleted []meta.ACL
	if err == nil {
		deleted, err = a.store.DeleteACLs(r.Context(), func(m meta.ACL) bool { return f.Matches(fromMeta(m)) })
	}
	for _, m := range deleted {
		a.log.Info().Str("binding", fromMeta(m).String()).Str("by", c.Principal.String()).Msg("ACL binding deleted")
	}
	if err != nil {
		a.writeError(w, r, err, "ACL")
		return
	}
	out := DeletedBindings{Deleted: make([]Binding, 0, len(deleted))}
	for _, m := range deleted {
		out.Deleted = append(out.Deleted, bindingOut(fromMeta(m)))
	}
	writeJSON(w, http.StatusOK, out)
}
