package httpapi

// This file owns the public HTTP listener: plain TCP, or TLS from the
// broker's --tls-cert-file and --tls-key-file (reloaded when they change)
// with client certificates verified against --tls-client-ca-file when a
// client offers one (optional: the API takes API keys and passwords too);
// and the transport that forwards a request to another broker's public
// listener in the same scheme.
//
// Invariant: a forwarded request never carries this broker's certificate:
// the broker's own principal must not stand in for a client's. A client
// authenticated only by its certificate is therefore not authenticated at
// the broker it is forwarded to (401 there); API keys and passwords travel
// in the Authorization header and are checked again there.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-mq/sluice/broker/listener"
)

// Listen binds the public HTTP listener (Cfg.HTTPListen), in TLS when
// Cfg.TLSCertFile is set. Call it once, before Handler.
func (b *Server) Listen() (net.Listener, error) {
	if b.Cfg.TLSCertFile != "" {
		log := b.Logger.With().Str("component", "http-tls").Logger()
		src, err := listener.NewTLSSource(b.Cfg.TLSCertFile, b.Cfg.TLSKeyFile, b.Cfg.TLSClientCAFile,
			listener.OnReloadError(func(err error) {
				log.Error().Err(err).Msg("reload of the HTTP listener's TLS files failed; serving the previous certificate")
			}),
			listener.OnReload(func(leaf *x509.Certificate) {
				log.Info().Str("subject", leaf.Subject.String()).Time("not_after", leaf.NotAfter).Msg("HTTP listener certificate reloaded")
			}))
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		b.tls = src
		b.peerTransport = &http.Transport{
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				cfg := src.ClientConfig(host)
				cfg.GetClientCertificate = nil // see the invariant above
				d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
				return d.DialContext(ctx, network, addr)
			},
			ForceAttemptHTTP2:   false,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	ln, err := net.Listen("tcp", b.Cfg.HTTPListen)
	if err != nil {
		return nil, err
	}
	if b.tls != nil {
		ln = tls.NewListener(ln, b.tls.ServerConfig())
	}
	return ln, nil
}

// peerURL is the base URL of another broker's public listener at addr.
func (b *Server) peerURL(addr string) *url.URL {
	if b.tls != nil {
		return &url.URL{Scheme: "https", Host: addr}
	}
	return &url.URL{Scheme: "http", Host: addr}
}
