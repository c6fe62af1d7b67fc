// Package acl is Kafka's access-control model applied inside a tenant, and
// the authoriser the request pipeline consults before every operation. It is
// pure: no etcd, no network, no clock. The bindings come from elsewhere (the
// metadata store's watch hands the whole list to Authorizer.Replace); this
// package only decides.
//
// # Bindings
//
// A Binding says: in tenant T, principal P connecting from host H may (ALLOW)
// or may not (DENY) perform operation O on resources of type R whose name
// matches N under pattern type PT.
//
//   - R is TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID; the cluster has one
//     resource, named "kafka-cluster" (one per tenant: a tenant's cluster
//     bindings say nothing about another tenant).
//   - PT is LITERAL (the name equals N, or N is "*" and stands for every
//     name) or PREFIXED (the name starts with N).
//   - P is "User:<name>" or "User:*" (every principal). H is an IP address or
//     "*"; addresses are compared in the form CanonicalHost prints.
//   - O is one the resource type supports (ResourceType.Supports), or ALL.
//
// The enumerations carry Kafka's wire codes, so kmsg's ACL fields convert to
// and from them with a type conversion. ANY and MATCH exist only in filters
// (DescribeAcls, DeleteAcls); a stored binding never holds them.
//
// Names are tenant-local: two tenants' topics "orders" are different
// resources, and a binding's Tenant is part of what it matches.
//
// # Deciding
//
// For a request (tenant, principal, host, operation, resource), the bindings
// that apply are those of the same tenant and resource type whose pattern
// covers the resource's name, whose principal is the request's or User:*,
// and whose host is the request's or "*". Then:
//
//  1. A super user (Config.SuperUsers) is allowed, in every tenant.
//  2. A DENY that applies and names the operation (or ALL) refuses. DENY
//     wins over every ALLOW, however specific the ALLOW is.
//  3. An ALLOW that applies and grants the operation allows. An ALLOW grants
//     its own operation, and: ALL grants every operation; READ, WRITE,
//     DELETE and ALTER grant DESCRIBE; ALTER_CONFIGS grants DESCRIBE_CONFIGS.
//     Implication works for ALLOW only: a DENY of READ does not refuse DESCRIBE.
//  4. With Config.AllowEveryoneIfNoACLFound, a resource that no binding at
//     all applies to (for any principal, host, operation or permission) is
//     allowed. One binding on a resource, even for someone else, ends this.
//  5. IDEMPOTENT_WRITE on the cluster is also allowed when WRITE on some topic
//     of the tenant would be (Kafka 2.8+); an explicit DENY still wins.
//  6. Anything else is refused with "no ALLOW binding matched".
//
// Decision.Reason names the binding that decided, or the rule.
//
// AuthorizeAny answers "would op be allowed on at least one resource of this
// type?" for listing filters: a DENY on "*" refuses all; an ALLOW counts
// unless DENYs cover every name it covers (a literal name denied literally or
// by a prefix; a prefix denied by a shorter-or-equal prefix of it).
//
// # Tenant administration
//
// As in Kafka, managing ACLs needs ALTER (listing them DESCRIBE) on the
// cluster resource; here that is the caller's own tenant's cluster, which
// makes the caller the tenant's admin. CanManage adds the boundary: a tenant
// admin manages only its own tenant's ACLs and users, a super user every
// tenant's.
//
// # Concurrency
//
// A Set is immutable once built and read without locks. An Authorizer holds
// the current Set in an atomic pointer; Replace builds a new Set and swaps it
// in, so requests in flight finish on the Set they started with. A list with
// any invalid binding is refused whole and the previous Set stays: deciding
// on part of the list could drop a DENY.
package acl
