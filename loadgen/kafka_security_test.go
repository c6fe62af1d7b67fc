package loadgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecurityOpts: PLAINTEXT adds nothing; a bad mechanism, a missing
// password file and a CA file without a certificate are refused with what
// is wrong; the three mechanisms and TLS build options.
func TestSecurityOpts(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if opts, err := (Security{}).opts(nil); err != nil || len(opts) != 0 {
		t.Fatalf("PLAINTEXT: %d options, %v", len(opts), err)
	}
	for _, m := range []string{"SCRAM-SHA-256", "scram-sha-512", "PLAIN"} {
		opts, err := Security{TLS: true, SASLMechanism: m, SASLUser: "u", SASLPasswordFile: pw}.opts(nil)
		if err != nil || len(opts) != 2 {
			t.Fatalf("%s over TLS: %d options, %v", m, len(opts), err)
		}
	}
	for name, tc := range map[string]struct {
		sec  Security
		want string
	}{
		"mechanism":     {Security{SASLMechanism: "GSSAPI", SASLPasswordFile: pw}, `"GSSAPI"`},
		"password file": {Security{SASLMechanism: "PLAIN", SASLPasswordFile: filepath.Join(dir, "none")}, "SASL password"},
		"CA":            {Security{TLSCAFile: notPEM}, "holds no certificate"},
	} {
		if _, err := tc.sec.opts(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
	}
}
