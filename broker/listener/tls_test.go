package listener

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/listener/certgen"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

// pki is a CA and the files a TLS source reads: dir/server.crt,
// dir/server.key and dir/ca.crt.
type pki struct {
	t   *testing.T
	ca  *certgen.CA
	dir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := certgen.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, ca: ca, dir: t.TempDir()}
	p.writeCA(ca)
	return p
}

func (p *pki) certFile() string { return filepath.Join(p.dir, "server.crt") }
func (p *pki) keyFile() string  { return filepath.Join(p.dir, "server.key") }
func (p *pki) caFile() string   { return filepath.Join(p.dir, certgen.CACertFile) }

func (p *pki) issue(ca *certgen.CA, cn string, usage certgen.Usage) (certPEM, keyPEM []byte) {
	p.t.Helper()
	certPEM, keyPEM, err := ca.Issue(cn, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, usage, 30*time.Minute)
	if err != nil {
		p.t.Fatal(err)
	}
	return certPEM, keyPEM
}

// writeServer issues a broker certificate named cn and puts it in place,
// as a rotation would (each file renamed over the old one).
func (p *pki) writeServer(cn string) {
	p.t.Helper()
	certPEM, keyPEM := p.issue(p.ca, cn, certgen.Both)
	if err := certgen.WriteFiles(p.dir, "server", certPEM, keyPEM); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pki) writeCA(ca *certgen.CA) {
	p.t.Helper()
	if err := os.WriteFile(p.caFile(), ca.CertPEM(), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pki) clientCert(ca *certgen.CA, cn string, usage certgen.Usage) tls.Certificate {
	p.t.Helper()
	certPEM, keyPEM := p.issue(ca, cn, usage)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	return cert
}

// clientConfig trusts the test CA and, when a certificate is given,
// presents it. It is sent even when the server's list of acceptable CAs does
// not name its issuer (crypto/tls would send none then), so the tests see the
// server verify it.
func (p *pki) clientConfig(cert ...tls.Certificate) *tls.Config {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.ca.CertPEM())
	cfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if len(cert) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert[0], nil }
	}
	return cfg
}

// fakeClock is a clock the tests move; handshakes read it from the server's
// goroutines.
type fakeClock struct{ nanos atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.nanos.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) now() time.Time          { return time.Unix(0, c.nanos.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// handshake is what the test server saw of one connection.
type handshake struct {
	user string // from PeerPrincipal, "" without one
	err  error
}

// tlsServer accepts on 127.0.0.1, completes each handshake, writes the
// client's certificate principal (or "-") and a newline, and reports it.
type tlsServer struct {
	addr string
	seen chan handshake
}

func startServer(t *testing.T, cfg *tls.Config) *tlsServer {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{addr: ln.Addr().String(), seen: make(chan handshake, 64)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				tc := conn.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(waitFor))
				if err := tc.Handshake(); err != nil {
					s.seen <- handshake{err: err}
					return
				}
				user, _ := PeerPrincipal(tc.ConnectionState()) // "" without one
				s.seen <- handshake{user: user}
				_, _ = tc.Write([]byte("user=" + user + "\n"))
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return s
}

// next is the server's view of the next connection.
func (s *tlsServer) next(t *testing.T) handshake {
	t.Helper()
	select {
	case h := <-s.seen:
		return h
	case <-time.After(waitFor):
		t.Fatal("the server saw no handshake")
		return handshake{}
	}
}

// dial makes a new connection, reads the server's line and answers the CN
// of the certificate the server presented and the line.
func dial(t *testing.T, addr string, cfg *tls.Config) (servedCN, line string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitFor))
	tc := conn.(*tls.Conn)
	// In TLS 1.3 a refused client certificate shows on the first read.
	line, err = bufio.NewReader(tc).ReadString('\n')
	if err != nil {
		return "", "", err
	}
	return tc.ConnectionState().PeerCertificates[0].Subject.CommonName, strings.TrimSpace(line), nil
}

