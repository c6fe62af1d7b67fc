package auth

// This file owns the one SCRAM client-final that Sluice accepts besides
// RFC 5802's: librdkafka before 2.6.1 (librdkafka PR 4895) sends in
// client-final r= its own client nonce followed by the whole nonce of
// server-first, that is clientNonce + (clientNonce + serverNonce). Kafka
// 3.x accepted it (it checked that the nonce ends with the server's);
// Kafka 4 refuses it, and so does Sluice with StrictScramNonce
// (--sasl-scram-strict-nonce). Every other conversation, and every
// conversation under the strict setting, is xdg-go/scram's.
//
// Why accepting it keeps SCRAM's guarantees: the legacy nonce still
// contains this conversation's fresh server nonce, whole and in place, so
// a client-final made for another conversation does not match it; and the
// proof is verified over the AuthMessage built from exactly the bytes the
// client sent (its client-first-bare, the server-first this session sent,
// its client-final without the proof), so a final message replayed from
// another conversation carries a proof over another AuthMessage and fails
// (the class of CVE-2024-56128, where Kafka accepted any nonce that merely
// ended with the server's, stays closed: here the nonce must be exactly the
// one legacy form, nothing looser). The proof check is RFC 5802 §3's, done
// with crypto/hmac, crypto/sha256 or crypto/sha512 and crypto/subtle, since
// the library checks the nonce strictly and offers no hook.
//
// Invariant: verifyLegacyFinal accepts only a message of exactly three
// fields "c=<base64 gs2 header>,r=<clientNonce><clientNonce><serverNonce>,
// p=<base64 proof>" with a non-empty client nonce, a channel binding equal
// to this conversation's gs2 header, and a proof whose H(proof XOR
// HMAC(StoredKey, AuthMessage)) equals StoredKey (constant time).

import (
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// scramFirst is what a SCRAM conversation's first round fixed, kept so
// that a legacy client-final can be verified without the library.
type scramFirst struct {
	gs2Header       string // "n,," or "y,," or "n,a=<authzid>,"
	clientFirstBare string // client-first without the gs2 header
	clientNonce     string // r= of client-first
	serverFirst     string // the server-first message sent, r=…,s=…,i=…
	nonce           string // r= of server-first: clientNonce + serverNonce
}

// newScramFirst records a client-first that the library accepted and the
// server-first it answered. Both are well formed by then; anything else
// is reported, never guessed.
func newScramFirst(clientFirst, serverFirst string) (scramFirst, error) {
	fields := strings.SplitN(clientFirst, ",", 3)
	if len(fields) != 3 {
		return scramFirst{}, errors.New("client-first has no gs2 header")
	}
	bare := fields[2]
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[1], "r=") {
		return scramFirst{}, errors.New("client-first has no nonce")
	}
	snonce, _, _ := strings.Cut(serverFirst, ",")
	if !strings.HasPrefix(snonce, "r=") {
		return scramFirst{}, errors.New("server-first has no nonce")
	}
	return scramFirst{
		gs2Header:       fields[0] + "," + fields[1] + ",",
		clientFirstBare: bare,
		clientNonce:     attrs[1][len("r="):],
		serverFirst:     serverFirst,
		nonce:           snonce[len("r="):],
	}, nil
}

// clientFinal is a client-final message split as RFC 5802 §7 draws it.
type clientFinal struct {
	channelBinding []byte // c=, decoded
	nonce          string // r=
	proof          []byte // p=, decoded
	withoutProof   string // the message up to the comma before p=
}

// parseLegacyClientFinal splits msg into exactly c=, r= and p=: the form
// librdkafka sends. Extensions, which the legacy clients never send, make
// it fail, and such a message goes to the library's strict check.
func parseLegacyClientFinal(msg string) (clientFinal, error) {
	fields := strings.Split(msg, ",")
	if len(fields) != 3 {
		return clientFinal{}, fmt.Errorf("client-final has %d fields, want c=, r=, p=", len(fields))
	}
	c, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return clientFinal{}, errors.New("client-final does not start with c=")
	}
	cbind, err := base64.StdEncoding.DecodeString(c)
	if err != nil {
		return clientFinal{}, fmt.Errorf("client-final c=: %w", err)
	}
	nonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok {
		return clientFinal{}, errors.New("client-final has no r= after c=")
	}
	p, ok := strings.CutPrefix(fields[2], "p=")
	if !ok {
		return clientFinal{}, errors.New("client-final does not end with p=")
	}
	proof, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return clientFinal{}, fmt.Errorf("client-final p=: %w", err)
	}
	return clientFinal{
		channelBinding: cbind,
		nonce:          nonce,
		proof:          proof,
		withoutProof:   fields[0] + "," + fields[1],
	}, nil
}

// isLegacyNonce reports whether nonce is the legacy librdkafka form for
// this conversation: the client nonce, then the whole nonce server-first
// sent. An empty client nonce makes the form the RFC one; it is left to
// the library.
func (f scramFirst) isLegacyNonce(nonce string) bool {
	return f.clientNonce != "" && nonce == f.clientNonce+f.nonce
}

// verifyLegacyFinal checks a legacy client-final against cred and returns
// the server-final "v=<ServerSignature>". The caller has checked
// isLegacyNonce; this checks it again so that it stands alone.
func verifyLegacyFinal(f scramFirst, cf clientFinal, cred ScramCredential) (string, error) {
	_, newHash, err := scramHash(cred.Mechanism)
	if err != nil {
		return "", err
	}
	if !f.isLegacyNonce(cf.nonce) {
		return "", errors.New("nonce received did not match nonce sent")
	}
	// The library binds the gs2 header the same way, in constant time; a
	// "p=" header (channel binding) never gets here, the library refuses it
	// at client-first as Sluice advertises no -PLUS mechanism.
	if !hmac.Equal(cf.channelBinding, []byte(f.gs2Header)) || strings.HasPrefix(f.gs2Header, "p") {
		return "", errors.New("channel binding mismatch")
	}
	size := newHash().Size()
	if len(cf.proof) != size || len(cred.StoredKey) != size || len(cred.ServerKey) != size {
		return "", fmt.Errorf("proof of %d bytes, %s needs %d", len(cf.proof), cred.Mechanism, size)
	}
	authMessage := []byte(f.clientFirstBare + "," + f.serverFirst + "," + cf.withoutProof)
	mac := hmac.New(newHash, cred.StoredKey)
	mac.Write(authMessage)
	clientSignature := mac.Sum(nil)
	clientKey := make([]byte, size)
	subtle.XORBytes(clientKey, cf.proof, clientSignature)
	h := newHash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), cred.StoredKey) != 1 {
		return "", errors.New("challenge proof invalid")
	}
	mac = hmac.New(newHash, cred.ServerKey)
	mac.Write(authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
