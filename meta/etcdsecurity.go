package meta

// This file owns how this process reaches etcd safely: the checks of
// Config's TLS and credential fields, the TLS of the etcd client (to
// Endpoints, or to the embedded member's own client port), the password read
// for etcd's authentication, the embedded member's client-port and peer TLS,
// and the first contact that tells a refusal (TLS, credentials) from an etcd
// that is still starting.
//
// Invariant: the password is read only by Open, held only in the etcd
// client's configuration, and never logged or put into an error.
// Invariant: a Config with TLS files never dials a plain http:// endpoint,
// and never advertises an http:// peer URL with peer TLS configured.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// contactRetry is the pause between first-contact probes of an etcd that
// does not answer yet.
const contactRetry = 200 * time.Millisecond

// validateCredentials checks the pairs that only make sense together.
func (c Config) validateCredentials() error {
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		return fmt.Errorf("%w: etcd cert file %q given without a key file", ErrInvalidConfig, c.CertFile)
	case c.KeyFile != "" && c.CertFile == "":
		return fmt.Errorf("%w: etcd key file %q given without a cert file", ErrInvalidConfig, c.KeyFile)
	case c.Username != "" && c.PasswordFile == "":
		return fmt.Errorf("%w: etcd username %q given without a password file", ErrInvalidConfig, c.Username)
	case c.PasswordFile != "" && c.Username == "":
		return fmt.Errorf("%w: etcd password file %q given without a username", ErrInvalidConfig, c.PasswordFile)
	}
	return nil
}

// clientTLSFiles reports whether any client TLS file is given.
func (c Config) clientTLSFiles() bool { return c.CACertFile != "" || c.CertFile != "" }

// peerTLS reports whether the embedded member's peers talk TLS (Validate
// makes sure the three files come together).
func (c Config) peerTLS() bool { return c.PeerCertFile != "" }

// clientTLSServed reports whether the embedded member's client port serves TLS.
func (c Config) clientTLSServed() bool { return len(c.Endpoints) == 0 && c.CertFile != "" }

// validateEndpointsTLS checks the schemes of Endpoints against the TLS
// files: TLS to a plain endpoint would be silently dropped or fail obscurely.
func (c Config) validateEndpointsTLS() error {
	if c.PeerCertFile != "" || c.PeerKeyFile != "" || c.PeerTrustedCAFile != "" {
		return fmt.Errorf("%w: etcd peer TLS files apply to the embedded member only, not to etcd endpoints", ErrInvalidConfig)
	}
	var plain, secure string
	for _, ep := range c.Endpoints {
		switch {
		case strings.HasPrefix(ep, "https://"):
			secure = ep
		case strings.HasPrefix(ep, "http://"):
			if c.clientTLSFiles() {
				return fmt.Errorf("%w: etcd endpoint %q is http:// but etcd TLS files are given: use https://", ErrInvalidConfig, ep)
			}
			plain = ep
		case !strings.Contains(ep, "://") && c.clientTLSFiles():
			return fmt.Errorf("%w: etcd endpoint %q has no scheme; with etcd TLS files write https://", ErrInvalidConfig, ep)
		}
	}
	if plain != "" && secure != "" {
		return fmt.Errorf("%w: etcd endpoints mix http:// (%q) and https:// (%q)", ErrInvalidConfig, plain, secure)
	}
	return nil
}

// validateEmbeddedTLS checks the embedded member's TLS files and the schemes
// of its initial cluster.
func (c Config) validateEmbeddedTLS() error {
	// The embedded client port has one TLS mode, mutual TLS, so that the
	// same three files serve it, dial it, and let etcdctl in with a client
	// certificate from the same CA.
	switch {
	case c.CACertFile != "" && c.CertFile == "":
		return fmt.Errorf("%w: etcd CA file %q given without a cert and key file: the embedded member serves mutual TLS on its client port only with all three", ErrInvalidConfig, c.CACertFile)
	case c.CertFile != "" && c.CACertFile == "":
		return fmt.Errorf("%w: etcd cert file %q given without a CA file: the embedded member serves mutual TLS on its client port, checking clients (this broker too) against that CA", ErrInvalidConfig, c.CertFile)
	}
	var missing []string
	for _, f := range []struct{ name, val string }{
		{"peer cert file", c.PeerCertFile}, {"peer key file", c.PeerKeyFile}, {"peer trusted CA file", c.PeerTrustedCAFile},
	} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 && len(missing) < 3 {
		return fmt.Errorf("%w: etcd peer TLS needs a peer cert file, key file and trusted CA file; missing: %s", ErrInvalidConfig, strings.Join(missing, ", "))
	}
	if c.InitialCluster == "" {
		return nil
	}
	members, err := types.NewURLsMap(c.InitialCluster)
	if err != nil {
		return fmt.Errorf("%w: etcd initial cluster %q: %w", ErrInvalidConfig, c.InitialCluster, err)
	}
	for name, urls := range members {
		for _, u := range urls {
			switch {
			case c.peerTLS() && u.Scheme != "https":
				return fmt.Errorf("%w: etcd initial cluster member %s has peer URL %q: with peer TLS every peer URL must be https://", ErrInvalidConfig, name, u.String())
			case !c.peerTLS() && u.Scheme == "https":
				return fmt.Errorf("%w: etcd initial cluster member %s has peer URL %q: https:// needs the peer cert, key and trusted CA files", ErrInvalidConfig, name, u.String())
			}
		}
	}
	return nil
}