func mustServe(t *testing.T, srv *tlsServer, cfg *tls.Config, wantCN string) {
	t.Helper()
	cn, _, err := dial(t, srv.addr, cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	srv.next(t)
	if cn != wantCN {
		t.Fatalf("served %q, want %q", cn, wantCN)
	}
}

func TestTLSSourceServesARotatedCertificateWithoutRestart(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	var reloaded atomic.Value
	src, err := NewTLSSource(p.certFile(), p.keyFile(), "", OnReload(func(leaf *x509.Certificate) {
		reloaded.Store(leaf.Subject.CommonName)
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, src.ServerConfig())
	client := p.clientConfig()
	mustServe(t, srv, client, "broker-1")

	p.writeServer("broker-2")
	deadline := time.Now().Add(waitFor)
	for {
		cn, _, err := dial(t, srv.addr, client)
		if err != nil {
			t.Fatalf("dial during rotation: %v", err)
		}
		srv.next(t)
		if cn == "broker-2" {
			break
		}
		if cn != "broker-1" {
			t.Fatalf("served %q", cn)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving broker-1 %v after the files were replaced", waitFor)
		}
		time.Sleep(20 * time.Millisecond) // pacing between polls, not a wait for an outcome
	}
	if got := reloaded.Load(); got != "broker-2" {
		t.Errorf("OnReload saw %v, want broker-2", got)
	}
	if got := src.Leaf().Subject.CommonName; got != "broker-2" {
		t.Errorf("Leaf is %q", got)
	}
}

func TestTLSSourceChecksFilesAtMostOncePerInterval(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	clock := newFakeClock()
	src, err := NewTLSSource(p.certFile(), p.keyFile(), "", WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, src.ServerConfig())
	client := p.clientConfig()

	p.writeServer("broker-2")
	mustServe(t, srv, client, "broker-1")
	clock.advance(CheckInterval - time.Millisecond)
	mustServe(t, srv, client, "broker-1")
	clock.advance(time.Millisecond)
	mustServe(t, srv, client, "broker-2")
}

func TestTLSSourceKeepsTheOldCertificateWhenAReloadFails(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	clock := newFakeClock()
	var mu sync.Mutex
	var reported []error
	src, err := NewTLSSource(p.certFile(), p.keyFile(), "", WithClock(clock.now), OnReloadError(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	reports := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), reported...)
	}
	srv := startServer(t, src.ServerConfig())
	client := p.clientConfig()
	oldKey, err := os.ReadFile(p.keyFile())
	if err != nil {
		t.Fatal(err)
	}

	// An unparsable certificate file.
	if err := os.WriteFile(p.certFile(), []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock.advance(CheckInterval)
	mustServe(t, srv, client, "broker-1")
	if r := reports(); len(r) != 1 || !strings.Contains(r[0].Error(), "load TLS certificate") {
		t.Fatalf("reported %v, want one load error", r)
	}
	// Retried at the next check, but the same error is not reported again.
	clock.advance(CheckInterval)
	mustServe(t, srv, client, "broker-1")
	if err := src.Reload(); err == nil {
		t.Fatal("Reload of a bad file returned no error")
	}
	if r := reports(); len(r) != 1 {
		t.Fatalf("reported %d errors, want the first one only: %v", len(r), r)
	}

	// Half a rotation: a new certificate with the old key.
	certPEM, _ := p.issue(p.ca, "broker-2", certgen.Both)
	if err := certgen.WriteFiles(p.dir, "server", certPEM, oldKey); err != nil {
		t.Fatal(err)
	}
	clock.advance(CheckInterval)
	mustServe(t, srv, client, "broker-1")

	// A missing file.
	if err := os.Remove(p.certFile()); err != nil {
		t.Fatal(err)
	}
	clock.advance(CheckInterval)
	mustServe(t, srv, client, "broker-1")
	r := reports()
	if len(r) != 3 || !errors.Is(r[2], os.ErrNotExist) {
		t.Fatalf("reported %v, want three errors, the last ErrNotExist", r)
	}

	// A good certificate again is served.
	p.writeServer("broker-3")
	clock.advance(CheckInterval)
	mustServe(t, srv, client, "broker-3")
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload of good files: %v", err)
	}
}

func TestTLSSourceMutualTLS(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	other, err := certgen.NewCA("another CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, required := range []bool{true, false} {
		name := "required"
		opts := []Option{RequireClientCert()}
		if !required {
			name, opts = "if given", nil
		}
		t.Run(name, func(t *testing.T) {
			src, err := NewTLSSource(p.certFile(), p.keyFile(), p.caFile(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, src.ServerConfig())

			_, line, err := dial(t, srv.addr, p.clientConfig())
			h := srv.next(t)
			if required {
				if err == nil || h.err == nil {
					t.Fatalf("a client without a certificate got through: client %v, server %v", err, h.err)
				}
			} else if err != nil || h.err != nil || h.user != "" || line != "user=" {
				t.Fatalf("a client without a certificate: client %v, server %+v, line %q; want through with no principal", err, h, line)
			}

			_, line, err = dial(t, srv.addr, p.clientConfig(p.clientCert(p.ca, "alice", certgen.Client)))
			if h := srv.next(t); err != nil || h.err != nil || h.user != "alice" || line != "user=alice" {
				t.Fatalf("alice: client %v, server %+v, line %q", err, h, line)
			}

			for _, bad := range []struct {
				name string
				cert tls.Certificate
			}{
				{"another CA", p.clientCert(other, "mallory", certgen.Client)},
				{"server-only usage", p.clientCert(p.ca, "bob", certgen.Server)},
			} {
				_, _, err := dial(t, srv.addr, p.clientConfig(bad.cert))
				if h := srv.next(t); err == nil || h.err == nil {
					t.Errorf("%s: accepted (client %v, server %+v)", bad.name, err, h)
				}
			}
		})
	}
}

func TestTLSSourceReloadsTheClientCA(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	clock := newFakeClock()
	src, err := NewTLSSource(p.certFile(), p.keyFile(), p.caFile(), RequireClientCert(), WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, src.ServerConfig())
	next, err := certgen.NewCA("next CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice := p.clientConfig(p.clientCert(p.ca, "alice", certgen.Client))
	bob := p.clientConfig(p.clientCert(next, "bob", certgen.Client))

	_, _, errAlice := dial(t, srv.addr, alice)
	srv.next(t)
	_, _, errBob := dial(t, srv.addr, bob)
	srv.next(t)
	if errAlice != nil || errBob == nil {
		t.Fatalf("before: alice %v, bob %v; want alice in, bob out", errAlice, errBob)
	}

	p.writeCA(next)
	clock.advance(CheckInterval)
	_, _, errAlice = dial(t, srv.addr, alice)
	srv.next(t)
	_, line, errBob := dial(t, srv.addr, bob)
	srv.next(t)
	if errAlice == nil || errBob != nil || line != "user=bob" {
		t.Fatalf("after: alice %v, bob %v %q; want alice out, bob in", errAlice, errBob, line)
	}
}

func TestTLSSourceClientConfigDialsAnotherBroker(t *testing.T) {
	a := newPKI(t)
	a.writeServer("broker-a")
	srcA, err := NewTLSSource(a.certFile(), a.keyFile(), a.caFile(), RequireClientCert())
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, srcA.ServerConfig())

	// Broker B: another directory, a certificate from the same CA.
	b := &pki{t: t, ca: a.ca, dir: t.TempDir()}
	b.writeCA(a.ca)
	b.writeServer("broker-b")
	srcB, err := NewTLSSource(b.certFile(), b.keyFile(), b.caFile(), RequireClientCert())
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"localhost", "127.0.0.1"} {
		cn, line, err := dial(t, srv.addr, srcB.ClientConfig(name))
		h := srv.next(t)
		if err != nil || cn != "broker-a" || line != "user=broker-b" || h.user != "broker-b" {
			t.Fatalf("server name %s: %v, served %q, line %q, server %+v", name, err, cn, line, h)
		}
	}
	for _, name := range []string{"other.example", ""} {
		_, _, err := dial(t, srv.addr, srcB.ClientConfig(name))
		srv.next(t)
		if err == nil {
			t.Fatalf("server name %q: the broker's certificate was accepted", name)
		}
	}

	// A broker whose CA does not sign broker A's certificate refuses it.
	c := &pki{t: t, ca: a.ca, dir: t.TempDir()}
	c.writeServer("broker-c")
	foreign, err := certgen.NewCA("foreign", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c.writeCA(foreign)
	srcC, err := NewTLSSource(c.certFile(), c.keyFile(), c.caFile())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = dial(t, srv.addr, srcC.ClientConfig("localhost"))
	srv.next(t)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("dial with a foreign CA: %v, want UnknownAuthorityError", err)
	}
}

func TestTLSSourceVersions(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	src, err := NewTLSSource(p.certFile(), p.keyFile(), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, src.ServerConfig())

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	conn, err := (&tls.Dialer{Config: p.clientConfig()}).DialContext(ctx, "tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	if v := conn.(*tls.Conn).ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("negotiated %s, want TLS 1.3", tls.VersionName(v))
	}
	conn.Close()
	srv.next(t)

	old := p.clientConfig()
	old.MaxVersion = tls.VersionTLS11
	old.MinVersion = tls.VersionTLS10
	if _, _, err := dial(t, srv.addr, old); err == nil {
		t.Fatal("a TLS 1.1 client was served")
	}
	srv.next(t)

	tls12 := p.clientConfig()
	tls12.MaxVersion = tls.VersionTLS12
	mustServe(t, srv, tls12, "broker-1")
}

func TestNewTLSSourceErrors(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	otherKey := filepath.Join(p.dir, "other.key")
	_, keyPEM := p.issue(p.ca, "x", certgen.Server)
	if err := os.WriteFile(otherKey, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	emptyCA := filepath.Join(p.dir, "empty.crt")
	if err := os.WriteFile(emptyCA, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		cert, key, ca    string
		opts             []Option
		want             string
		wantNotExistWrap bool
	}{
		{"no key file", p.certFile(), "", "", nil, "needs both a certificate file and a key file", false},
		{"missing cert", filepath.Join(p.dir, "nope.crt"), p.keyFile(), "", nil, "nope.crt", true},
		{"missing CA", p.certFile(), p.keyFile(), filepath.Join(p.dir, "nope-ca.crt"), nil, "nope-ca.crt", true},
		{"key of another certificate", p.certFile(), otherKey, "", nil, "private key does not match public key", false},
		{"CA file without certificates", p.certFile(), p.keyFile(), emptyCA, nil, "no PEM certificate", false},
		{"required without CA", p.certFile(), p.keyFile(), "", []Option{RequireClientCert()}, "needs a client CA file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTLSSource(tc.cert, tc.key, tc.ca, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
			if tc.wantNotExistWrap && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("err %v does not wrap ErrNotExist", err)
			}
		})
	}
}

// The HTTP listener: net/http serves over ServerConfig (HTTP/1.1, as it
// negotiates no ALPN), and a handler finds the client certificate's user.
func TestTLSSourceServesHTTP(t *testing.T) {
	p := newPKI(t)
	p.writeServer("broker-1")
	src, err := NewTLSSource(p.certFile(), p.keyFile(), p.caFile())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		TLSConfig:         src.ServerConfig(),
		ReadHeaderTimeout: waitFor,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, ok := PeerPrincipal(*r.TLS)
			if !ok {
				user = "anonymous"
			}
			_, _ = io.WriteString(w, r.Proto+" "+user)
		}),
	}
	done := make(chan error, 1)
	go func() { done <- hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = hs.Close()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Error("the HTTP server did not stop")
		}
	})
	for _, tc := range []struct {
		cfg  *tls.Config
		want string
	}{
		{p.clientConfig(), "HTTP/1.1 anonymous"},
		{p.clientConfig(p.clientCert(p.ca, "alice", certgen.Client)), "HTTP/1.1 alice"},
	} {
		client := &http.Client{Timeout: waitFor, Transport: &http.Transport{TLSClientConfig: tc.cfg, ForceAttemptHTTP2: true}}
		resp, err := client.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		client.CloseIdleConnections()
		if err != nil || string(body) != tc.want {
			t.Fatalf("body %q (%v), want %q", body, err, tc.want)
		}
	}
}
