package node

// This file owns the security of the links between brokers
// (--inter-broker-security-protocol): the settings and their checks, the
// one TLS source every inter-broker dialer and the inter-broker listener
// share, the dial every dialer goes through, and who may be served there.
// broker/kafka serves the listener; broker/cluster (replica fetchers,
// election messages) and broker/httpapi (forwarding) dial through
// DialInterBroker.
//
// Invariant: with InterBrokerSecurityProtocol PLAINTEXT (the default) the
// links are plain TCP, unauthenticated, as before the setting existed.
// Invariant: with SSL every dial to another broker's inter-broker listener
// is a TLS client presenting this broker's certificate and verifying the
// peer's against TLSClientCAFile, and the listener serves only a peer
// whose verified certificate principal is in InterBrokerPrincipals (the
// super users when that is empty).
//
// InterBrokerTLS is set once by OpenInterBrokerTLS, before Run starts
// anything, and read-only after.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/broker/listener"
)

// The protocols of the inter-broker listener (Kafka's
// security.inter.broker.protocol, the two this broker speaks there).
const (
	InterBrokerPlaintext = "PLAINTEXT"
	InterBrokerSSL       = "SSL"
)

// interBrokerDialTimeout bounds a dial and its TLS handshake.
const interBrokerDialTimeout = 10 * time.Second

// InterBrokerUsesTLS reports whether the inter-broker links speak TLS.
func (c Config) InterBrokerUsesTLS() bool { return c.InterBrokerProtocol() == InterBrokerSSL }

// InterBrokerAllowed is the list of principals served on the inter-broker
// listener under SSL: InterBrokerPrincipals, or the super users.
func (c Config) InterBrokerAllowed() []string {
	if len(c.InterBrokerPrincipals) > 0 {
		return c.InterBrokerPrincipals
	}
	return c.SuperUsers
}

// validateInterBroker checks the inter-broker security settings.
func (c Config) validateInterBroker() error {
	switch c.InterBrokerProtocol() {
	case InterBrokerPlaintext:
		return nil
	case InterBrokerSSL:
	default:
		return fmt.Errorf("broker: --inter-broker-security-protocol %q: want PLAINTEXT or SSL", c.InterBrokerSecurityProtocol)
	}
	for _, f := range []struct{ flag, file string }{
		{"tls-cert-file", c.TLSCertFile}, {"tls-key-file", c.TLSKeyFile}, {"tls-client-ca-file", c.TLSClientCAFile},
	} {
		if f.file == "" {
			return fmt.Errorf("broker: inter-broker SSL (--inter-broker-security-protocol, or an SSL --inter-broker-listener) needs --%s (mutual TLS between brokers)", f.flag)
		}
	}
	for _, p := range c.InterBrokerPrincipals {
		if name, ok := strings.CutPrefix(p, "User:"); !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("broker: --inter-broker-principals: %q is not a principal User:<name>", p)
		}
	}
	if len(c.InterBrokerAllowed()) == 0 {
		return errors.New("broker: inter-broker SSL needs --inter-broker-principals (or --super-users) to name the brokers' certificate principals")
	}
	return nil
}

// OpenInterBrokerTLS loads the TLS source of the inter-broker links when
// they speak SSL (a no-op otherwise). It requires a client certificate of
// every peer that connects.
func (n *Node) OpenInterBrokerTLS() error {
	if !n.Cfg.InterBrokerUsesTLS() {
		return nil
	}
	log := n.Logger.With().Str("component", "inter-broker-tls").Logger()
	src, err := listener.NewTLSSource(n.Cfg.TLSCertFile, n.Cfg.TLSKeyFile, n.Cfg.TLSClientCAFile,
		listener.RequireClientCert(),
		listener.OnReloadError(func(err error) {
			log.Error().Err(err).Msg("reload of the inter-broker TLS files failed; using the previous certificate")
		}),
		listener.OnReload(func(leaf *x509.Certificate) {
			log.Info().Str("subject", leaf.Subject.String()).Time("not_after", leaf.NotAfter).Msg("inter-broker certificate reloaded")
		}))
	if err != nil {
		return fmt.Errorf("broker: inter-broker TLS: %w", err)
	}
	n.InterBrokerTLS = src
	return nil
}

// DialInterBroker dials another broker's inter-broker listener at addr:
// plain TCP, or under SSL a TLS client whose handshake is done before it
// returns, presenting this broker's certificate and checking the peer's
// against the CA and the host of addr. Every inter-broker dialer uses it,
// so a conn it returns speaks the listener's protocol whatever it carries.
func (n *Node) DialInterBroker(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: interBrokerDialTimeout}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil || n.InterBrokerTLS == nil {
		return nc, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("broker: inter-broker dial %s: %w", addr, err)
	}
	tc := tls.Client(nc, n.InterBrokerTLS.ClientConfig(host))
	hctx, cancel := context.WithTimeout(ctx, interBrokerDialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("broker: inter-broker TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// InterBrokerPeerAllowed reports whether a verified certificate principal
// ("User:<name>") may use the inter-broker listener.
func (c Config) InterBrokerPeerAllowed(principal string) bool {
	return slices.Contains(c.InterBrokerAllowed(), principal)
}
