package kafka

// SaslHandshake (key 17) and SaslAuthenticate (key 36): the SASL exchange
// of KIP-84 and KIP-152 on a SASL listener, driven by the connection's
// auth.Session (authn.go), and re-authentication (KIP-368) on the same
// connection.
//
// Invariant: an exchange that fails is answered with its error and the
// connection closes after that answer; a failed authentication's answer
// waits the failure delay of the client's IP first (KIP-306).
// Invariant: the error message sent to the client is auth's client-safe
// text, the same for an unknown user as for a wrong password.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

func handleSaslHandshake(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.SASLHandshakeRequest)
	resp := newResponse(req).(*kmsg.SASLHandshakeResponse)
	sec := req.sec
	if sec.session == nil {
		// A listener without SASL: there is nothing to hand shake.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		sec.closeAfterReply = true
		return done(resp), nil
	}
	mechs, err := sec.session.Handshake(r.Mechanism)
	resp.SupportedMechanisms = mechs
	if req.version == 0 {
		// SASL tokens outside Kafka framing are not served (auth doc).
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		sec.closeAfterReply = true
		return done(resp), nil
	}
	if err != nil {
		resp.ErrorCode = saslErrorCode(err)
		return b.refuseSasl(ctx, req, resp, err), nil
	}
	return done(resp), nil
}

func handleSaslAuthenticate(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.SASLAuthenticateRequest)
	resp := newResponse(req).(*kmsg.SASLAuthenticateResponse)
	sec := req.sec
	if sec.session == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("this listener does not authenticate with SASL")
		sec.closeAfterReply = true
		return done(resp), nil
	}
	out, complete, err := sec.session.Step(r.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = saslErrorCode(err)
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return b.refuseSasl(ctx, req, resp, err), nil
	}
	resp.SASLAuthBytes = out
	if complete {
		b.failDelay.Succeed(sec.ip)
		if req.version >= 1 {
			resp.SessionLifetimeMillis = sec.session.SessionLifetimeMs()
		}
		p, _ := sec.session.Principal()
		b.Logger.Debug().Str("remote", sec.ip).Str("listener", sec.listener).Str("principal", p.String()).
			Str("tenant", p.Tenant).Str("mechanism", sec.session.Mechanism()).Msg("SASL authenticated")
	}
	return done(resp), nil
}

// refuseSasl answers a refused exchange and marks the connection for
// closing; a failed authentication is counted for the client's IP and
// answered after its delay.
func (b *Server) refuseSasl(ctx context.Context, req *request, resp kmsg.Response, err error) reply {
	sec := req.sec
	sec.closeAfterReply = true
	ev := b.Logger.Debug().Str("remote", sec.ip).Str("listener", sec.listener).Str("api", apiName(req.key))
	var ae *auth.AuthError
	if !errors.As(err, &ae) {
		ev.Err(err).Msg("SASL exchange refused")
		return done(resp)
	}
	b.failDelay.Fail(sec.ip)
	delay := b.failDelay.Delay(sec.ip)
	b.Logger.Info().Str("remote", sec.ip).Str("listener", sec.listener).Str("mechanism", ae.Mechanism).
		Str("user", ae.User).Str("reason", ae.Reason).Dur("delay_ms", delay).Msg("SASL authentication failed")
	return waitReply(func() kmsg.Response {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done(): // shutting down: answer at once
		}
		return resp
	})
}

// saslErrorCode is the Kafka code of an auth error.
func saslErrorCode(err error) int16 {
	switch {
	case errors.Is(err, auth.ErrUnsupportedMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, auth.ErrIllegalState):
		return kerr.IllegalSaslState.Code
	default:
		return kerr.SaslAuthenticationFailed.Code
	}
}
