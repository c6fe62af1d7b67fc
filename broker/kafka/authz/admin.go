package authz

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file owns the conversions of the administrative APIs of ACLs and
// SCRAM credentials (CreateAcls, DescribeAcls, DeleteAcls,
// DescribeUserScramCredentials, AlterUserScramCredentials): Kafka's wire
// forms to and from broker/acl's bindings and meta's records, the
// per-item error codes, and the whole-request refusal.

// RefuseAdmin answers a whole administrative request with code: every
// creation, filter and user gets it, as Kafka does.
func RefuseAdmin(body kmsg.Request, code int16, msg string) kmsg.Response {
	resp := body.ResponseKind()
	resp.SetVersion(body.GetVersion())
	m := kmsg.StringPtr(msg)
	switch r := resp.(type) {
	case *kmsg.CreateACLsResponse:
		for range body.(*kmsg.CreateACLsRequest).Creations {
			r.Results = append(r.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: m})
		}
	case *kmsg.DescribeACLsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.DeleteACLsResponse:
		for range body.(*kmsg.DeleteACLsRequest).Filters {
			r.Results = append(r.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: m})
		}
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode, r.ErrorMessage = code, m
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, u := range AlteredUsers(body.(*kmsg.AlterUserSCRAMCredentialsRequest)) {
			r.Results = append(r.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: u, ErrorCode: code, ErrorMessage: m})
		}
	}
	return resp
}

// AdminErrorCode is the Kafka code of an administrative API's error.
func AdminErrorCode(err error) int16 {
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

// AdminError is the code and message of err for a result.
func AdminError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	return AdminErrorCode(err), kmsg.StringPtr(err.Error())
}

// BindingOf converts one CreateAcls creation into a binding of tenant and
// validates it.
func BindingOf(tenant string, c *kmsg.CreateACLsRequestCreation) (acl.Binding, error) {
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

// FilterOf converts a wire filter into an acl.Filter of tenant. none is
// true for a filter that can select no binding: Kafka's null matches any
// value and the empty string only itself, which no stored binding has.
func FilterOf(tenant string, w ACLFilter) (f acl.Filter, none bool, err error) {
	f = acl.Filter{
		Tenant:       tenant,
		ResourceType: acl.ResourceType(w.ResourceType),
		PatternType:  acl.PatternType(w.Pattern),
		Operation:    acl.Operation(w.Operation),
		Permission:   acl.Permission(w.Permission),
	}
	if err := f.Validate(); err != nil {
		return acl.Filter{}, false, err
	}
	for _, s := range []*string{w.Name, w.Principal, w.Host} {
		if s != nil && *s == "" {
			none = true
		}
	}
	if w.Name != nil {
		f.ResourceName = *w.Name
	}
	if w.Principal != nil {
		f.Principal = *w.Principal
	}
	if w.Host != nil {
		f.Host = *w.Host
		if h, err := acl.CanonicalHost(f.Host); err == nil {
			f.Host = h // a host no binding can have stays as given and selects nothing
		}
	}
	return f, none, nil
}

func BindingOfMeta(a meta.ACL) acl.Binding {
	return acl.Binding{
		Tenant: a.Tenant, ResourceType: acl.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: acl.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission),
	}
}

func MetaOfBinding(b acl.Binding) meta.ACL {
	return meta.ACL{
		Tenant: b.Tenant, ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName,
		PatternType: int8(b.PatternType), Principal: b.Principal, Host: b.Host,
		Operation: int8(b.Operation), Permission: int8(b.Permission),
	}
}

// DescribeResources groups bindings by resource pattern, in a stable order.
func DescribeResources(bs []acl.Binding) []kmsg.DescribeACLsResponseResource {
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

func MatchingACL(bd acl.Binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName = kmsg.ACLResourceType(bd.ResourceType), bd.ResourceName
	m.ResourcePatternType = kmsg.ACLResourcePatternType(bd.PatternType)
	m.Principal, m.Host = bd.Principal, bd.Host
	m.Operation, m.PermissionType = kmsg.ACLOperation(bd.Operation), kmsg.ACLPermissionType(bd.Permission)
	return m
}

// MechanismOf names a wire mechanism code.
func MechanismOf(code int8) (string, error) {
	switch code {
	case WireScramSHA256:
		return auth.MechanismScramSHA256, nil
	case WireScramSHA512:
		return auth.MechanismScramSHA512, nil
	}
	return "", fmt.Errorf("%w: %d (1 is SCRAM-SHA-256, 2 SCRAM-SHA-512)", ErrUnknownMechanism, code)
}

// WireMechanism is the wire code of a stored mechanism, 0 for none.
func WireMechanism(m string) int8 {
	switch m {
	case meta.ScramSHA256:
		return WireScramSHA256
	case meta.ScramSHA512:
		return WireScramSHA512
	}
	return 0
}

// UnknownUserError is the one answer for a user that does not exist or is
// out of the caller's reach.
func UnknownUserError(name string) error {
	return fmt.Errorf("%w: %q (users are created with `sluicectl user create` or POST /v1/users)", ErrUnknownUser, name)
}

// DescribedUser is the answer for a user: its mechanisms and iterations.
func DescribedUser(u meta.User) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	res.User = u.Name
	for m, k := range u.Scram {
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = WireMechanism(m), int32(k.Iterations)
		res.CredentialInfos = append(res.CredentialInfos, ci)
	}
	slices.SortFunc(res.CredentialInfos, func(x, y kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo) int {
		return int(x.Mechanism) - int(y.Mechanism)
	})
	return res
}

