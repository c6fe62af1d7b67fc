package listener

// This file owns the TLS source: the certificate, key and client CA a
// listener serves, reloaded from their files when they change, and the
// tls.Configs built from them.
//
// Invariant: a handshake is always served a certificate and CA pool that
// loaded together without error; a failed reload changes neither.
// Invariant: the files are checked at most once per CheckInterval (by the
// injected clock), on the handshake that finds the interval gone.
// Invariant: a reload error is reported once until it changes or a reload
// succeeds.
//
// TLSSource.mu guards the check state (stamps, lastCheck, lastErr) and is
// held while the files are read, at most once per interval; the current
// generation is an atomic pointer, read without the lock.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckInterval is how often, at most, the TLS source looks at its files.
const CheckInterval = time.Second

// TLSSource serves a certificate, key and client CA from files, reloading
// them when they change. It starts no goroutine and needs no closing.
type TLSSource struct {
	certFile, keyFile, caFile string
	clientAuth                tls.ClientAuthType
	onError                   func(error)
	onReload                  func(*x509.Certificate)
	now                       func() time.Time

	cur atomic.Pointer[generation]

	mu        sync.Mutex
	stamps    []os.FileInfo // guarded by mu: the files as the current generation read them
	lastCheck time.Time     // guarded by mu
	lastErr   string        // guarded by mu: the reload error last reported, "" after a success
}

// generation is what one successful load produced. Immutable.
type generation struct {
	cert   *tls.Certificate
	pool   *x509.CertPool // nil without a client CA file
	server *tls.Config    // what GetConfigForClient answers
}

// Option configures a TLSSource.
type Option func(*TLSSource)

// RequireClientCert makes the server refuse a client without a certificate
// that chains to the client CA (mutual TLS, tls.RequireAndVerifyClientCert).
// Without it, a source with a client CA file verifies a certificate when the
// client gives one and lets a client without one through
// (tls.VerifyClientCertIfGiven), for listeners that also accept other
// credentials (HTTP Basic or Bearer, SASL). It needs a client CA file.
func RequireClientCert() Option {
	return func(s *TLSSource) { s.clientAuth = tls.RequireAndVerifyClientCert }
}

// OnReloadError sets a callback for reload failures (the old certificate is
// kept). It is called on the handshake's goroutine, once per distinct error.
func OnReloadError(fn func(error)) Option {
	return func(s *TLSSource) { s.onError = fn }
}

// OnReload sets a callback for each successful reload after the first load,
// with the new leaf certificate (to log its subject and expiry).
func OnReload(fn func(leaf *x509.Certificate)) Option {
	return func(s *TLSSource) { s.onReload = fn }
}

// WithClock replaces time.Now for the reload interval.
func WithClock(now func() time.Time) Option {
	return func(s *TLSSource) { s.now = now }
}

// NewTLSSource loads certFile and keyFile (PEM) and, when clientCAFile is
// not empty, the CA certificates (PEM, one or more) that client
// certificates must chain to. The same CA verifies the other brokers'
// certificates in ClientConfig. A load that fails here is returned: there is
// no old certificate to keep.
func NewTLSSource(certFile, keyFile, clientCAFile string, opts ...Option) (*TLSSource, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("listener: TLS needs both a certificate file and a key file")
	}
	s := &TLSSource{certFile: certFile, keyFile: keyFile, caFile: clientCAFile, now: time.Now}
	if clientCAFile != "" {
		s.clientAuth = tls.VerifyClientCertIfGiven
	}
	for _, o := range opts {
		o(s)
	}
	if s.clientAuth == tls.RequireAndVerifyClientCert && clientCAFile == "" {
		return nil, errors.New("listener: requiring client certificates needs a client CA file")
	}
	stamps, err := s.stat()
	if err != nil {
		return nil, err
	}
	gen, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(gen)
	s.stamps = stamps
	s.lastCheck = s.now()
	return s, nil
}

// ServerConfig is the tls.Config for a listener: TLS 1.2 at least (1.3 when
// the client has it, as Go prefers the highest shared version), each
// handshake served the newest certificate and client CA. It negotiates no
// ALPN protocol, so an HTTP server on it speaks HTTP/1.1. Each call returns
// a new Config; all share this source.
func (s *TLSSource) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current().server, nil
		},
		// Used only if a caller drops GetConfigForClient; it still serves
		// the newest certificate, without client certificates.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		},
	}
}

