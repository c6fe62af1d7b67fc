package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// scramClientProof computes a SCRAM client-final for whatever nonce and
// channel binding the caller chooses, signed over exactly those bytes as a
// client that knows password would: RFC 5802 §3 by hand, so the test can
// build the forms no library client sends. It returns the message and the
// ServerSignature a correct server answers with.
func scramClientProof(t testing.TB, mech, password, clientFirst, serverFirst, cbind, nonce string) (final, serverSig string) {
	t.Helper()
	_, newHash, err := scramHash(mech)
	if err != nil {
		t.Fatal(err)
	}
	var salt []byte
	iters := 0
	for _, f := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			if salt, err = base64.StdEncoding.DecodeString(f[2:]); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(f, "i="):
			if iters, err = strconv.Atoi(f[2:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	salted, err := pbkdf2.Key(newHash, password, salt, iters, newHash().Size())
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(newHash, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	h := newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(cbind)) + ",r=" + nonce
	bare := strings.SplitN(clientFirst, ",", 3)[2] // client-first without the gs2 header
	authMessage := bare + "," + serverFirst + "," + withoutProof
	sig := mac(storedKey, authMessage)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof),
		"v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
}

// A client-final in librdkafka's pre-2.6.1 form (r= client nonce, then
// the whole server nonce) is accepted by default and refused under
// StrictScramNonce; every variation of it, with a valid proof over its own
// bytes, is refused.
func TestScramLegacyClientFinal(t *testing.T) {
	const cnonce = "rdkafkaclientnonce"
	for _, mech := range scramMechanisms {
		for _, tc := range []struct {
			name     string
			strict   bool
			user     string
			password string
			cbind    string
			nonce    func(full string) string
			mangle   func(final string) string
			ok       bool
		}{
			{name: "legacy form", nonce: func(full string) string { return cnonce + full }, ok: true},
			{name: "RFC form", nonce: func(full string) string { return full }, ok: true},
			{name: "RFC form, strict", strict: true, nonce: func(full string) string { return full }, ok: true},
			{name: "legacy form, strict", strict: true, nonce: func(full string) string { return cnonce + full }},
			{name: "legacy form, wrong password", password: "wrong", nonce: func(full string) string { return cnonce + full }},
			{name: "legacy form, flipped proof", nonce: func(full string) string { return cnonce + full },
				mangle: func(f string) string { b := []byte(f); b[len(b)-5] ^= 1; return string(b) }},
			{name: "legacy form, wrong server nonce", nonce: func(full string) string {
				return cnonce + full[:len(full)-1] + string(full[len(full)-1]^1)
			}},
			{name: "legacy form, unknown user", user: "mallory", nonce: func(full string) string { return cnonce + full }},
			{name: "legacy form, channel binding y", cbind: "y,,", nonce: func(full string) string { return cnonce + full }},
			{name: "legacy form with an extension", nonce: func(full string) string { return cnonce + full },
				mangle: func(f string) string {
					i := strings.LastIndex(f, ",p=")
					return f[:i] + ",x=1" + f[i:]
				}},
			{name: "other prefix", nonce: func(full string) string { return "x" + full }},
			{name: "client nonce twice, suffix", nonce: func(full string) string { return full + cnonce }},
			{name: "client nonce three times", nonce: func(full string) string { return cnonce + cnonce + full }},
			{name: "part of the client nonce", nonce: func(full string) string { return cnonce[1:] + full }},
			{name: "server nonce only", nonce: func(full string) string { return full[len(cnonce):] }},
			{name: "server nonce twice", nonce: func(full string) string { return full + full[len(cnonce):] }},
		} {
			t.Run(mech+"/"+tc.name, func(t *testing.T) {
				s := newTestSession(t, func(c *SessionConfig) { c.StrictScramNonce = tc.strict })
				if _, err := s.Handshake(mech); err != nil {
					t.Fatal(err)
				}
				user, password, cbind := "alice", "alice-secret", "n,,"
				if tc.user != "" {
					user = tc.user
				}
				if tc.password != "" {
					password = tc.password
				}
				if tc.cbind != "" {
					cbind = tc.cbind
				}
				first := "n,,n=" + user + ",r=" + cnonce
				serverFirst, _, err := s.Step([]byte(first))
				if err != nil {
					t.Fatalf("client-first: %v", err)
				}
				full := strings.TrimPrefix(strings.SplitN(string(serverFirst), ",", 2)[0], "r=")
				final, wantSig := scramClientProof(t, mech, password, first, string(serverFirst), cbind, tc.nonce(full))
				if tc.mangle != nil {
					final = tc.mangle(final)
				}
				resp, done, err := s.Step([]byte(final))
				p, authenticated := s.Principal()
				if !tc.ok {
					if err == nil || done || authenticated || !errors.Is(err, ErrAuthenticationFailed) {
						t.Fatalf("client-final %q: done=%v principal=%v err=%v, want a refusal", final, done, p, err)
					}
					return
				}
				if err != nil || !done {
					t.Fatalf("client-final %q: done=%v err=%v", final, done, err)
				}
				if string(resp) != wantSig {
					t.Fatalf("server-final %q, want %q", resp, wantSig)
				}
				mustPrincipal(t, s, Principal{Tenant: "acme", User: "alice"})
			})
		}
	}
}

// The refusal under StrictScramNonce says why, for the broker's log.
func TestScramLegacyStrictReason(t *testing.T) {
	s := newTestSession(t, func(c *SessionConfig) { c.StrictScramNonce = true })
	if _, err := s.Handshake(MechanismScramSHA256); err != nil {
		t.Fatal(err)
	}
	first := "n,,n=alice,r=abc"
	serverFirst, _, err := s.Step([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	full := strings.TrimPrefix(strings.SplitN(string(serverFirst), ",", 2)[0], "r=")
	final, _ := scramClientProof(t, MechanismScramSHA256, "alice-secret", first, string(serverFirst), "n,,", "abc"+full)
	_, _, err = s.Step([]byte(final))
	var ae *AuthError
	if !errors.As(err, &ae) || !strings.Contains(ae.Reason, "sasl-scram-strict-nonce") {
		t.Fatalf("strict refusal: %v", err)
	}
}