// clientConfig is the etcd client's configuration for endpoints: TLS when a
// file is given or an endpoint is https://, and the login. It reads the
// files, so a missing or malformed one is reported here by name.
func (c Config) clientConfig(endpoints []string, zlog *zap.Logger) (clientv3.Config, error) {
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: dialTimeout, Logger: zlog}
	useTLS := c.clientTLSFiles()
	for _, ep := range endpoints {
		useTLS = useTLS || strings.HasPrefix(ep, "https://")
	}
	if useTLS {
		tc, err := c.clientTLS()
		if err != nil {
			return clientv3.Config{}, err
		}
		cc.TLS = tc
	}
	if c.Username != "" {
		pw, err := readPassword(c.PasswordFile)
		if err != nil {
			return clientv3.Config{}, err
		}
		cc.Username, cc.Password = c.Username, pw
	}
	return cc, nil
}

// clientTLS loads the CA and client certificate files.
func (c Config) clientTLS() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACertFile != "" {
		pool, err := loadCAs(c.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("meta: etcd CA file: %w", err)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("meta: etcd cert file %s and key file %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// checkPeerFiles loads the peer TLS files once, so a mistake names its file
// instead of surfacing from inside etcd's start.
func (c Config) checkPeerFiles() error {
	if !c.peerTLS() {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(c.PeerCertFile, c.PeerKeyFile); err != nil {
		return fmt.Errorf("meta: etcd peer cert file %s and key file %s: %w", c.PeerCertFile, c.PeerKeyFile, err)
	}
	if _, err := loadCAs(c.PeerTrustedCAFile); err != nil {
		return fmt.Errorf("meta: etcd peer trusted CA file: %w", err)
	}
	return nil
}

func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// readPassword returns the first line of path, without its line ending.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("meta: etcd password file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("meta: etcd password file %s: first line is empty", path)
	}
	return line, nil
}

// embedTLS sets the embedded member's client-port and peer TLS, both
// mutual: a client or peer without a certificate from the CA is refused.
func (c Config) embedTLS(ec *embed.Config) {
	if c.clientTLSServed() {
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile:       c.CertFile,
			KeyFile:        c.KeyFile,
			TrustedCAFile:  c.CACertFile,
			ClientCertAuth: true,
		}
	}
	if c.peerTLS() {
		ec.PeerTLSInfo = transport.TLSInfo{
			CertFile:       c.PeerCertFile,
			KeyFile:        c.PeerKeyFile,
			TrustedCAFile:  c.PeerTrustedCAFile,
			ClientCertAuth: true,
		}
	}
}

// waitReachable probes etcd with a serializable read of key until it
// answers or ctx ends. An etcd that refuses connections may still be
// starting, so that is retried; a refused TLS handshake or login will not
// mend by waiting, so it fails at once. Each probe is bounded by the dial
// timeout and does not wait for a connection (gRPC fail-fast), so the
// error returned is the connection's own, not a bare deadline.
func waitReachable(ctx context.Context, client *clientv3.Client, key string) error {
	kv := pb.NewKVClient(client.ActiveConnection())
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, dialTimeout)
		_, err := kv.Range(attempt, &pb.RangeRequest{Key: []byte(key), Serializable: true, CountOnly: true}, grpc.WaitForReady(false))
		cancel()
		if err == nil {
			return nil
		}
		if refusedForGood(err) {
			return fmt.Errorf("meta: etcd at %v refused this client: %w", client.Endpoints(), rpctypes.Error(err))
		}
		if status.Code(err) != codes.DeadlineExceeded || last == nil {
			last = err // a deadline says less than the connection error before it
		}
		t := time.NewTimer(contactRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("meta: etcd at %v not reachable: %w (last error: %w)", client.Endpoints(), ctx.Err(), rpctypes.Error(last))
		case <-t.C:
		}
	}
}

// refusedForGood reports whether err is etcd or its TLS refusing this
// client, rather than etcd being away. gRPC carries a failed handshake only
// as text in an Unavailable status, hence the look at the message.
func refusedForGood(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
		return true
	case codes.Unavailable:
		msg := st.Message()
		for _, s := range []string{"authentication handshake failed", "tls: ", "x509: "} {
			if strings.Contains(msg, s) {
				return true
			}
		}
	}
	return false
}