// AlteredUsers lists the users an AlterUserScramCredentials request names,
// in first-seen order: the response has one result per user.
func AlteredUsers(r *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var users []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return users
}

// ScramChanges validates every alteration of r and groups them by user; a
// user with an invalid one maps to its error instead.
func ScramChanges(r *kmsg.AlterUserSCRAMCredentialsRequest) (map[string][]ScramChange, map[string]error) {
	changes := map[string][]ScramChange{}
	bad := map[string]error{}
	seen := map[[2]string]bool{}
	note := func(user string, mechanism int8, keys func(string) (*meta.ScramKeys, error)) {
		if bad[user] != nil {
			return
		}
		m, err := MechanismOf(mechanism)
		if err == nil && user == "" {
			err = fmt.Errorf("%w: empty user name", auth.ErrInvalidCredential)
		}
		if err == nil && seen[[2]string{user, m}] {
			err = fmt.Errorf("user %q: %s altered twice in one request: %w", user, m, ErrDuplicate)
		}
		var k *meta.ScramKeys
		if err == nil {
			seen[[2]string{user, m}] = true
			k, err = keys(m)
		}
		if err != nil {
			bad[user] = err
			return
		}
		changes[user] = append(changes[user], ScramChange{Mechanism: m, Keys: k})
	}
	for _, d := range r.Deletions {
		note(d.Name, d.Mechanism, func(string) (*meta.ScramKeys, error) { return nil, nil })
	}
	for _, u := range r.Upsertions {
		note(u.Name, u.Mechanism, func(m string) (*meta.ScramKeys, error) {
			c, err := auth.ScramCredentialFromSaltedPassword(m, u.Salt, u.SaltedPassword, int(u.Iterations))
			if err != nil {
				return nil, fmt.Errorf("user %q: %w", u.Name, err)
			}
			return &meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, nil
		})
	}
	for u := range bad {
		delete(changes, u)
	}
	return changes, bad
}

// ACLFilter is a DescribeAcls or DeleteAcls filter as the wire has it.
type ACLFilter struct {
	ResourceType    kmsg.ACLResourceType
	Name            *string
	Pattern         kmsg.ACLResourcePatternType
	Principal, Host *string
	Operation       kmsg.ACLOperation
	Permission      kmsg.ACLPermissionType
}

// ScramChange is one validated alteration of one user's credential.
type ScramChange struct {
	Mechanism string
	Keys      *meta.ScramKeys // nil: delete
}

// Errors of the administrative APIs that name no store or acl error.
var (
	ErrSecurityDisabled = errors.New("ACLs are not enforced: the broker runs without security (start it with --security)")
	ErrUnknownMechanism = errors.New("unknown SCRAM mechanism")
	ErrDuplicate        = errors.New("named twice in one request")
	ErrUnknownUser      = errors.New("no such user")
)

// adminErrorCodes maps the errors of the administrative APIs to Kafka's
// codes, first match wins; anything else is node.ErrorCode's.
var adminErrorCodes = []struct {
	err  error
	code int16
}{
	{ErrSecurityDisabled, kerr.SecurityDisabled.Code},
	{ErrUnknownMechanism, kerr.UnsupportedSaslMechanism.Code},
	{ErrDuplicate, kerr.DuplicateResource.Code},
	{ErrUnknownUser, kerr.ResourceNotFound.Code},
	{acl.ErrInvalidBinding, kerr.InvalidRequest.Code},
	{meta.ErrInvalidACL, kerr.InvalidRequest.Code},
	{auth.ErrInvalidCredential, kerr.UnacceptableCredential.Code},
	{meta.ErrInvalidCredential, kerr.UnacceptableCredential.Code},
	{meta.ErrInvalidName, kerr.InvalidRequest.Code},
	{meta.ErrNotFound, kerr.ResourceNotFound.Code},
}

// Kafka's wire codes of the SCRAM mechanisms (ScramMechanism).
const (
	WireScramSHA256 int8 = 1
	WireScramSHA512 int8 = 2
)

// ManageACLs: op (ALTER or DESCRIBE) on the caller's tenant's
// cluster, or the tenant-admin role (the Check's identity carries it).
func ManageACLs(op acl.Operation) Rule {
	return func(c *Check, body kmsg.Request) Result {
		if c.ID.IsTenantAdmin() || c.Allow(op, acl.ResourceCluster, acl.ClusterName) {
			return Result{}
		}
		msg := fmt.Sprintf("not authorized: %s on the cluster of tenant %q is needed to manage ACLs", op, c.ID.Principal.Tenant)
		return Result{Refused: RefuseAdmin(body, kerr.ClusterAuthorizationFailed.Code, msg)}
	}
}

// ManageUsers: the tenant-admin or super role.
func ManageUsers(c *Check, body kmsg.Request) Result {
	if c.ID.IsTenantAdmin() {
		return Result{}
	}
	msg := fmt.Sprintf("not authorized: managing SCRAM credentials needs the tenant-admin role in tenant %q", c.ID.Principal.Tenant)
	return Result{Refused: RefuseAdmin(body, kerr.ClusterAuthorizationFailed.Code, msg)}
}
