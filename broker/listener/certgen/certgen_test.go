package certgen

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func poolOf(t *testing.T, ca *CA) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CA PEM not accepted by a cert pool")
	}
	return pool
}

func TestIssuedCertificatesVerifyWithTheirUsages(t *testing.T) {
	ca, err := NewCA("sluice test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := poolOf(t, ca)
	serverOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	clientOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		usage      Usage
		serverAuth bool
		clientAuth bool
	}{
		{Server, true, false},
		{Client, false, true},
		{Both, true, true},
	} {
		t.Run(tc.usage.String(), func(t *testing.T) {
			certPEM, keyPEM, err := ca.Issue("broker-1", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, tc.usage, 30*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("issued pair is not a TLS key pair: %v", err)
			}
			cert := parseCert(t, certPEM)
			if cert.IsCA {
				t.Error("a leaf is marked as a CA")
			}
			if cert.Subject.CommonName != "broker-1" {
				t.Errorf("CN %q, want broker-1", cert.Subject.CommonName)
			}
			for _, c := range []struct {
				name  string
				usage []x509.ExtKeyUsage
				want  bool
			}{{"server auth", serverOnly, tc.serverAuth}, {"client auth", clientOnly, tc.clientAuth}} {
				_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: c.usage})
				if (err == nil) != c.want {
					t.Errorf("verify for %s: err %v, want ok=%v", c.name, err, c.want)
				}
			}
			for _, host := range []string{"localhost", "127.0.0.1"} {
				if err := cert.VerifyHostname(host); err != nil {
					t.Errorf("host %s: %v", host, err)
				}
			}
			if err := cert.VerifyHostname("other.example"); err == nil {
				t.Error("verified a host name that is not in the SANs")
			}
		})
	}
}

func TestIssuedCertificateRefusedByAnotherCA(t *testing.T) {
	ca1, err := NewCA("one", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := NewCA("two", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca1.Issue("alice", nil, nil, Client, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = parseCert(t, certPEM).Verify(x509.VerifyOptions{Roots: poolOf(t, ca2), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("verify against another CA: %v, want UnknownAuthorityError", err)
	}
}

func TestIssueRefusals(t *testing.T) {
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cn       string
		dns      []string
		usage    Usage
		validFor time.Duration
		want     string
	}{
		{"server without SAN", "broker", nil, Server, time.Minute, "needs a DNS name or IP address"},
		{"both without SAN", "broker", nil, Both, time.Minute, "needs a DNS name or IP address"},
		{"nothing to name", "", nil, Client, time.Minute, "no common name"},
		{"outlives CA", "alice", nil, Client, 2 * time.Hour, "ends after the CA's"},
		{"no validity", "alice", nil, Client, 0, "not positive"},
		{"unknown usage", "alice", []string{"a"}, Usage(9), time.Minute, "unknown usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ca.Issue(tc.cn, tc.dns, nil, tc.usage, tc.validFor)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := NewCA("", time.Hour); err == nil {
		t.Error("NewCA accepted an empty name")
	}
	if _, err := NewCA("ca", -time.Second); err == nil {
		t.Error("NewCA accepted a negative validity")
	}
}

func TestLoadCAIssuesFromTheSameAuthority(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := NewCA("cluster CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Certificate().Equal(ca.Certificate()) {
		t.Fatal("loaded CA certificate differs")
	}
	// A leaf issued by the loaded CA verifies against the original's PEM.
	certPEM, keyPEM, err := loaded.Issue("broker-2", []string{"localhost"}, nil, Both, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCert(t, certPEM).Verify(x509.VerifyOptions{Roots: poolOf(t, ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("leaf of the loaded CA: %v", err)
	}
	if err := WriteFiles(dir, "broker-2", certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{CACertFile: 0o644, CAKeyFile: 0o600, "broker-2.crt": 0o644, "broker-2.key": 0o600} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s mode %v, want %v", name, got, want)
		}
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "broker-2.crt"), filepath.Join(dir, "broker-2.key")); err != nil {
		t.Fatalf("written pair does not load: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("dir holds %d files, want 4 (no temporary files left)", len(entries))
	}
}

func TestLoadCARefusesAMismatchedKey(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ca.Issue("x", nil, nil, Client, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CAKeyFile), otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("LoadCA with another key: %v", err)
	}
	if _, err := LoadCA(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadCA of an empty dir: %v, want ErrNotExist", err)
	}
}

func TestWriteFilesRefusesAPath(t *testing.T) {
	if err := WriteFiles(t.TempDir(), "../x", nil, nil); err == nil {
		t.Fatal("WriteFiles accepted a name with a path")
	}
}
