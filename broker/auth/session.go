package auth

// This file owns the server side of SASL on one Kafka connection: the
// handshake, the SCRAM and PLAIN exchanges, the principal they establish,
// its lifetime, and re-authentication (KIP-368).
//
// Invariant: Principal reports ok only after a completed exchange whose
// proof (SCRAM) or password (PLAIN) verified against a credential the
// lookup returned for a user it knows; never for an unknown user, whatever
// the bytes.
// Invariant: once an exchange fails the session stays failed: every later
// call errors and Principal reports nothing.
// Invariant: re-authentication keeps the principal and the mechanism; a
// different one fails the session.
//
// A Session is not safe for concurrent use: the connection's reader
// goroutine owns it.

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xdg-go/scram"
)

// MaxAuthBytes bounds one SaslAuthenticate payload. SCRAM and PLAIN
// messages are a user name, a nonce and a proof or password: far below it.
const MaxAuthBytes = 8 << 10

// CredentialLookup finds a user's credential for one SCRAM mechanism
// (MechanismScramSHA256 or MechanismScramSHA512) and the tenant the user
// belongs to. ok is false when the user does not exist or has no
// credential for that mechanism. It is called on the connection's
// goroutine and must not block for long (the broker answers it from its
// cache of etcd).
type CredentialLookup func(mechanism, user string) (cred ScramCredential, tenant string, ok bool)

// SessionConfig is what a listener's sessions share.
type SessionConfig struct {
	// Mechanisms the listener enables, from MechanismScramSHA256,
	// MechanismScramSHA512 and MechanismPlain, in the order the handshake
	// lists them.
	Mechanisms []string
	// Lookup answers credential queries. Required.
	Lookup CredentialLookup
	// AllowPlain enables PLAIN, which sends the password itself: true on a
	// TLS listener, false without TLS unless --allow-plain-without-tls.
	// When false PLAIN is neither listed nor accepted.
	AllowPlain bool
	// SessionLifetime bounds how long an authentication holds
	// (--sasl-session-lifetime, KIP-368); 0 means for the connection's life.
	SessionLifetime time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand is the entropy for server nonces and the keys of the stand-in
	// credential of unknown users; nil means crypto/rand.
	Rand io.Reader
	// StrictScramNonce refuses the client-final nonce of librdkafka before
	// 2.6.1 (client nonce, then the whole server-first nonce) as Kafka 4
	// does (--sasl-scram-strict-nonce). False accepts that one form besides
	// RFC 5802's; see scram_legacy.go for why that is safe.
	StrictScramNonce bool
	// UnknownUserKey keys the salt shown for a user that does not exist,
	// so that it is stable across connections (as a real user's is) and
	// cannot be told apart from one. Brokers of a cluster may share one so
	// it is also stable across brokers and restarts; nil means a random key
	// per process.
	UnknownUserKey []byte
}

type sessionState int

const (
	stateStart         sessionState = iota // no handshake yet
	stateHandshaken                        // mechanism chosen, waiting for the first message
	stateScramFinal                        // SCRAM server-first sent, waiting for client-final
	stateAuthenticated                     // exchange complete; a new handshake re-authenticates
	stateFailed                            // an exchange failed; the connection must close
)

// Session is the SASL state of one connection.
type Session struct {
	cfg     SessionConfig
	now     func() time.Time
	rand    io.Reader
	enabled []string

	state     sessionState
	mechanism string                    // chosen by the handshake
	conv      *scram.ServerConversation // the SCRAM exchange under way
	candidate pendingUser               // who the SCRAM client-first named
	first     scramFirst                // what the SCRAM first round fixed

	principal     Principal
	authenticated bool      // principal is set; stays true through a re-authentication
	expiresAt     time.Time // zero: no lifetime
}

// pendingUser is the lookup's answer for the user a SCRAM client named.
type pendingUser struct {
	user   string
	tenant string
	known  bool
	cred   ScramCredential // the credential the exchange checks: the user's, or the stand-in
}

