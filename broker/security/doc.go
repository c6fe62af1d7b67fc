// Package security is a broker's live security state: who may connect and
// what each principal may do, rebuilt from the metadata store's security
// records (meta.WatchSecurity) whenever they change. Its Guard is what the
// front ends consult; it holds no credentials of its own and writes nothing
// but the bootstrap records below.
//
// The Guard answers:
//
//   - authentication: ScramLookup (an auth.CredentialLookup for SASL/SCRAM
//     on Kafka connections), CheckAPIKey (HTTP Bearer) and CheckBasic (HTTP
//     Basic, checked against the user's SCRAM keys);
//   - identity: Identity turns a principal (from SASL or a client
//     certificate) into an auth.Identity with its tenant and role (the stored
//     user's, RoleSuper for a principal named in Config.SuperUsers);
//   - authorisation: Authorize decides one operation on one resource of the
//     identity's tenant with an acl.Authorizer rebuilt from the stored ACL
//     bindings (acl.Authorizer.Replace);
//   - sessions: UserExists, for checking that an authenticated user still
//     exists.
//
// # Failing closed
//
// A snapshot that lists records it could not decode (meta.SecuritySnapshot's
// Corrupt) may be missing a DENY binding, and a binding list the authoriser
// refuses cannot be applied at all: in both cases the Guard denies every
// operation of every principal but the super users, and logs why, until a
// snapshot without the fault arrives. Authentication goes on from the
// records that did decode (an undecodable user simply cannot log in).
//
// # Security off
//
// With Config.Enabled false (the development default of `make run`), the
// HTTP API takes anonymous requests and Authorize allows everything; the
// Guard still follows the store, so SASL listeners can authenticate.
//
// # Bootstrap
//
// With Config.AdminPasswordFile, Start makes sure the tenants "system" and
// "default" exist (meta.EnsureTenant) and creates the super user "admin" in
// "system", with SCRAM-SHA-256 and SCRAM-SHA-512 credentials of the file's
// password, if no user of that name exists. It never changes an existing
// user: the file is how the first operator gets in, not how a password is
// reset.
//
// # Concurrency
//
// One goroutine per Guard (started by Start, ended by Close) follows the
// store; it publishes an immutable index through an atomic pointer and
// swaps the authoriser's Set, so every method is safe for concurrent use and
// takes no lock. A decision reads one index: it never mixes two revisions.
package security
