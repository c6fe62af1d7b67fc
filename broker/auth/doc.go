// Package auth decides who a client is. It owns the principal (a user and
// its tenant), SCRAM credentials (how they are made from a password and how
// a password is checked against them), the server side of SASL on one Kafka
// connection (SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, with re-authentication
// and a session lifetime), the per-IP delay before a failed authentication
// is answered, HTTP API keys, and the HTTP Basic check. It does not decide
// what a principal may do (authorisation), store anything, or touch the
// network: the Kafka and HTTP front ends call it, the broker feeds it
// credentials from its cache of etcd through a CredentialLookup, and time
// comes from an injected clock. The SCRAM exchange and key derivation are
// github.com/xdg-go/scram's; this package writes no cryptography of its own
// beyond calling it and crypto/*. One exception: the client-final of
// librdkafka before 2.6.1, whose nonce is the client nonce followed by the
// whole server-first nonce, is refused by the library, so scram_legacy.go
// checks that one form's proof with crypto/hmac, crypto/sha256/512 and
// crypto/subtle by RFC 5802 §3's formulas (unless
// SessionConfig.StrictScramNonce, --sasl-scram-strict-nonce, refuses it as
// Kafka 4 does).
//
// # Tenants
//
// Every user belongs to exactly one tenant, and user names are unique in the
// cluster, so a successful login yields Principal{Tenant, User}. The tenant
// named "default" (DefaultTenant) holds anonymous development access
// (Anonymous, Kafka's User:ANONYMOUS on a listener that does not
// authenticate) and the unqualified topics and groups from before tenants.
//
// # SASL as Kafka frames it
//
// KIP-84 (SCRAM) and KIP-152 (SaslAuthenticate) put SASL inside Kafka
// requests. Before authentication a connection is answered only for
// ApiVersions, SaslHandshake and SaslAuthenticate:
//
//	client                                       broker (Session)
//	SaslHandshake v1 {mechanism}          ──▶    Handshake(mechanism)
//	                                      ◀──    {error, enabled mechanisms}
//	SaslAuthenticate {client-first}       ──▶    Step → server-first, done=false
//	   "n,,n=<user>,r=<cnonce>"           ◀──    "r=<cnonce><snonce>,s=<salt>,i=<iterations>"
//	SaslAuthenticate {client-final}       ──▶    Step → server-final, done=true
//	   "c=biws,r=<nonce>,p=<proof>"       ◀──    "v=<server signature>", session_lifetime_ms
//
// The auth_bytes of SaslAuthenticate are the raw RFC 5802 messages, nothing
// around them. PLAIN is one SaslAuthenticate carrying
// "[authzid] NUL user NUL password" and an empty answer. SaslHandshake v0
// (SASL tokens outside Kafka framing) is not supported: the caller answers
// it with UNSUPPORTED_VERSION.
//
// A failure is an *AuthError (errors.Is ErrAuthenticationFailed); its text
// is meant for the client's SaslAuthenticate error message and says the
// same for an unknown user as for a wrong password. For an unknown user the
// SCRAM exchange does not stop at the first message (which would tell the
// client the name is free): the session answers with a stand-in salt that is
// stable per name, as a real user's is, and fails at the proof. The caller
// counts the failure in a FailureDelay, waits its Delay, answers with
// SASL_AUTHENTICATION_FAILED and closes the connection.
//
// Kafka refuses an authorization id different from the user name, and the
// SCRAM "tokenauth" extension (delegation tokens, KIP-48); so does Sluice.
//
// # Session lifetime and re-authentication (KIP-368)
//
// With a SessionLifetime, the SaslAuthenticate v1 response that completes
// an exchange carries session_lifetime_ms, and the client re-authenticates
// before it runs out by sending SaslHandshake and SaslAuthenticate again on
// the same connection. Until then Principal stays the one established, and
// once Expired(now) holds the connection must be closed at its next request
// that is not a re-authentication; a deleted user or changed password thus
// stops working within one lifetime. Re-authentication must name the same
// mechanism and end in the same principal (Kafka's rule); anything else
// fails the session.
//
// # Invariants
//
// Invariant: a Session reports a principal only after an exchange that
// verified a proof or password against a credential the lookup returned
// for a known user.
// Invariant: a failed exchange leaves the Session failed for good.
// Invariant: passwords and salted passwords are never stored or logged; an
// AuthError's client text never tells an unknown user from a wrong password.
//
// # Concurrency
//
// A Session belongs to one connection's goroutine and is not safe for
// concurrent use. A FailureDelay is shared by a listener and locks itself.
// Everything else is a pure function.
package auth