// NewSession starts the SASL state of a new connection.
func NewSession(cfg SessionConfig) (*Session, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("auth: session config: no credential lookup")
	}
	var enabled []string
	for _, m := range cfg.Mechanisms {
		switch m {
		case MechanismScramSHA256, MechanismScramSHA512, MechanismPlain:
		default:
			return nil, fmt.Errorf("auth: session config: unknown mechanism %q", m)
		}
		if slices.Contains(enabled, m) {
			return nil, fmt.Errorf("auth: session config: mechanism %q listed twice", m)
		}
		if m == MechanismPlain && !cfg.AllowPlain {
			continue
		}
		enabled = append(enabled, m)
	}
	if len(enabled) == 0 {
		return nil, errors.New("auth: session config: no SASL mechanism enabled")
	}
	if cfg.SessionLifetime < 0 {
		return nil, fmt.Errorf("auth: session config: negative session lifetime %v", cfg.SessionLifetime)
	}
	s := &Session{cfg: cfg, now: cfg.Now, rand: cfg.Rand, enabled: enabled}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	return s, nil
}

// Handshake answers SaslHandshake: it selects mechanism for the exchange
// that follows, and returns the enabled mechanisms for the response in
// every case. An unknown or disabled mechanism is an error wrapping
// ErrUnsupportedMechanism. A handshake in the middle of an exchange or
// after a failure wraps ErrIllegalState. After a completed exchange a
// handshake starts a re-authentication (KIP-368), which must name the
// same mechanism (an *AuthError otherwise, as Kafka refuses it).
func (s *Session) Handshake(mechanism string) (enabled []string, err error) {
	enabled = slices.Clone(s.enabled)
	switch s.state {
	case stateStart, stateAuthenticated:
	case stateFailed:
		return enabled, fmt.Errorf("%w: handshake after a failed authentication", ErrIllegalState)
	default:
		return enabled, fmt.Errorf("%w: handshake during an authentication exchange", ErrIllegalState)
	}
	if !slices.Contains(s.enabled, mechanism) {
		return enabled, fmt.Errorf("%w: %q (enabled: %s)", ErrUnsupportedMechanism, mechanism, strings.Join(s.enabled, ", "))
	}
	if s.state == stateAuthenticated && mechanism != s.mechanism {
		return enabled, s.fail(mechanism, s.principal.User, "re-authentication must use the same mechanism",
			fmt.Sprintf("re-authentication changed mechanism from %s to %s", s.mechanism, mechanism))
	}
	s.mechanism = mechanism
	s.conv = nil
	s.candidate = pendingUser{}
	s.first = scramFirst{}
	if mechanism != MechanismPlain {
		hg, _, err := scramHash(mechanism)
		if err != nil {
			return enabled, fmt.Errorf("auth: handshake: %w", err) // unreachable: enabled holds known names
		}
		srv, err := hg.NewServer(s.scramLookup(mechanism))
		if err != nil {
			return enabled, fmt.Errorf("auth: handshake: %w", err)
		}
		s.conv = srv.WithNonceGenerator(s.nonce).NewConversation()
	}
	s.state = stateHandshaken
	return enabled, nil
}

// Step answers one SaslAuthenticate: authBytes is the client's SASL
// message, resp the server's. SCRAM takes two steps (client-first →
// server-first, client-final → server-final with done), PLAIN one. A
// failure is an *AuthError (wrapping ErrAuthenticationFailed) whose text
// the client may see; the caller delays the answer (FailureDelay) and
// closes the connection. Step before a handshake or after done wraps
// ErrIllegalState.
func (s *Session) Step(authBytes []byte) (resp []byte, done bool, err error) {
	switch s.state {
	case stateHandshaken, stateScramFinal:
	case stateFailed:
		return nil, false, fmt.Errorf("%w: authenticate after a failed authentication", ErrIllegalState)
	default:
		return nil, false, fmt.Errorf("%w: authenticate without a handshake", ErrIllegalState)
	}
	if len(authBytes) > MaxAuthBytes {
		return nil, false, s.fail(s.mechanism, "", msgMalformed, fmt.Sprintf("message of %d bytes", len(authBytes)))
	}
	if s.mechanism == MechanismPlain {
		return s.stepPlain(authBytes)
	}
	if s.state == stateHandshaken {
		return s.stepScramFirst(authBytes)
	}
	return s.stepScramFinal(authBytes)
}

