package listener

// This file owns the mapping from a verified client certificate to the user
// it authenticates. Pure.
//
// Invariant: PeerPrincipal names a user only from a certificate that
// crypto/tls verified against the client CA, never from one merely sent.

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
)

// PrincipalFromCert is the user name a client certificate stands for, the
// first non-empty of, in this order:
//
//  1. the subject's common name (CN), as Kafka's default
//     ssl.principal.mapping.rules take it;
//  2. the first DNS name of the subject alternative names;
//  3. the first URI of the SANs (a SPIFFE ID, say), as written;
//  4. the first email address of the SANs.
//
// Surrounding spaces are trimmed. ok is false when none is there. The caller
// forms the principal User:<user>. It does not verify the certificate: use
// PeerPrincipal on a connection, or verify first.
func PrincipalFromCert(cert *x509.Certificate) (user string, ok bool) {
	if cert == nil {
		return "", false
	}
	if cn := strings.TrimSpace(cert.Subject.CommonName); cn != "" {
		return cn, true
	}
	for _, d := range cert.DNSNames {
		if d = strings.TrimSpace(d); d != "" {
			return d, true
		}
	}
	for _, u := range cert.URIs {
		if u != nil {
			if s := strings.TrimSpace(u.String()); s != "" {
				return s, true
			}
		}
	}
	for _, e := range cert.EmailAddresses {
		if e = strings.TrimSpace(e); e != "" {
			return e, true
		}
	}
	return "", false
}

// PeerPrincipal is the user of a TLS connection's client certificate
// (PrincipalFromCert), if the client sent one and it was verified against
// the client CA. A connection without a verified chain (no certificate, or a
// server configured not to verify) has no certificate principal.
func PeerPrincipal(cs tls.ConnectionState) (user string, ok bool) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false
	}
	return PrincipalFromCert(cs.VerifiedChains[0][0])
}
