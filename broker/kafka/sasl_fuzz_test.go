package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/node"
)

// saslTestServer is a Server with only what the pipeline's SASL path
// needs: no node state, so a request that got past authentication would
// panic in its handler, which the fuzz test would report.
func saslTestServer() *Server {
	return &Server{
		Node:       &node.Node{},
		authorizer: AllowAll{},
		admitter:   AdmitAll{},
		failDelay:  auth.NewFailureDelay(auth.FailureDelayConfig{Base: time.Nanosecond, Max: time.Nanosecond}),
		now:        time.Now,
	}
}

func saslTestSession(t testing.TB) *auth.Session {
	cred, err := auth.NewScramCredential(auth.MechanismScramSHA512, "alice-secret", auth.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	s, err := auth.NewSession(auth.SessionConfig{
		Mechanisms: []string{auth.MechanismScramSHA256, auth.MechanismScramSHA512, auth.MechanismPlain},
		AllowPlain: true,
		Lookup: func(mech, user string) (auth.ScramCredential, string, bool) {
			if user == "alice" && mech == cred.Mechanism {
				return cred, "team-a", true
			}
			return auth.ScramCredential{}, "", false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzSaslExchange drives arbitrary SaslHandshake and SaslAuthenticate
// payloads, then an arbitrary frame, through the pipeline of a connection
// on a SASL listener, as its reader goroutine would: nothing panics, every
// reply encodes, and nothing but the pre-authentication APIs is answered
// without a principal.
func FuzzSaslExchange(f *testing.F) {
	f.Add("SCRAM-SHA-512", []byte("n,,n=alice,r=abcdef"), []byte("c=biws,r=abcdef,p=AAAA"), []byte{0, 3, 0, 9, 0, 0, 0, 1, 0, 0, 0})
	f.Add("SCRAM-SHA-256", []byte("n,a=bob,n=alice,r=x,tokenauth=true"), []byte(""), []byte{})
	f.Add("PLAIN", []byte("\x00alice\x00alice-secret"), []byte("\x00alice\x00x"), []byte{0, 18, 0, 3, 0, 0, 0, 1, 0, 0})
	f.Add("GSSAPI", []byte{}, []byte{0xff}, []byte{0, 17, 0, 0, 0, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, mech string, first, second, frame []byte) {
		b := saslTestServer()
		sec := &connSecurity{listener: "SASL_PLAINTEXT", ip: "192.0.2.1", session: saslTestSession(t)}
		ctx := context.Background()
		var reqs []*request
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = mech
		for _, body := range []kmsg.Request{hs, saslAuth(first), saslAuth(second)} {
			req, err := parseRequest(brokertest.EncodeRequest(body, 1)[4:])
			if err != nil {
				t.Fatalf("parse %T: %v", body, err)
			}
			reqs = append(reqs, req)
		}
		if len(frame) >= 8 {
			if req, err := parseRequest(frame); err == nil {
				reqs = append(reqs, req)
			}
		}
		for _, req := range reqs {
			req.listener = sec.listener
			_, authenticated := sec.identity()
			rep, err := b.serveRequest(ctx, sec, req)
			if err != nil {
				return // the connection closes
			}
			if !authenticated && !preAuthAPI(req.key) {
				t.Fatalf("%s answered without a principal", apiName(req.key))
			}
			if rep != nil {
				_ = encodeResponse(nil, req, rep.response())
			}
			if sec.closeAfterReply {
				return
			}
		}
	})
}

func saslAuth(b []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SetVersion(2)
	r.SASLAuthBytes = b
	return r
}
