// This file owns Set, an immutable collection of validated bindings indexed
// for the authoriser's lookups, and the decision rules over it.
//
// Index: tenant → resource type → {literal name → entries, prefix → entries,
// the distinct lengths of the prefixes}. A resource name is looked up with
// one map read for its literal entries, one for the "*" entries, and one per
// distinct prefix length not longer than the name; so a lookup costs a few
// map reads whatever the number of bindings, and bindings of another tenant
// are never visited.
//
// Invariant: a Set is never modified after NewSet returns; any number of
// goroutines read it without locks.
// Invariant: every binding in a Set passed Validate, and a Set holds each
// binding once.

package acl

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Set is an immutable, indexed set of bindings. The zero value is not
// usable; NewSet builds one (NewSet(nil) is the empty set).
type Set struct {
	bindings []Binding // sorted by compareBindings, no duplicates
	tenants  map[string]*tenantIndex
}

type tenantIndex struct {
	byType [ResourceTransactionalID + 1]*typeIndex
}

type typeIndex struct {
	literal    map[string][]entry // by name; AnyName holds the wildcard entries
	wildcard   []entry            // literal[AnyName], read on every lookup
	prefixed   map[string][]entry // by prefix
	prefixLens []int              // distinct len of the keys of prefixed, ascending
	// byPrincipal holds every binding of this tenant and type by principal
	// (AnyPrincipal among them), for AuthorizeAny.
	byPrincipal map[string][]Binding
}

// entry is the access part of one binding, with the text a Decision cites.
type entry struct {
	principal  string
	host       string
	op         Operation
	permission Permission
	reason     string
}