// ClientConfig is the tls.Config for dialling another broker whose
// certificate names serverName (a DNS name or IP address): it presents this
// source's certificate as the client certificate (so it needs client-auth
// usage) and, with a client CA file, verifies the server against that CA as
// it is now, so a reloaded CA applies to the next dial of a long-lived
// Config. Without a CA file the system roots verify the server. An empty
// serverName fails every handshake.
func (s *TLSSource) ClientConfig(serverName string) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.current().cert, nil
		},
	}
	if s.caFile != "" {
		// crypto/tls can only verify against a fixed RootCAs; the check is
		// done here instead, against the current pool (the documented
		// pattern for custom verification with VerifyConnection).
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return s.verifyServer(serverName, cs)
		}
	}
	return cfg
}

func (s *TLSSource) verifyServer(serverName string, cs tls.ConnectionState) error {
	if serverName == "" {
		return errors.New("listener: no server name to verify the broker's certificate against")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("listener: the server sent no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         s.current().pool,
		DNSName:       serverName,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("listener: verify server certificate: %w", err)
	}
	return nil
}

// Leaf is the certificate served now.
func (s *TLSSource) Leaf() *x509.Certificate { return s.current().cert.Leaf }

// Reload reads the files now, whether or not they changed, and returns the
// error of a failed reload (which keeps the old certificate and is also
// reported to OnReloadError).
func (s *TLSSource) Reload() error {
	s.mu.Lock()
	notify, err := s.reloadLocked(true)
	s.mu.Unlock()
	notify()
	return err
}

// current is the generation to serve, after a check of the files if the
// interval has passed.
func (s *TLSSource) current() *generation {
	notify := func() {}
	s.mu.Lock()
	if s.now().Sub(s.lastCheck) >= CheckInterval {
		// A failure is reported through OnReloadError; the old generation stays.
		notify, _ = s.reloadLocked(false)
	}
	s.mu.Unlock()
	notify()
	return s.cur.Load()
}

// reloadLocked stats the files and loads them if they changed (or force).
// Called with mu held; the caller runs notify after unlocking, so a callback
// may call back into the source.
func (s *TLSSource) reloadLocked(force bool) (notify func(), err error) {
	notify = func() {}
	s.lastCheck = s.now()
	// Stat before reading: what is read is at least as new as the stamps
	// kept, so a change in between costs one more reload, never a missed one.
	stamps, err := s.stat()
	if err == nil && !force && sameFiles(stamps, s.stamps) {
		return notify, nil
	}
	var gen *generation
	if err == nil {
		gen, err = s.load()
	}
	if err != nil {
		if msg := err.Error(); msg != s.lastErr && s.onError != nil {
			notify = func() { s.onError(err) }
		}
		s.lastErr = err.Error()
		return notify, err
	}
	s.cur.Store(gen)
	s.stamps = stamps
	s.lastErr = ""
	if s.onReload != nil {
		notify = func() { s.onReload(gen.cert.Leaf) }
	}
	return notify, nil
}

func (s *TLSSource) files() []string {
	if s.caFile == "" {
		return []string{s.certFile, s.keyFile}
	}
	return []string{s.certFile, s.keyFile, s.caFile}
}

func (s *TLSSource) stat() ([]os.FileInfo, error) {
	files := s.files()
	out := make([]os.FileInfo, len(files))
	for i, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("listener: reload TLS files: %w", err)
		}
		out[i] = info
	}
	return out, nil
}

// sameFiles reports whether every file is the one seen before: the same
// file (a rename over it makes another), size and modification time.
func sameFiles(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}

// load reads the files into a new generation.
func (s *TLSSource) load() (*generation, error) {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return nil, fmt.Errorf("listener: load TLS certificate %s and key %s: %w", s.certFile, s.keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("listener: parse TLS certificate %s: %w", s.certFile, err)
		}
	}
	gen := &generation{cert: &cert}
	if s.caFile != "" {
		pemData, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("listener: load client CA: %w", err)
		}
		gen.pool = x509.NewCertPool()
		if !gen.pool.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("listener: load client CA %s: no PEM certificate in it", s.caFile)
		}
	}
	gen.server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   s.clientAuth,
		ClientCAs:    gen.pool,
	}
	return gen, nil
}
