package auth

// This file owns the package's error markers and the one error type a
// failed authentication returns.

import (
	"errors"
	"fmt"
)

// Error markers. The Kafka edge maps them to codes:
// ErrUnsupportedMechanism → UNSUPPORTED_SASL_MECHANISM,
// ErrIllegalState → ILLEGAL_SASL_STATE,
// ErrAuthenticationFailed → SASL_AUTHENTICATION_FAILED (the HTTP edge: 401).
// After any of them the Kafka connection is closed.
var (
	ErrUnsupportedMechanism = errors.New("auth: unsupported SASL mechanism")
	ErrIllegalState         = errors.New("auth: illegal SASL state")
	ErrAuthenticationFailed = errors.New("auth: authentication failed")
)

// AuthError is a failed authentication. Its Error text is safe to send to
// the client: it names the mechanism and a kind of failure, and is the same
// whether the user does not exist or the password is wrong. User and
// Reason are for the server's log only.
type AuthError struct {
	Mechanism string // SASL mechanism, or "HTTP Basic"
	User      string // the user name the client sent, if it got that far
	Reason    string // what went wrong, for the log; never sent to the client
	client    string // the client-safe text
}

// Client-safe texts. Every failure that could tell whether a user exists
// uses msgInvalidCredentials.
const (
	msgInvalidCredentials = "invalid credentials"
	msgMalformed          = "malformed authentication message"
)

func newAuthError(mechanism, user, client, reason string) *AuthError {
	return &AuthError{Mechanism: mechanism, User: user, Reason: reason, client: client}
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("Authentication failed: %s (%s)", e.client, e.Mechanism)
}

// Unwrap makes every AuthError match ErrAuthenticationFailed.
func (e *AuthError) Unwrap() error { return ErrAuthenticationFailed }
