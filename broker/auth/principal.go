package auth

// This file owns the identity every authenticated request carries.
//
// Invariant: a Principal with an empty User is never the result of a
// successful authentication.

// DefaultTenant is the tenant of anonymous development access
// (Anonymous) and of the topics and groups that existed before tenants did:
// an unqualified legacy name belongs to it.
const DefaultTenant = "default"

// AnonymousUser is the user name Kafka gives an unauthenticated client.
const AnonymousUser = "ANONYMOUS"

// Principal is who sent a request: a user and the tenant the user belongs
// to. A user belongs to exactly one tenant and user names are unique in the
// cluster, so the user alone identifies a principal; the tenant travels
// with it so that every name the request touches can be scoped without
// another lookup.
type Principal struct {
	Tenant string
	User   string
}

// Anonymous is the principal of a connection on a listener that does not
// authenticate (PLAINTEXT, and SSL without a client certificate): Kafka's
// User:ANONYMOUS, placed in the tenant named "default", the tenant of
// anonymous development access and of unqualified legacy topics.
var Anonymous = Principal{Tenant: DefaultTenant, User: AnonymousUser}

// String is the principal as Kafka writes it in ACLs and logs: "User:<name>".
// The tenant is not part of it: ACLs are scoped to a tenant already.
func (p Principal) String() string { return "User:" + p.User }

// IsAnonymous reports whether p is the unauthenticated principal.
func (p Principal) IsAnonymous() bool { return p == Anonymous }
