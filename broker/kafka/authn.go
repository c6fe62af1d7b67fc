package kafka

// This file owns who a connection is (the authenticate stage's state): the
// TLS handshake of a TLS listener, the principal of a client certificate,
// and the SASL session of a SASL listener.
//
// Invariant: a connection on a SASL listener has no identity until its
// SASL session reports a principal, and none again once the session's
// lifetime has run out; until then the pipeline answers only ApiVersions,
// SaslHandshake and SaslAuthenticate and closes the connection at any other
// request.
// Invariant: a connection on a listener without SASL has one identity for
// its life: the verified client certificate's user (mutual TLS) or
// User:ANONYMOUS.
//
// A connSecurity belongs to its connection's reader goroutine.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka/netconn"
	"github.com/sluice-mq/sluice/broker/listener"
)

// tlsHandshakeTimeout bounds a new TLS connection's handshake.
const tlsHandshakeTimeout = 10 * time.Second

// connSecurity is what the pipeline knows about who is on one connection.
type connSecurity struct {
	listener string // the client listener's name; "" on the inter-broker listener
	ip       string // the client's address, for the failed-authentication delay and ACL hosts
	// principal is the identity of a connection without SASL.
	principal auth.Principal
	// session is the SASL state of a connection on a SASL listener; nil
	// otherwise.
	session *auth.Session
	// closeAfterReply is set by a SASL handler whose answer ends the
	// connection (a failed or refused authentication).
	closeAfterReply bool
}

// identity is who sends the connection's requests; ok is false while a SASL
// connection is not (or no longer) authenticated.
func (c *connSecurity) identity() (auth.Identity, bool) {
	if c.session == nil {
		return auth.Identity{Principal: c.principal}, true
	}
	p, ok := c.session.Principal()
	return auth.Identity{Principal: p}, ok
}

// openConnSecurity runs the TLS handshake of a TLS listener and sets up the
// connection's identity. It returns the connection to serve (the TLS one on
// a TLS listener). kl is nil for the inter-broker listener, which does not
// authenticate (interbroker.go).
func (b *Server) openConnSecurity(ctx context.Context, nc net.Conn, kl *kafkaListener) (*connSecurity, net.Conn, error) {
	sec := &connSecurity{ip: netconn.RemoteIP(nc.RemoteAddr()), principal: auth.Anonymous}
	if kl == nil {
		return sec, nc, nil
	}
	sec.listener = kl.Name
	if kl.tls != nil {
		tc := tls.Server(nc, kl.tls.ServerConfig())
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return nil, tc, fmt.Errorf("listener %s: TLS handshake: %w", kl.Name, err)
		}
		nc = tc
		if user, ok := listener.PeerPrincipal(tc.ConnectionState()); ok && kl.sasl == nil {
			tenant, known := auth.DefaultTenant, true
			if b.certTenant != nil {
				tenant, known = b.certTenant(user)
			}
			if !known || tenant == "" {
				return nil, nc, fmt.Errorf("listener %s: client certificate user %q belongs to no tenant", kl.Name, user)
			}
			sec.principal = auth.Principal{Tenant: tenant, User: user}
		}
	}
	if kl.sasl != nil {
		s, err := auth.NewSession(*kl.sasl)
		if err != nil {
			return nil, nc, fmt.Errorf("listener %s: %w", kl.Name, err) // checked at Listen; unreachable
		}
		sec.session = s
		sec.principal = auth.Principal{}
	}
	return sec, nc, nil
}

// errUnauthenticated closes a connection that sent a request its identity
// does not allow: anything but the SASL exchange before authentication or
// after the session expired.
var errUnauthenticated = errors.New("request before authentication")

// authenticate is the pipeline's authenticate stage: the identity of req,
// or errUnauthenticated for a request a connection without an identity may
// not send.
func (c *connSecurity) authenticate(req *request, now time.Time) (auth.Identity, error) {
	id, ok := c.identity()
	if ok || preAuthAPI(req.key) {
		return id, nil
	}
	why := "before SASL authentication"
	if c.session != nil && c.session.Expired(now) {
		why = "after the SASL session expired (KIP-368)"
	}
	return auth.Identity{}, fmt.Errorf("%w: %s %s", errUnauthenticated, apiName(req.key), why)
}

// preAuthAPI reports whether key is answered before authentication:
// ApiVersions, SaslHandshake and SaslAuthenticate, as in Kafka.
func preAuthAPI(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}
