// This file owns Authorizer, what the request pipeline calls for every
// operation: the super users, the allow-everyone switch, and the current Set
// behind an atomic pointer.
//
// Invariant: Authorize and AuthorizeAny read one Set (the one current when
// they start) and take no lock; Replace swaps the whole Set at once, so a
// decision never mixes two generations of bindings.
// Invariant: a Replace that fails leaves the current Set in place.

package acl

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Config is the authoriser's fixed configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") that every check allows,
	// in every tenant, whatever the bindings say.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound allows an operation on a resource that no
	// binding at all (of any principal, host or operation) applies to.
	// Kafka's allow.everyone.if.no.acl.found: for the dev default only.
	AllowEveryoneIfNoACLFound bool
}

// Validate checks the super users' principal form.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.SuperUsers {
		if err := validPrincipal(p); err != nil {
			errs = append(errs, fmt.Errorf("acl: super user: %w", err))
		} else if p == AnyPrincipal {
			errs = append(errs, errors.New(`acl: super user: "User:*" would make everyone a super user`))
		}
	}
	return errors.Join(errs...)
}

// Authorizer decides requests against the current Set. Safe for concurrent use.
type Authorizer struct {
	superUsers    map[string]bool // read-only after NewAuthorizer
	allowEveryone bool
	set           atomic.Pointer[Set] // never nil
}

// NewAuthorizer returns an authoriser with no bindings.
func NewAuthorizer(cfg Config) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Authorizer{superUsers: make(map[string]bool, len(cfg.SuperUsers)), allowEveryone: cfg.AllowEveryoneIfNoACLFound}
	for _, p := range cfg.SuperUsers {
		a.superUsers[p] = true
	}
	empty, _ := NewSet(nil)
	a.set.Store(empty)
	return a, nil
}

// Replace builds a Set from bindings (the whole current list, e.g. after a
// watch event) and makes it current. If any binding is invalid it returns
// NewSet's error and keeps the previous Set.
func (a *Authorizer) Replace(bindings []Binding) error {
	s, err := NewSet(bindings)
	if err != nil {
		return fmt.Errorf("acl: replace: %w", err)
	}
	a.set.Store(s)
	return nil
}

// Set returns the current bindings (for DescribeAcls and DeleteAcls).
func (a *Authorizer) Set() *Set { return a.set.Load() }

// IsSuperUser tells whether principal bypasses every check.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides req. The rules, in order:
//  1. a super user is allowed;
//  2. a DENY binding that applies refuses (DENY wins over any ALLOW);
//  3. an ALLOW binding that applies, directly or by implication, allows;
//  4. with AllowEveryoneIfNoACLFound, a resource no binding applies to is allowed;
//  5. IdempotentWrite on the cluster is allowed if Write on some topic of
//     the tenant would be (AuthorizeAny);
//  6. otherwise refused: "no ALLOW binding matched".
//
// A request with a filter-only operation or resource type, or a principal
// not of the form User:<name>, is refused.
func (a *Authorizer) Authorize(req Request) Decision {
	if a.superUsers[req.Principal] {
		return Decision{Allowed: true, Reason: reasonSuperUser}
	}
	return a.set.Load().authorize(&req, a.allowEveryone)
}

// AuthorizeAny tells whether principal, connecting from host, may perform op
// on at least one resource of type rtype in tenant: for filtering listings
// (ListGroups, Metadata of all topics) and for checks Kafka makes by
// resource type. It is exact for the cluster; for other types see the rules
// of Kafka's authorizeByResourceType, which it follows, with the Describe
// and DescribeConfigs implications of Authorize.
func (a *Authorizer) AuthorizeAny(tenant, principal, host string, op Operation, rtype ResourceType) bool {
	if a.superUsers[principal] {
		return true
	}
	return a.set.Load().authorizeAny(tenant, principal, host, op, rtype, a.allowEveryone)
}

// CanManage tells whether a caller may manage (create, list, delete) the
// ACLs and users of targetTenant. A super user manages every tenant; any
// other caller only its own. It adds the tenant boundary to the operation
// check the caller makes first, as Kafka does for CreateAcls and DeleteAcls:
// Alter (Describe to list) on the cluster resource of the caller's own
// tenant, which is what makes a principal that tenant's admin.
func CanManage(callerTenant string, callerIsSuperUser bool, targetTenant string) bool {
	if callerIsSuperUser {
		return targetTenant != ""
	}
	return callerTenant != "" && callerTenant == targetTenant
}
