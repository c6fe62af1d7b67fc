package meta

// Tests of etcd's client TLS, etcd's own authentication and the embedded
// members' peer TLS, over real embedded etcd members, and the checks of the
// security fields of Config. Certificates are made here with crypto/x509:
// meta's tests may not import the broker's certificate generator.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testCA is a throwaway ECDSA P-256 certificate authority writing PEM files
// into a test's temp dir.
type testCA struct {
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	CAFile string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	ca := &testCA{dir: t.TempDir(), cert: cert, key: key}
	ca.CAFile = ca.write(t, name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// issue makes a leaf certificate for 127.0.0.1 and localhost with the given
// usages and returns its certificate and key files.
func (ca *testCA) issue(t *testing.T, name string, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("leaf key: %v", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("leaf certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key: %v", err)
	}
	return ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

func (ca *testCA) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return path
}

var (
	serverAndClient = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientOnly      = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

// openErr opens cfg expecting a failure, closing the store if it opened.
func openErr(t *testing.T, cfg Config) error {
	t.Helper()
	s, err := Open(testContext(t), cfg, zerolog.Nop())
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded, want an error")
	}
	return err
}

// refusedNotTimedOut fails the test unless err is Open giving up at once on
// a refusal rather than waiting out its start timeout.
func refusedNotTimedOut(t *testing.T, err error, want ...string) {
	t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open waited out its deadline instead of reporting the refusal: %v", err)
	}
	for _, w := range want {
		if strings.Contains(err.Error(), w) {
			return
		}
	}
	t.Fatalf("Open error %q names none of %q", err, want)
}

// TestEtcdClientMutualTLS: an embedded member serving its client port with
// mutual TLS is reached by a store given its endpoint, the CA and a client
// certificate; without a client certificate, or trusting another CA, Open
// fails at once with the TLS error.
func TestEtcdClientMutualTLS(t *testing.T) {
	ca := newTestCA(t, "etcd")
	memberCert, memberKey := ca.issue(t, "member", serverAndClient...)
	cfg := embeddedConfig(t)
	cfg.CACertFile, cfg.CertFile, cfg.KeyFile = ca.CAFile, memberCert, memberKey
	member := openStore(t, cfg)
	eps := member.Client().Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "https://") {
		t.Fatalf("embedded member's client endpoints %v, want one https:// URL", eps)
	}
	ctx := testContext(t)

	clientCert, clientKey := ca.issue(t, "broker", clientOnly...)
	remote := openStore(t, Config{Endpoints: eps, CACertFile: ca.CAFile, CertFile: clientCert, KeyFile: clientKey,
		StartTimeout: testTimeout})
	if _, err := remote.CreateTopic(ctx, Topic{Name: "over-tls", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic over mutual TLS: %v", err)
	}
	if _, err := member.Topic(ctx, "over-tls"); err != nil {
		t.Fatalf("Topic on the member: %v", err)
	}

	t.Run("no client certificate", func(t *testing.T) {
		err := openErr(t, Config{Endpoints: eps, CACertFile: ca.CAFile, StartTimeout: testTimeout})
		refusedNotTimedOut(t, err, "certificate required", "bad certificate")
	})
	t.Run("server from another CA", func(t *testing.T) {
		other := newTestCA(t, "other")
		err := openErr(t, Config{Endpoints: eps, CACertFile: other.CAFile, CertFile: clientCert, KeyFile: clientKey,
			StartTimeout: testTimeout})
		refusedNotTimedOut(t, err, "x509: certificate signed by unknown authority")
	})
	t.Run("plain client on the TLS port", func(t *testing.T) {
		// Nothing tells this from an etcd that is still starting, so it
		// waits out its start timeout, then names the last error.
		plain := strings.Replace(eps[0], "https://", "http://", 1)
		err := openErr(t, Config{Endpoints: []string{plain}, StartTimeout: time.Second})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error") {
			t.Fatalf("Open error %v, want the deadline with the last connection error", err)
		}
	})
}

