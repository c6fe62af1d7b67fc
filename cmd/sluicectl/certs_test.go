package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCtl runs sluicectl in process with no server.
func runCtl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	s := streams{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = exitCode(run(context.Background(), args, s), &errb)
	return code, out.String(), errb.String()
}

// TestCertsCreate: the certificates made by `certs create` carry a real
// mutual-TLS handshake (a broker's certificate served, a client's presented
// and verified against the CA, its common name the principal), and a
// second run keeps what exists and adds only what is new.
func TestCertsCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if code, out, errs := runCtl(t, "certs", "create", "--dir", dir, "--brokers", "broker-1", "--clients", "alice"); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, f := range []string{"ca.crt", "ca.key", "broker-1.crt", "broker-1.key", "alice.crt", "alice.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	server, err := tls.LoadX509KeyPair(filepath.Join(dir, "broker-1.crt"), filepath.Join(dir, "broker-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := tls.LoadX509KeyPair(filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			peer <- "handshake: " + err.Error()
			return
		}
		peer <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(),
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{client}})
	if err != nil {
		t.Fatalf("dial with the broker's certificate named for 127.0.0.1: %v", err)
	}
	defer conn.Close()
	select {
	case got := <-peer:
		if got != "alice" {
			t.Fatalf("the server saw client %q, want alice", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no handshake within 10s")
	}

	// A second run keeps the CA and the existing certificates.
	before, _ := os.ReadFile(filepath.Join(dir, "broker-1.crt"))
	code, out, errs := runCtl(t, "certs", "create", "--dir", dir, "--brokers", "broker-1,broker-2")
	if code != 0 || !strings.Contains(out, "kept") || !strings.Contains(out, "broker-2.crt") {
		t.Fatalf("second run: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "broker-1.crt"))
	caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if !bytes.Equal(before, after) || !bytes.Equal(caPEM, caAfter) {
		t.Fatal("a second run replaced an existing certificate or the CA")
	}
	if code, _, errs := runCtl(t, "certs", "create"); code != 2 || !strings.Contains(errs, "--dir is required") {
		t.Fatalf("without --dir: exit %d, stderr %s", code, errs)
	}
}