// NewSet validates and indexes bindings. Any invalid binding fails the whole
// set (errors wrap ErrInvalidBinding and name every invalid binding): an
// authoriser must never run on part of its bindings, since a dropped DENY
// would grant access. Duplicates are kept once. bindings is not retained.
func NewSet(bindings []Binding) (*Set, error) {
	var errs []error
	for _, b := range bindings {
		if err := b.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sorted := slices.Clone(bindings)
	slices.SortFunc(sorted, compareBindings)
	sorted = slices.Compact(sorted)

	s := &Set{bindings: sorted, tenants: make(map[string]*tenantIndex)}
	for _, b := range sorted {
		ti := s.tenants[b.Tenant]
		if ti == nil {
			ti = &tenantIndex{}
			s.tenants[b.Tenant] = ti
		}
		xi := ti.byType[b.ResourceType]
		if xi == nil {
			xi = &typeIndex{literal: make(map[string][]entry), prefixed: make(map[string][]entry),
				byPrincipal: make(map[string][]Binding)}
			ti.byType[b.ResourceType] = xi
		}
		e := entry{principal: b.Principal, host: b.Host, op: b.Operation, permission: b.Permission,
			reason: "matched binding " + b.String()}
		xi.byPrincipal[b.Principal] = append(xi.byPrincipal[b.Principal], b)
		if b.PatternType == PatternLiteral {
			xi.literal[b.ResourceName] = append(xi.literal[b.ResourceName], e)
			continue
		}
		if _, seen := xi.prefixed[b.ResourceName]; !seen {
			xi.prefixLens = append(xi.prefixLens, len(b.ResourceName))
		}
		xi.prefixed[b.ResourceName] = append(xi.prefixed[b.ResourceName], e)
	}
	for _, ti := range s.tenants {
		for _, xi := range ti.byType {
			if xi != nil {
				xi.wildcard = xi.literal[AnyName]
				slices.Sort(xi.prefixLens)
				xi.prefixLens = slices.Compact(xi.prefixLens)
			}
		}
	}
	return s, nil
}

func compareBindings(a, b Binding) int {
	return cmp.Or(
		strings.Compare(a.Tenant, b.Tenant),
		cmp.Compare(a.ResourceType, b.ResourceType),
		strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// Len is the number of bindings in s.
func (s *Set) Len() int { return len(s.bindings) }

// Bindings returns a copy of every binding, ordered by tenant, resource type,
// name, pattern type, principal, host, operation, permission.
func (s *Set) Bindings() []Binding { return slices.Clone(s.bindings) }

// Matching returns the bindings f selects (DescribeAcls; the bindings
// DeleteAcls would remove), in the order of Bindings.
func (s *Set) Matching(f Filter) []Binding {
	var out []Binding
	for _, b := range s.bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

func (s *Set) index(tenant string, rtype ResourceType) *typeIndex {
	ti := s.tenants[tenant]
	if ti == nil || rtype < 0 || int(rtype) >= len(ti.byType) {
		return nil
	}
	return ti.byType[rtype]
}

// Reasons a Decision gives when no single binding decided.
const (
	reasonSuperUser     = "principal is a super user"
	reasonNoAllow       = "no ALLOW binding matched"
	reasonNoACL         = "no binding names the resource and allow.everyone.if.no.acl.found is set"
	reasonIdempotent    = "IDEMPOTENT_WRITE on the cluster is implied by WRITE on a topic of the tenant"
	reasonInvalidPrefix = "invalid request: "
)

// denies tells whether a DENY binding of operation bop refuses op: only the
// operation itself or All (a DENY of Read does not refuse Describe).
func denies(bop, op Operation) bool { return bop == op || bop == OpAll }

// allows tells whether an ALLOW binding of operation bop grants op, with
// Kafka's implications: Read, Write, Delete and Alter grant Describe;
// AlterConfigs grants DescribeConfigs; All grants everything.
func allows(bop, op Operation) bool {
	if bop == op || bop == OpAll {
		return true
	}
	switch op {
	case OpDescribe:
		return bop == OpRead || bop == OpWrite || bop == OpDelete || bop == OpAlter
	case OpDescribeConfigs:
		return bop == OpAlterConfigs
	}
	return false
}

// appliesTo tells whether a binding of principal bp and host bh applies to a
// client: the same principal or User:*, the same host or "*".
func appliesTo(bp, bh, principal, host string) bool {
	return (bp == principal || bp == AnyPrincipal) && (bh == host || bh == AnyHost)
}

// verdict is the outcome of the bindings on one resource.
type verdict struct {
	deny  *entry // first DENY that refuses, if any
	allow *entry // first ALLOW that grants, if any
	named bool   // some binding (any principal, host, operation) applies to the resource
}

func (v *verdict) visit(es []entry, principal, host string, op Operation) bool {
	if len(es) > 0 {
		v.named = true
	}
	for i := range es {
		e := &es[i]
		if !appliesTo(e.principal, e.host, principal, host) {
			continue
		}
		if e.permission == PermissionDeny {
			if denies(e.op, op) {
				v.deny = e
				return true // DENY wins; nothing else can change the outcome
			}
		} else if v.allow == nil && allows(e.op, op) {
			v.allow = e
		}
	}
	return false
}

// evaluate gathers the bindings of req's tenant that apply to req's resource.
func (s *Set) evaluate(req *Request) verdict {
	var v verdict
	xi := s.index(req.Tenant, req.ResourceType)
	if xi == nil {
		return v
	}
	name := req.ResourceName
	if v.visit(xi.literal[name], req.Principal, req.Host, req.Operation) {
		return v
	}
	if name != AnyName && v.visit(xi.wildcard, req.Principal, req.Host, req.Operation) {
		return v
	}
	for _, n := range xi.prefixLens {
		if n > len(name) {
			break
		}
		if v.visit(xi.prefixed[name[:n]], req.Principal, req.Host, req.Operation) {
			return v
		}
	}
	return v
}

// authorize decides req for a principal that is not a super user.
func (s *Set) authorize(req *Request, allowEveryone bool) Decision {
	if err := req.validate(); err != nil {
		return Decision{Reason: reasonInvalidPrefix + err.Error()}
	}
	v := s.evaluate(req)
	switch {
	case v.deny != nil:
		return Decision{Reason: v.deny.reason}
	case v.allow != nil:
		return Decision{Allowed: true, Reason: v.allow.reason}
	case allowEveryone && !v.named:
		return Decision{Allowed: true, Reason: reasonNoACL}
	case req.ResourceType == ResourceCluster && req.Operation == OpIdempotentWrite &&
		s.authorizeAny(req.Tenant, req.Principal, req.Host, OpWrite, ResourceTopic, allowEveryone):
		// Kafka 2.8+ (KIP-679): an idempotent producer needs only Write on
		// some topic. Unlike Kafka, a DENY of IdempotentWrite on the cluster
		// still refuses (handled above): DENY wins everywhere here.
		return Decision{Allowed: true, Reason: reasonIdempotent}
	}
	return Decision{Reason: reasonNoAllow}
}

// authorizeAny tells whether some resource of type rtype in tenant would be
// allowed for op. For the cluster type that is its one resource. Otherwise,
// like Kafka's authorizeByResourceType: a DENY on "*" refuses every name; an
// ALLOW on a literal name counts unless a DENY names it literally or by a
// prefix of it; an ALLOW on a prefix counts unless a DENY prefix is a prefix
// of it (then every name under it is refused). With allowEveryone, a tenant
// and type without a "*" binding has names no binding covers, which are allowed.
// (Prefix DENYs that together cover every possible name are not detected.)
func (s *Set) authorizeAny(tenant, principal, host string, op Operation, rtype ResourceType, allowEveryone bool) bool {
	if rtype == ResourceCluster {
		req := Request{Tenant: tenant, Principal: principal, Host: host, Operation: op,
			ResourceType: ResourceCluster, ResourceName: ClusterName}
		return s.authorize(&req, allowEveryone).Allowed
	}
	probe := Request{Tenant: tenant, Principal: principal, Host: host, Operation: op, ResourceType: rtype,
		ResourceName: AnyName}
	if probe.validate() != nil {
		return false
	}
	xi := s.index(tenant, rtype)
	if xi == nil {
		return allowEveryone
	}
	if allowEveryone && len(xi.wildcard) == 0 {
		return true
	}
	// The bindings that can apply: the principal's own and User:*'s.
	mine, everyone := xi.byPrincipal[principal], xi.byPrincipal[AnyPrincipal]
	if principal == AnyPrincipal {
		everyone = nil
	}
	var denyLiteral map[string]bool
	var denyPrefix []string
	for _, list := range [2][]Binding{mine, everyone} {
		for _, b := range list {
			if b.Permission != PermissionDeny || (b.Host != host && b.Host != AnyHost) || !denies(b.Operation, op) {
				continue
			}
			switch {
			case b.PatternType == PatternPrefixed:
				denyPrefix = append(denyPrefix, b.ResourceName)
			case b.ResourceName == AnyName:
				return false
			default:
				if denyLiteral == nil {
					denyLiteral = make(map[string]bool)
				}
				denyLiteral[b.ResourceName] = true
			}
		}
	}
	underDenyPrefix := func(name string) bool {
		for _, p := range denyPrefix {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for _, list := range [2][]Binding{mine, everyone} {
		for _, b := range list {
			if b.Permission != PermissionAllow || (b.Host != host && b.Host != AnyHost) || !allows(b.Operation, op) {
				continue
			}
			switch {
			case b.PatternType == PatternPrefixed:
				if !underDenyPrefix(b.ResourceName) {
					return true
				}
			case b.ResourceName == AnyName:
				return true
			case !denyLiteral[b.ResourceName] && !underDenyPrefix(b.ResourceName):
				return true
			}
		}
	}
	return false
}

// Request is one operation to authorise.
type Request struct {
	Tenant       string // the tenant of the principal; the resource belongs to it
	Principal    string // "User:alice"
	Host         string // the client's IP address in the form CanonicalHost returns
	Operation    Operation
	ResourceType ResourceType
	ResourceName string // tenant-local name; ClusterName for the cluster
}

func (r *Request) validate() error {
	switch {
	case r.Operation <= OpAll || r.Operation > OpIdempotentWrite:
		return fmt.Errorf("operation %s", r.Operation)
	case r.ResourceType < ResourceTopic || r.ResourceType > ResourceTransactionalID:
		return fmt.Errorf("resource type %s", r.ResourceType)
	case !strings.HasPrefix(r.Principal, PrincipalPrefix):
		return fmt.Errorf("principal %q", r.Principal)
	}
	return nil
}

// Decision is the authoriser's answer. Reason says why: the binding that
// refused or granted (which names the tenant's ACL, so it belongs in the
// broker's log; whether clients see it is the caller's choice), or
// "no ALLOW binding matched", or the rule that applied.
type Decision struct {
	Allowed bool
	Reason  string
}
