// Package secapi is the HTTP admin API of a shared cluster's security
// objects: tenants, users (with their SCRAM credentials), HTTP API keys,
// ACL bindings, and each tenant's quotas and scheduling attributes. It
// decodes and validates requests, decides whether the caller may manage
// the object named, and calls the metadata store. It does
// not authenticate: the HTTP pipeline has done that and put an
// auth.Identity in the request's context (auth.WithIdentity); a request
// without one is answered 401.
//
// # Routes
//
//	POST   /v1/tenants                     {name,pool?}                  201 Tenant        super
//	GET    /v1/tenants                                                   200 {tenants}     super
//	DELETE /v1/tenants/{name}                                            204               super
//	PUT    /v1/tenants/{name}/pool         {pool}                        200 Tenant        super
//	POST   /v1/users                       {name,tenant?,password,       201 User          admin of tenant
//	                                        role?,mechanisms?}
//	GET    /v1/users[?tenant=T]                                          200 {users}       admin of tenant
//	DELETE /v1/users/{name}                                              204               admin of its tenant
//	PUT    /v1/users/{name}/password       {password}                    204               admin, or the user itself
//	POST   /v1/users/{name}/api-keys       {description?}                201 NewAPIKey     admin, or the user itself
//	GET    /v1/users/{name}/api-keys                                     200 {api_keys}    admin, or the user itself
//	DELETE /v1/api-keys/{id}                                             204               admin, or the key's user
//	POST   /v1/acls                        {tenant?,bindings}            201 {bindings}    admin of tenant
//	GET    /v1/acls[?tenant&resource_type&resource_name&pattern_type    200 {bindings}    admin of tenant
//	            &principal&host&operation&permission]
//	POST   /v1/acls:delete                 {tenant?,filter}              200 {deleted}     admin of tenant
//	GET    /v1/quotas                                                    200 {tenants}     super
//	GET    /v1/tenants/{name}/quotas                                     200 TenantQuotas  admin of tenant
//	PUT    /v1/tenants/{name}/quotas       {set?,remove?}                200 TenantQuotas  super
//	PUT    /v1/tenants/{name}/scheduling   {weight?,priority_class?}     200 TenantQuotas  super
//
// "admin of tenant T" is a super user (auth.RoleSuper), or a tenant admin
// (auth.RoleTenantAdmin) whose principal belongs to T (acl.CanManage).
// Where a request names no tenant it is the caller's own; a super user who
// lists or deletes ACLs without one acts on every tenant. Only a super user
// creates, lists or deletes tenants, creates a super user, or manages a
// super user's password and keys. Only a super user changes quotas (a
// tenant admin able to raise its own tenant's would make them pointless);
// a tenant admin reads its own tenant's. Quota keys are broker/quota's,
// checked with quota.Check. An ordinary user may change its own
// password and manage its own API keys, nothing else here.
//
// A password is never stored or logged: POST /v1/users and the password
// route derive SCRAM credentials from it (auth.NewScramCredential, the
// mechanisms asked for, SCRAM-SHA-256 and SCRAM-SHA-512 by default) and
// store those. An API key is shown once, in the answer that creates it;
// the store keeps its SHA-256 (auth.NewAPIKey), and no answer ever carries
// a hash or a salted key.
//
// ACL names are kafka-acls' ("topic", "transactional-id", "prefixed",
// "describe-configs", "allow"; case, '-' and '_' are ignored: acl.Parse*),
// answers print Kafka's enum names (TOPIC, PREFIXED, DESCRIBE_CONFIGS,
// ALLOW). A binding's host defaults to "*" and its pattern type to LITERAL;
// a filter's fields left out match anything (its pattern type defaults to
// ANY), as Kafka's DescribeAcls and DeleteAcls filters do (acl.Filter).
//
// # Errors
//
// Every failure is {"error":{"code","message"}}, the form of the rest of
// the HTTP API; code is stable (a program may switch on it), message is for
// a person and names the field or object at fault. Codes: bad_request and
// too_large (400, 413), unauthenticated (401), forbidden (403),
// invalid_quota (400: an unknown quota key or a value it does not take, a
// weight or priority class out of range), tenant_not_found,
// user_not_found, api_key_not_found (404),
// tenant_exists, user_exists, tenant_not_empty, tenant_reserved,
// api_key_limit, conflict (409), metadata_unavailable (503), internal
// (500). A 4xx is logged at DEBUG, a 5xx at WARN (503) or ERROR.
//
// # Concurrency
//
// Handlers keep no state between requests: every decision reads the store.
// Check and write are separate calls, so a decision is made on what the
// store held a moment before the write (a user deleted meanwhile makes the
// write fail with not found; the store's own transactions keep its
// invariants).
package secapi