// Principal is the authenticated principal. While a re-authentication is
// under way it is still the one established before; after a failure, and
// once the session lifetime has run out (Expired at the clock's now), there
// is none, so a caller that forgets to check Expired still serves nothing.
func (s *Session) Principal() (Principal, bool) {
	if !s.authenticated || s.Expired(s.now()) {
		return Principal{}, false
	}
	return s.principal, true
}

// SessionLifetimeMs is the session_lifetime_ms of the SaslAuthenticate v1
// response that completes an exchange: the time left before the client must
// re-authenticate (the configured lifetime, counted from this exchange), or
// 0 when the lifetime is unlimited or nothing is authenticated.
func (s *Session) SessionLifetimeMs() int64 {
	if !s.authenticated || s.expiresAt.IsZero() {
		return 0
	}
	left := s.expiresAt.Sub(s.now()).Milliseconds()
	return max(left, 1) // 0 would tell the client "no limit"
}

// Expired reports whether the authentication has outlived the session
// lifetime at now. The connection then answers no request but a
// re-authentication (Kafka closes it; so does Sluice). A session that never
// authenticated has nothing to expire and reports false.
func (s *Session) Expired(now time.Time) bool {
	return s.authenticated && !s.expiresAt.IsZero() && !now.Before(s.expiresAt)
}

// Mechanism is the mechanism of the last handshake, for logs.
func (s *Session) Mechanism() string { return s.mechanism }

// fail ends the session and returns the client-safe error.
func (s *Session) fail(mechanism, user, client, reason string) error {
	s.state = stateFailed
	s.authenticated = false
	s.principal = Principal{}
	s.conv = nil
	return newAuthError(mechanism, user, client, reason)
}

// establish completes an exchange for p.
func (s *Session) establish(p Principal) error {
	if s.authenticated && p != s.principal {
		return s.fail(s.mechanism, p.User, "re-authentication must keep the same principal",
			fmt.Sprintf("re-authentication changed principal from %s (tenant %q) to %s (tenant %q)",
				s.principal, s.principal.Tenant, p, p.Tenant))
	}
	s.principal = p
	s.authenticated = true
	s.state = stateAuthenticated
	s.conv = nil
	s.expiresAt = time.Time{}
	if s.cfg.SessionLifetime > 0 {
		s.expiresAt = s.now().Add(s.cfg.SessionLifetime)
	}
	return nil
}

func (s *Session) stepScramFirst(msg []byte) ([]byte, bool, error) {
	if err := checkScramExtensions(msg); err != nil {
		return nil, false, s.fail(s.mechanism, "", msgMalformed, err.Error())
	}
	resp, err := s.conv.Step(string(msg))
	if err != nil {
		return nil, false, s.fail(s.mechanism, s.conv.Username(), msgMalformed, "client-first: "+err.Error())
	}
	// Kafka refuses an authorization id other than the user: a principal
	// acting for another needs delegation, which Sluice does not have.
	if z := s.conv.AuthzID(); z != "" && z != s.conv.Username() {
		return nil, false, s.fail(s.mechanism, s.conv.Username(), "authorization id differs from user name",
			fmt.Sprintf("authorization id %q differs from user %q", z, s.conv.Username()))
	}
	first, err := newScramFirst(string(msg), resp)
	if err != nil {
		return nil, false, s.fail(s.mechanism, s.conv.Username(), msgMalformed, "client-first: "+err.Error())
	}
	s.first = first
	s.state = stateScramFinal
	return []byte(resp), false, nil
}

func (s *Session) stepScramFinal(msg []byte) ([]byte, bool, error) {
	user := s.candidate.user
	resp, err := s.verifyFinal(string(msg))
	switch {
	case err != nil:
		return nil, false, s.fail(s.mechanism, user, msgInvalidCredentials, err.Error())
	case !s.candidate.known:
		// Unreachable but for a forged proof of a random key; refuse anyway.
		return nil, false, s.fail(s.mechanism, user, msgInvalidCredentials, "unknown user")
	}
	if err := s.establish(Principal{Tenant: s.candidate.tenant, User: user}); err != nil {
		return nil, false, err
	}
	return []byte(resp), true, nil
}