// TestEtcdPasswordAuth: with etcd's authentication enabled, a store logs in
// with Username and the first line of PasswordFile; a wrong password and a
// user without permission on the prefix fail Open at once, and the password
// never reaches the log.
func TestEtcdPasswordAuth(t *testing.T) {
	member := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	const prefix = "/authed/"
	const password = "s3cret-pa55"
	enableEtcdAuth(ctx, t, member.Client(), prefix, "broker", password)
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte(password+"\r\nignored second line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eps := member.Client().Endpoints()

	var logs syncBuffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	s, err := Open(ctx, Config{Endpoints: eps, Prefix: prefix, Username: "broker", PasswordFile: passwordFile,
		StartTimeout: testTimeout}, log)
	if err != nil {
		t.Fatalf("Open with username and password: %v", err)
	}
	if _, err := s.CreateTopic(ctx, Topic{Name: "authed", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic as the etcd user: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatal("the etcd password was logged")
	}

	t.Run("wrong password", func(t *testing.T) {
		wrong := filepath.Join(t.TempDir(), "wrong")
		if err := os.WriteFile(wrong, []byte("not-it\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := openErr(t, Config{Endpoints: eps, Prefix: prefix, Username: "broker", PasswordFile: wrong,
			StartTimeout: testTimeout})
		if !errors.Is(err, rpctypes.ErrAuthFailed) {
			t.Fatalf("Open error %v, want etcd's authentication failure", err)
		}
	})
	t.Run("no permission on the prefix", func(t *testing.T) {
		err := openErr(t, Config{Endpoints: eps, Prefix: "/elsewhere/", Username: "broker", PasswordFile: passwordFile,
			StartTimeout: testTimeout})
		refusedNotTimedOut(t, err, "permission denied")
	})
	t.Run("no credentials", func(t *testing.T) {
		err := openErr(t, Config{Endpoints: eps, Prefix: prefix, StartTimeout: testTimeout})
		refusedNotTimedOut(t, err, "user name is empty")
	})
}

// enableEtcdAuth turns on etcd's authentication: a root user, and user
// with a role that may read and write under prefix.
func enableEtcdAuth(ctx context.Context, t *testing.T, c *clientv3.Client, prefix, user, password string) {
	t.Helper()
	steps := []struct {
		what string
		do   func() error
	}{
		{"add root role", func() error { _, err := c.RoleAdd(ctx, "root"); return err }},
		{"add root user", func() error { _, err := c.UserAdd(ctx, "root", "root-password"); return err }},
		{"grant root role", func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err }},
		{"add role", func() error { _, err := c.RoleAdd(ctx, "sluice"); return err }},
		{"grant prefix", func() error {
			_, err := c.RoleGrantPermission(ctx, "sluice", prefix, clientv3.GetPrefixRangeEnd(prefix),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"add user", func() error { _, err := c.UserAdd(ctx, user, password); return err }},
		{"grant role", func() error { _, err := c.UserGrantRole(ctx, user, "sluice"); return err }},
		{"enable auth", func() error { _, err := c.AuthEnable(ctx); return err }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("etcd auth: %s: %v", s.what, err)
		}
	}
}

// TestEmbeddedPeerTLS: two embedded members with peer TLS form one cluster
// over https:// peer URLs, and their peer ports refuse a client without a
// certificate from the peer CA.
func TestEmbeddedPeerTLS(t *testing.T) {
	ca := newTestCA(t, "peers")
	peerCert, peerKey := ca.issue(t, "peer", serverAndClient...)
	stores := startClusterWith(t, 2, func(c *Config) {
		c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = peerCert, peerKey, ca.CAFile
	})
	peerAddr := strings.TrimPrefix(stores[0].etcd.Config().AdvertisePeerUrls[0].String(), "https://")
	ctx := testContext(t)
	list, err := stores[0].Client().MemberList(ctx)
	if err != nil {
		t.Fatalf("MemberList: %v", err)
	}
	if len(list.Members) != 2 {
		t.Fatalf("%d members, want 2", len(list.Members))
	}
	for _, m := range list.Members {
		for _, u := range m.PeerURLs {
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("member %s peer URL %q, want https://", m.Name, u)
			}
		}
	}
	// A write through one member is read through the other: raft runs over TLS.
	if _, err := stores[0].CreateTopic(ctx, Topic{Name: "peers", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := stores[1].Topic(ctx, "peers"); err != nil {
		t.Fatalf("Topic through the other member: %v", err)
	}

	roots, err := loadCAs(ca.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(peerCert, peerKey)
	if err != nil {
		t.Fatal(err)
	}
	get := func(certs []tls.Certificate) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}
		defer tr.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+peerAddr+"/version", nil)
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Transport: tr, Timeout: dialTimeout}).Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := get([]tls.Certificate{cert}); err != nil {
		t.Fatalf("peer port with the peer certificate: %v", err)
	}
	if err := get(nil); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("peer port without a certificate: %v, want a TLS refusal", err)
	}
}

