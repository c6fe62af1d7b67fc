package auth

// This file owns SCRAM credentials: making them from a password (or from a
// salted password, as Kafka's AlterUserScramCredentials sends it), checking
// them, and checking a password against them. The key derivation is
// xdg-go/scram's (PBKDF2 over the SASLprepped password); this file adds
// only the checks and the constant-time comparison.
//
// Invariant: a ScramCredential that passes Validate has a known mechanism,
// MinIterations <= Iterations <= MaxIterations, a non-empty salt, and a
// StoredKey and ServerKey of the mechanism's hash size.
// Invariant: no password and no salted password is kept in a credential.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"
)

// SASL mechanism names as Kafka spells them.
const (
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismPlain       = "PLAIN"
)

// Iteration bounds of a SCRAM credential, Kafka's: fewer than 4096 is too
// cheap to guess offline (RFC 7677 asks for at least 4096), and more than
// 16384 lets whoever sets a credential make every login cost the broker
// more PBKDF2 work than Kafka would.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 4096
)

// saltLen is the length of the random salt of a credential made here.
const saltLen = 32

// ErrInvalidCredential marks a credential that cannot be made or used: an
// unknown mechanism, an iteration count out of bounds, a password SASLprep
// refuses, keys of the wrong size.
var ErrInvalidCredential = errors.New("auth: invalid SCRAM credential")

// ScramCredential is what the cluster stores for one user and one SCRAM
// mechanism (RFC 5802 §3): enough to verify a client's proof and to prove
// the server knows the password, and never the password itself.
type ScramCredential struct {
	Mechanism  string // MechanismScramSHA256 or MechanismScramSHA512
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// scramHash returns the library's hash generator for a SCRAM mechanism.
func scramHash(mechanism string) (scram.HashGeneratorFcn, func() hash.Hash, error) {
	switch mechanism {
	case MechanismScramSHA256:
		return scram.SHA256, sha256.New, nil
	case MechanismScramSHA512:
		return scram.SHA512, sha512.New, nil
	}
	return nil, nil, fmt.Errorf("%w: unknown mechanism %q", ErrInvalidCredential, mechanism)
}

// NewScramCredential derives the stored credential of password for
// mechanism with a fresh random salt. The password is SASLprepped first
// (RFC 5802 §2.2), so a password SASLprep refuses (unassigned code points
// such as emoji, mixed-direction text) is refused here with
// ErrInvalidCredential. Clients that skip SASLprep (Kafka's own, franz-go)
// derive the same keys for every password that SASLprep leaves unchanged,
// which includes all printable ASCII.
func NewScramCredential(mechanism, password string, iterations int) (ScramCredential, error) {
	hg, _, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if password == "" {
		return ScramCredential{}, fmt.Errorf("%w: empty password", ErrInvalidCredential)
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, fmt.Errorf("auth: salt: %w", err)
	}
	stored, err := deriveStored(hg, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       salt,
		Iterations: iterations,
		StoredKey:  stored.StoredKey,
		ServerKey:  stored.ServerKey,
	}, nil
}

// ScramCredentialFromSaltedPassword builds the stored credential from a
// salted password (PBKDF2 output) and its salt, which is what Kafka's
// AlterUserScramCredentials (KIP-554) carries: the client derives the
// salted password so that the password never reaches the broker.
func ScramCredentialFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int) (ScramCredential, error) {
	_, newHash, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if len(salt) == 0 {
		return ScramCredential{}, fmt.Errorf("%w: empty salt", ErrInvalidCredential)
	}
	if len(saltedPassword) != newHash().Size() {
		return ScramCredential{}, fmt.Errorf("%w: salted password is %d bytes, %s needs %d",
			ErrInvalidCredential, len(saltedPassword), mechanism, newHash().Size())
	}
	clientKey := hmacSum(newHash, saltedPassword, "Client Key")
	h := newHash()
	h.Write(clientKey)
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  h.Sum(nil),
		ServerKey:  hmacSum(newHash, saltedPassword, "Server Key"),
	}, nil
}

func hmacSum(newHash func() hash.Hash, key []byte, msg string) []byte {
	mac := hmac.New(newHash, key)
	mac.Write([]byte(msg))
	return mac.Sum(nil)
}

func checkIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("%w: %d iterations, want %d to %d", ErrInvalidCredential, n, MinIterations, MaxIterations)
	}
	return nil
}

// deriveStored runs the library's derivation: SASLprep, PBKDF2, the two keys.
func deriveStored(hg scram.HashGeneratorFcn, password string, salt []byte, iterations int) (scram.StoredCredentials, error) {
	client, err := hg.NewClient("", password, "")
	if err != nil {
		// The library's message names no part of the password.
		return scram.StoredCredentials{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	stored, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("%w: %w", ErrInvalidCredential, err)
	}
	return stored, nil
}

// Validate checks that c can be used to authenticate (see the invariant).
// Credentials read from storage are validated before use, so a corrupt or
// hostile entry fails the login instead of costing unbounded PBKDF2 work.
func (c ScramCredential) Validate() error {
	_, newHash, err := scramHash(c.Mechanism)
	if err != nil {
		return err
	}
	if err := checkIterations(c.Iterations); err != nil {
		return err
	}
	if len(c.Salt) == 0 {
		return fmt.Errorf("%w: empty salt", ErrInvalidCredential)
	}
	size := newHash().Size()
	if len(c.StoredKey) != size || len(c.ServerKey) != size {
		return fmt.Errorf("%w: keys of %d and %d bytes, %s needs %d",
			ErrInvalidCredential, len(c.StoredKey), len(c.ServerKey), c.Mechanism, size)
	}
	return nil
}

// VerifyPassword reports whether password is the one c was made from: it
// derives the StoredKey with c's salt and iterations and compares it in
// constant time. It is how PLAIN and HTTP Basic check a password against
// SCRAM-only storage. An invalid credential verifies nothing.
func (c ScramCredential) VerifyPassword(password string) bool {
	if c.Validate() != nil || password == "" {
		return false
	}
	hg, _, err := scramHash(c.Mechanism)
	if err != nil {
		return false
	}
	stored, err := deriveStored(hg, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return hmac.Equal(stored.StoredKey, c.StoredKey)
}

// storedCredentials converts c to the library's form.
func (c ScramCredential) storedCredentials() scram.StoredCredentials {
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}
}