// verifyFinal checks a client-final and returns the server-final. The one
// legacy form of librdkafka before 2.6.1 is checked by verifyLegacyFinal
// (or refused under StrictScramNonce); every other message by the library.
func (s *Session) verifyFinal(msg string) (string, error) {
	if cf, err := parseLegacyClientFinal(msg); err == nil && s.first.isLegacyNonce(cf.nonce) {
		if s.cfg.StrictScramNonce {
			return "", errors.New("client-final: the nonce repeats the client nonce (librdkafka before 2.6.1), which --sasl-scram-strict-nonce refuses")
		}
		resp, err := verifyLegacyFinal(s.first, cf, s.candidate.cred)
		if err != nil {
			return "", fmt.Errorf("legacy client-final: %w", err)
		}
		return resp, nil
	}
	resp, err := s.conv.Step(msg)
	if err != nil {
		return "", fmt.Errorf("client-final: %w", err)
	}
	if !s.conv.Valid() {
		return "", errors.New("client-final: proof not verified")
	}
	return resp, nil
}

// checkScramExtensions refuses Kafka's tokenauth extension (KIP-48
// delegation tokens, which Sluice does not issue) in a client-first
// message: gs2-header "," n=user "," r=nonce ["," ext]...
func checkScramExtensions(msg []byte) error {
	fields := bytes.Split(msg, []byte(","))
	if len(fields) <= 4 {
		return nil
	}
	for _, f := range fields[4:] {
		if bytes.HasPrefix(f, []byte("tokenauth=")) && string(f) != "tokenauth=false" {
			return errors.New("delegation token authentication is not supported")
		}
	}
	return nil
}

// scramLookup adapts the CredentialLookup to the library for one
// mechanism. A user that does not exist gets a stand-in credential, so the
// exchange goes on to fail at the proof exactly as a wrong password does:
// same steps, same kind of salt, same text (RFC 5802 §9 suggests this).
func (s *Session) scramLookup(mechanism string) scram.CredentialLookup {
	return func(user string) (scram.StoredCredentials, error) {
		cred, tenant, ok := s.cfg.Lookup(mechanism, user)
		if ok && tenant != "" && cred.Mechanism == mechanism && cred.Validate() == nil {
			s.candidate = pendingUser{user: user, tenant: tenant, known: true, cred: cred}
			return cred.storedCredentials(), nil
		}
		standIn := s.standIn(mechanism, user)
		s.candidate = pendingUser{user: user, cred: standIn}
		return standIn.storedCredentials(), nil
	}
}

// standIn is the credential shown for a user that does not exist: a salt
// that depends only on the key, mechanism and user name (stable, like a
// real one) and random keys that no proof matches.
func (s *Session) standIn(mechanism, user string) ScramCredential {
	_, newHash, _ := scramHash(mechanism)
	size := newHash().Size()
	keys := make([]byte, 2*size)
	s.read(keys)
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       standInSalt(s.cfg.UnknownUserKey, mechanism, user),
		Iterations: DefaultIterations,
		StoredKey:  keys[:size],
		ServerKey:  keys[size:],
	}
}

func standInSalt(key []byte, mechanism, user string) []byte {
	if len(key) == 0 {
		key = processKey()
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(mechanism))
	mac.Write([]byte{0})
	mac.Write([]byte(user))
	return mac.Sum(nil)[:saltLen]
}

// processKey is the per-process stand-in salt key used when the config
// gives none: drawn once, never changed.
var processKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("auth: crypto/rand failed: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return k
})

// nonce is the server's part of the SCRAM nonce: 24 random bytes, base64
// (printable, no comma, as RFC 5802 requires).
func (s *Session) nonce() string {
	b := make([]byte, 24)
	s.read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Session) read(b []byte) {
	if _, err := io.ReadFull(s.rand, b); err != nil {
		// A nonce or key we cannot draw would be predictable: stop, as
		// crypto/rand itself does.
		panic("auth: entropy source failed: " + err.Error())
	}
}
