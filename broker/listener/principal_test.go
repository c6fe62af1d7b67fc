package listener

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

func TestPrincipalFromCert(t *testing.T) {
	spiffe, _ := url.Parse("spiffe://example.org/ns/team-a/sa/orders")
	for _, tc := range []struct {
		name   string
		cert   *x509.Certificate
		want   string
		wantOK bool
	}{
		{"CN first", &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, DNSNames: []string{"a.example"}, EmailAddresses: []string{"a@example.org"}}, "alice", true},
		{"CN trimmed", &x509.Certificate{Subject: pkix.Name{CommonName: "  alice "}}, "alice", true},
		{"DNS SAN without CN", &x509.Certificate{DNSNames: []string{"", "svc.team-a.example", "b.example"}, URIs: []*url.URL{spiffe}}, "svc.team-a.example", true},
		{"URI SAN before email", &x509.Certificate{URIs: []*url.URL{spiffe}, EmailAddresses: []string{"a@example.org"}}, "spiffe://example.org/ns/team-a/sa/orders", true},
		{"email SAN last", &x509.Certificate{Subject: pkix.Name{Organization: []string{"Team A"}}, EmailAddresses: []string{"a@example.org"}}, "a@example.org", true},
		{"nothing", &x509.Certificate{Subject: pkix.Name{Organization: []string{"Team A"}}}, "", false},
		{"blank CN and SANs", &x509.Certificate{Subject: pkix.Name{CommonName: " "}, DNSNames: []string{" "}}, "", false},
		{"nil", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := PrincipalFromCert(tc.cert)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("got %q %v, want %q %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// A certificate the client sent but nobody verified names no one.
func TestPeerPrincipalNeedsAVerifiedChain(t *testing.T) {
	alice := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}}
	if user, ok := PeerPrincipal(tls.ConnectionState{PeerCertificates: []*x509.Certificate{alice}}); ok {
		t.Fatalf("unverified certificate named %q", user)
	}
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{alice}, VerifiedChains: [][]*x509.Certificate{{alice}}}
	if user, ok := PeerPrincipal(cs); !ok || user != "alice" {
		t.Fatalf("verified certificate: %q %v", user, ok)
	}
}