// TestConfigValidateSecurity: each wrong combination of the TLS and
// credential fields is refused with a message naming what is wrong.
func TestConfigValidateSecurity(t *testing.T) {
	embedded := Config{DataDir: "/data", ListenClient: "127.0.0.1:2379", ListenPeer: "127.0.0.1:2380"}
	with := func(c Config, f func(*Config)) Config { f(&c); return c }
	peer := func(c *Config) { c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = "p.pem", "p.key", "pca.pem" }
	clientFiles := func(c *Config) { c.CACertFile, c.CertFile, c.KeyFile = "ca.pem", "c.pem", "c.key" }
	remote := func(eps ...string) Config { return Config{Endpoints: eps} }
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"https endpoint without files uses system roots", remote("https://etcd:2379"), ""},
		{"https endpoints with files", with(remote("https://a:2379", "https://b:2379"), clientFiles), ""},
		{"https endpoint with CA only", with(remote("https://a:2379"), func(c *Config) { c.CACertFile = "ca.pem" }), ""},
		{"http endpoint with password", with(remote("http://a:2379"), func(c *Config) { c.Username, c.PasswordFile = "u", "pw" }), ""},
		{"http endpoint with TLS files", with(remote("https://a:2379", "http://b:2379"), clientFiles),
			`etcd endpoint "http://b:2379" is http:// but etcd TLS files are given`},
		{"endpoint without scheme with TLS files", with(remote("b:2379"), clientFiles),
			`etcd endpoint "b:2379" has no scheme`},
		{"mixed schemes", remote("http://a:2379", "https://b:2379"), `mix http:// ("http://a:2379") and https:// ("https://b:2379")`},
		{"cert without key", with(remote("https://a:2379"), func(c *Config) { c.CertFile = "c.pem" }),
			`etcd cert file "c.pem" given without a key file`},
		{"key without cert", with(remote("https://a:2379"), func(c *Config) { c.KeyFile = "c.key" }),
			`etcd key file "c.key" given without a cert file`},
		{"username without password file", with(remote("http://a:2379"), func(c *Config) { c.Username = "u" }),
			`etcd username "u" given without a password file`},
		{"password file without username", with(remote("http://a:2379"), func(c *Config) { c.PasswordFile = "pw" }),
			`etcd password file "pw" given without a username`},
		{"peer TLS with endpoints", with(remote("https://a:2379"), peer), "peer TLS files apply to the embedded member only"},
		{"embedded mutual TLS", with(embedded, clientFiles), ""},
		{"embedded CA without cert", with(embedded, func(c *Config) { c.CACertFile = "ca.pem" }),
			`etcd CA file "ca.pem" given without a cert and key file`},
		{"embedded cert without CA", with(embedded, func(c *Config) { c.CertFile, c.KeyFile = "c.pem", "c.key" }),
			`etcd cert file "c.pem" given without a CA file`},
		{"embedded peer TLS alone", with(embedded, peer), ""},
		{"embedded peer TLS with https cluster", with(embedded, func(c *Config) {
			peer(c)
			c.InitialCluster = "1=https://127.0.0.1:2380,2=https://10.0.0.2:2380"
		}), ""},
		{"peer TLS with an http member", with(embedded, func(c *Config) {
			peer(c)
			c.InitialCluster = "1=https://127.0.0.1:2380,2=http://10.0.0.2:2380"
		}), `etcd initial cluster member 2 has peer URL "http://10.0.0.2:2380": with peer TLS every peer URL must be https://`},
		{"https member without peer TLS", with(embedded, func(c *Config) {
			c.InitialCluster = "1=https://127.0.0.1:2380"
		}), `etcd initial cluster member 1 has peer URL "https://127.0.0.1:2380": https:// needs the peer cert, key and trusted CA files`},
		{"peer TLS missing the CA", with(embedded, func(c *Config) { c.PeerCertFile, c.PeerKeyFile = "p.pem", "p.key" }),
			"etcd peer TLS needs a peer cert file, key file and trusted CA file; missing: peer trusted CA file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
}

// TestPeerTLSURLs: with peer TLS the embedded member listens on and
// advertises https:// peer URLs; with client TLS, https:// client URLs.
func TestPeerTLSURLs(t *testing.T) {
	cfg := Config{Name: "1", DataDir: "/data", ListenClient: "0.0.0.0:2379", ListenPeer: "10.0.0.1:2380",
		PeerCertFile: "p", PeerKeyFile: "k", PeerTrustedCAFile: "ca", CACertFile: "ca", CertFile: "c", KeyFile: "k"}
	if got := cfg.initialCluster(); got != "1=https://10.0.0.1:2380" {
		t.Errorf("initial cluster %q", got)
	}
	ec, err := embedConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ec.ListenPeerUrls[0].String(); got != "https://10.0.0.1:2380" {
		t.Errorf("listen peer URL %q", got)
	}
	if got := ec.AdvertiseClientUrls[0].String(); got != "https://10.0.0.1:2379" {
		t.Errorf("advertised client URL %q", got)
	}
	if !ec.PeerTLSInfo.ClientCertAuth || !ec.ClientTLSInfo.ClientCertAuth {
		t.Error("peer or client TLS does not require client certificates")
	}
}
