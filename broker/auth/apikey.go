package auth

// This file owns HTTP API keys: their form, making them and checking them
// against the stored hash.
//
// A key reads sk_<id>_<secret>:
//
//	sk_   fixed prefix, so that a leaked key is recognisable (secret scanners)
//	id    16 characters: 80 random bits, lower-case base32 (a–z, 2–7), no padding;
//	      the key's public name, under which its hash and user are stored
//	_     separator (not in the base32 alphabet)
//	secret 32 characters: 160 random bits, lower-case base32, no padding
//
// The cluster stores the id, the user and SHA-256 of the whole key, never
// the key. A slow password hash (bcrypt, scrypt, PBKDF2) exists to make
// guessing a low-entropy password from its hash expensive; a 160-bit random
// secret cannot be guessed however fast each guess is (2^160 SHA-256
// evaluations), so one SHA-256 protects it as well, and checks every HTTP
// request in microseconds instead of the tens of milliseconds bcrypt costs.
//
// Invariant: a key ParseAPIKey accepts has exactly the form above.

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
)

const (
	apiKeyPrefix    = "sk_"
	apiKeyIDBytes   = 10 // 80 bits: 16 base32 characters
	apiKeySecBytes  = 20 // 160 bits: 32 base32 characters
	apiKeyIDChars   = apiKeyIDBytes * 8 / 5
	apiKeySecChars  = apiKeySecBytes * 8 / 5
	apiKeyTotalSize = len(apiKeyPrefix) + apiKeyIDChars + 1 + apiKeySecChars
)

// ErrInvalidAPIKey marks a string that is not an API key of our form.
var ErrInvalidAPIKey = errors.New("auth: invalid API key")

var apiKeyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewAPIKey makes a key. key is shown to the user once; id and hash are
// what the cluster stores.
func NewAPIKey() (key, id string, hash []byte, err error) {
	raw := make([]byte, apiKeyIDBytes+apiKeySecBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", "", nil, fmt.Errorf("auth: api key: %w", err)
	}
	id = apiKeyEncoding.EncodeToString(raw[:apiKeyIDBytes])
	key = apiKeyPrefix + id + "_" + apiKeyEncoding.EncodeToString(raw[apiKeyIDBytes:])
	sum := sha256.Sum256([]byte(key))
	return key, id, sum[:], nil
}

// ParseAPIKey checks the form of key and returns its id, under which the
// caller finds the stored hash and user. It says nothing of validity:
// CheckAPIKey does.
func ParseAPIKey(key string) (id string, err error) {
	if len(key) != apiKeyTotalSize || !strings.HasPrefix(key, apiKeyPrefix) {
		return "", fmt.Errorf("%w: not of the form sk_<id>_<secret>", ErrInvalidAPIKey)
	}
	rest := key[len(apiKeyPrefix):]
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != apiKeyIDChars || len(secret) != apiKeySecChars {
		return "", fmt.Errorf("%w: not of the form sk_<id>_<secret>", ErrInvalidAPIKey)
	}
	if !isAPIKeyText(id) || !isAPIKeyText(secret) {
		return "", fmt.Errorf("%w: unexpected character", ErrInvalidAPIKey)
	}
	return id, nil
}

// isAPIKeyText reports whether s holds only the key alphabet. Any string
// of these characters of the lengths above is a valid encoding (the bit
// counts are multiples of 5), so no decode is needed.
func isAPIKeyText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// CheckAPIKey reports whether key hashes to hash, in time independent of
// where they differ.
func CheckAPIKey(key string, hash []byte) bool {
	if len(hash) != sha256.Size {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], hash) == 1
}
