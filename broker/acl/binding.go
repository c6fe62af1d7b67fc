// This file owns one ACL binding (a resource pattern joined to an access
// entry, within a tenant), its validation, and the filter that DescribeAcls
// and DeleteAcls select bindings with.
//
// Invariant: a binding that passed Validate names a tenant, one concrete
// resource type, LITERAL or PREFIXED, a "User:" principal, "*" or an IP host
// in canonical form, an operation its resource type supports, and ALLOW or
// DENY; it holds no filter-only value (Any, Match).
// Invariant: a Filter never widens across tenants unless AnyTenant is set.

package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalidBinding marks every error of Binding.Validate, Filter.Validate and NewSet.
var ErrInvalidBinding = errors.New("acl: invalid binding")

// Principal forms.
const (
	// PrincipalPrefix starts every principal: Kafka's principal type "User".
	PrincipalPrefix = "User:"
	// AnyPrincipal in a binding matches every principal.
	AnyPrincipal = "User:*"
	// AnyHost in a binding matches every client address.
	AnyHost = "*"
	// AnyName as the name of a LITERAL binding matches every resource of its type.
	AnyName = "*"
)

// Binding is one stored ACL: within Tenant, Principal connecting from Host may
// (Allow) or may not (Deny) perform Operation on the resources of type
// ResourceType whose name matches ResourceName under PatternType.
type Binding struct {
	Tenant       string
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string // "User:alice", or AnyPrincipal
	Host         string // AnyHost, or an IP address (canonical: see CanonicalHost)
	Operation    Operation
	Permission   Permission
}

// Validate checks that b can be stored and consulted. Errors wrap ErrInvalidBinding.
func (b Binding) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidBinding, b, fmt.Sprintf(format, args...))
	}
	switch {
	case b.Tenant == "":
		return bad("no tenant")
	case b.ResourceType < ResourceTopic || b.ResourceType > ResourceTransactionalID:
		return bad("resource type %s cannot be stored", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return bad("pattern type %s cannot be stored (LITERAL or PREFIXED)", b.PatternType)
	case b.ResourceName == "":
		return bad("empty resource name")
	case b.PatternType == PatternPrefixed && b.ResourceName == AnyName:
		return bad(`a PREFIXED "*" matches nothing; use LITERAL "*" for every name`)
	case b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral):
		return bad("the cluster resource is LITERAL %q", ClusterName)
	case b.Operation < OpAll || b.Operation > OpIdempotentWrite:
		return bad("operation %s cannot be stored", b.Operation)
	case !b.ResourceType.Supports(b.Operation):
		return bad("resource type %s does not support operation %s", b.ResourceType, b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return bad("permission %s cannot be stored (ALLOW or DENY)", b.Permission)
	}
	if err := validPrincipal(b.Principal); err != nil {
		return bad("%v", err)
	}
	if h, err := CanonicalHost(b.Host); err != nil {
		return bad("%v", err)
	} else if h != b.Host {
		return bad("host %q is not in canonical form %q", b.Host, h)
	}
	return nil
}

func validPrincipal(p string) error {
	name, ok := strings.CutPrefix(p, PrincipalPrefix)
	if !ok || name == "" {
		return fmt.Errorf("principal %q is not of the form User:<name> or User:*", p)
	}
	return nil
}

// CanonicalHost returns the form in which a binding stores host and in which
// a Request carries the client address: "*" stays "*", an IP address is
// printed by net/netip with an IPv4-mapped IPv6 address unmapped (so
// "::ffff:10.0.0.1" and "10.0.0.1" are one host). Host names are refused:
// like Kafka, bindings name addresses only.
func CanonicalHost(host string) (string, error) {
	if host == AnyHost {
		return host, nil
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Zone() != "" {
		return "", fmt.Errorf("host %q is neither %q nor an IP address", host, AnyHost)
	}
	return addr.Unmap().String(), nil
}

// String prints b for errors and logs, in the order kafka-acls reads it.
func (b Binding) String() string {
	return fmt.Sprintf("%s %s from %s to %s %s %s %q in tenant %q",
		b.Permission, b.Principal, b.Host, b.Operation, b.ResourceType, b.PatternType, b.ResourceName, b.Tenant)
}

// Filter selects bindings the way Kafka's DescribeAcls and DeleteAcls
// filters do. An empty ResourceName, Principal or Host matches any (Kafka's
// null); ResourceAny, PatternAny, OpAny and PermissionAny match any value.
// Principal and Host compare exactly: a filter for "User:alice" does not
// select a "User:*" binding.
//
// PatternType decides how ResourceName compares:
//   - PatternAny: the binding's name equals ResourceName, whatever its pattern type.
//   - PatternLiteral, PatternPrefixed: the binding has that pattern type and its name equals ResourceName.
//   - PatternMatch: the binding would apply to a resource literally named
//     ResourceName: a LITERAL binding with that name or "*", or a PREFIXED
//     binding whose name is a prefix of it.
type Filter struct {
	// Tenant selects the bindings of one tenant. It must be set unless
	// AnyTenant is; AnyTenant selects every tenant's bindings and is for
	// super users only (the caller decides, see CanManage).
	Tenant    string
	AnyTenant bool

	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

// Validate refuses filters Kafka refuses, and a filter without a tenant.
// Errors wrap ErrInvalidBinding.
func (f Filter) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: filter: %s", ErrInvalidBinding, fmt.Sprintf(format, args...))
	}
	switch {
	case f.Tenant == "" && !f.AnyTenant:
		return bad("no tenant")
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceTransactionalID:
		return bad("resource type %s", f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return bad("pattern type %s", f.PatternType)
	case f.Operation < OpAny || f.Operation > OpIdempotentWrite:
		return bad("operation %s", f.Operation)
	case f.Permission < PermissionAny || f.Permission > PermissionAllow:
		return bad("permission %s", f.Permission)
	}
	return nil
}

// Matches tells whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if !f.AnyTenant && f.Tenant != b.Tenant {
		return false
	}
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesName(b) {
		return false
	}
	if f.Principal != "" && f.Principal != b.Principal {
		return false
	}
	if f.Host != "" && f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

func (f Filter) matchesName(b Binding) bool {
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == "" || f.ResourceName == b.ResourceName
	case PatternMatch:
		return f.ResourceName == "" || patternCovers(b.PatternType, b.ResourceName, f.ResourceName)
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == "" || f.ResourceName == b.ResourceName)
	}
}

// patternCovers tells whether a binding pattern applies to the resource named name.
func patternCovers(pt PatternType, pattern, name string) bool {
	switch pt {
	case PatternLiteral:
		return pattern == name || pattern == AnyName
	case PatternPrefixed:
		return strings.HasPrefix(name, pattern)
	}
	return false
}
