package auth

// This file owns password checks against SCRAM-only storage: SASL PLAIN
// (RFC 4616) on a Kafka connection and HTTP Basic on the HTTP API. Both
// receive the password itself and verify it against the user's stored
// SCRAM credential, preferring SCRAM-SHA-512.
//
// Invariant: a password is verified only against a credential the lookup
// returned for that user; an unknown user costs the same PBKDF2 work as a
// wrong password and gets the same text.

import (
	"bytes"
	"fmt"
)

// MechanismBasic names HTTP Basic in an AuthError.
const MechanismBasic = "HTTP Basic"

// plainOrder is the order in which a password is checked against a user's
// credentials: the stronger hash first, the other if the user has only it.
var plainOrder = [...]string{MechanismScramSHA512, MechanismScramSHA256}

// standInPlain is verified when the user does not exist, so that the
// answer takes about as long as a wrong password's. Its keys are zero: no
// password derives them.
func standInPlain() ScramCredential {
	return ScramCredential{
		Mechanism:  MechanismScramSHA512,
		Salt:       make([]byte, saltLen),
		Iterations: DefaultIterations,
		StoredKey:  make([]byte, 64),
		ServerKey:  make([]byte, 64),
	}
}

// verifyPassword checks user's password; on failure it returns the reason
// for the log.
func verifyPassword(lookup CredentialLookup, user, password string) (Principal, string, bool) {
	for _, mech := range plainOrder {
		cred, tenant, ok := lookup(mech, user)
		if !ok || cred.Mechanism != mech || tenant == "" {
			continue
		}
		if err := cred.Validate(); err != nil {
			return Principal{}, "stored credential unusable: " + err.Error(), false
		}
		if !cred.VerifyPassword(password) {
			return Principal{}, "wrong password (checked against " + mech + ")", false
		}
		return Principal{Tenant: tenant, User: user}, "", true
	}
	standInPlain().VerifyPassword(password)
	return Principal{}, "unknown user or no SCRAM credential", false
}

// CheckBasic checks an HTTP Basic user and password against the user's
// SCRAM credential (SCRAM-SHA-512 if present, else SCRAM-SHA-256) and
// returns the principal. A failure is an *AuthError whose text is the same
// for an unknown user and a wrong password. The caller answers 401 and
// should count the failure in a FailureDelay.
func CheckBasic(lookup CredentialLookup, user, password string) (Principal, error) {
	if user == "" || password == "" {
		return Principal{}, newAuthError(MechanismBasic, user, msgInvalidCredentials, "empty user or password")
	}
	p, reason, ok := verifyPassword(lookup, user, password)
	if !ok {
		return Principal{}, newAuthError(MechanismBasic, user, msgInvalidCredentials, reason)
	}
	return p, nil
}

// stepPlain verifies a PLAIN message: [authzid] NUL authcid NUL passwd.
func (s *Session) stepPlain(msg []byte) ([]byte, bool, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, s.fail(MechanismPlain, "", msgMalformed,
			fmt.Sprintf("PLAIN message has %d fields, want 3", len(parts)))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return nil, false, s.fail(MechanismPlain, user, msgInvalidCredentials, "empty user or password")
	}
	if authzid != "" && authzid != user {
		return nil, false, s.fail(MechanismPlain, user, "authorization id differs from user name",
			fmt.Sprintf("authorization id %q differs from user %q", authzid, user))
	}
	p, reason, ok := verifyPassword(s.cfg.Lookup, user, password)
	if !ok {
		return nil, false, s.fail(MechanismPlain, user, msgInvalidCredentials, reason)
	}
	if err := s.establish(p); err != nil {
		return nil, false, err
	}
	return nil, true, nil
}
