package auth

// A minimal Kafka listener over a real socket that uses Session and
// FailureDelay the way the broker's connection will: before authentication
// only ApiVersions, SaslHandshake and SaslAuthenticate are answered, a
// failure is answered after the delay and closes the connection, and an
// expired session is closed at its next request. franz-go's kgo client
// talks to it, so KIP-84 framing and KIP-368 re-authentication are checked
// against a real client, not only against messages driven by hand.

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

type wireServer struct {
	t     *testing.T
	cfg   SessionConfig
	delay *FailureDelay
	ln    net.Listener
	wg    sync.WaitGroup

	mu     sync.Mutex
	served map[string]int // principal.String() → requests served after authentication; guarded by mu
	auths  map[string]int // principal.String() → successful exchanges on one connection, max over connections; guarded by mu
}

func startWireServer(t *testing.T, cfg SessionConfig) *wireServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &wireServer{
		t: t, cfg: cfg, ln: ln,
		delay:  NewFailureDelay(FailureDelayConfig{Base: time.Millisecond, Max: 5 * time.Millisecond}),
		served: map[string]int{}, auths: map[string]int{},
	}
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			srv.wg.Add(1)
			go func() {
				defer srv.wg.Done()
				srv.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		srv.wg.Wait()
	})
	return srv
}

func (srv *wireServer) counts(p string) (served, auths int) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.served[p], srv.auths[p]
}

func (srv *wireServer) serve(c net.Conn) {
	defer c.Close()
	go func() { // unblock the read when the test ends
		<-srv.t.Context().Done()
		c.Close()
	}()
	sess, err := NewSession(srv.cfg)
	if err != nil {
		srv.t.Errorf("NewSession: %v", err)
		return
	}
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	authsHere := 0
	for {
		key, version, corr, body, err := readRequest(c)
		if err != nil {
			return
		}
		var resp kmsg.Response
		closeAfter := false
		switch req := body.(type) {
		case *kmsg.ApiVersionsRequest:
			r := req.ResponseKind().(*kmsg.ApiVersionsResponse)
			for _, k := range []int16{kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16(), kmsg.Metadata.Int16()} {
				maxV := kmsg.RequestForKey(k).MaxVersion()
				if k == kmsg.SASLHandshake.Int16() {
					maxV = 1 // v0 is SASL outside Kafka framing
				}
				r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: 0, MaxVersion: maxV})
			}
			resp = r
		case *kmsg.SASLHandshakeRequest:
			r := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
			r.SupportedMechanisms, err = sess.Handshake(req.Mechanism)
			if err != nil {
				r.ErrorCode, closeAfter = errorCode(err), true
			}
			resp = r
		case *kmsg.SASLAuthenticateRequest:
			r := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			out, done, err := sess.Step(req.SASLAuthBytes)
			switch {
			case err != nil:
				srv.delay.Fail(ip)
				time.Sleep(srv.delay.Delay(ip)) // the feature itself, not a test wait
				msg := err.Error()
				r.ErrorCode, r.ErrorMessage, closeAfter = errorCode(err), &msg, true
			case done:
				srv.delay.Succeed(ip)
				r.SASLAuthBytes, r.SessionLifetimeMillis = out, sess.SessionLifetimeMs()
				authsHere++
				p, _ := sess.Principal()
				srv.mu.Lock()
				srv.auths[p.String()] = max(srv.auths[p.String()], authsHere)
				srv.mu.Unlock()
			default:
				r.SASLAuthBytes = out
			}
			resp = r
		default:
			p, ok := sess.Principal()
			if !ok {
				return // unauthenticated or expired: Kafka closes the connection
			}
			srv.mu.Lock()
			srv.served[p.String()]++
			srv.mu.Unlock()
			r := kmsg.NewPtrMetadataResponse()
			r.Version = version
			host, port, _ := net.SplitHostPort(srv.ln.Addr().String())
			portN, _ := strconv.Atoi(port)
			r.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(portN)}}
			resp = r
		}
		resp.SetVersion(version)
		if err := writeResponse(c, key, corr, resp); err != nil || closeAfter {
			return
		}
	}
}

func errorCode(err error) int16 {
	switch {
	case errors.Is(err, ErrUnsupportedMechanism):
		return kerr.UnsupportedSaslMechanism.Code
	case errors.Is(err, ErrIllegalState):
		return kerr.IllegalSaslState.Code
	default:
		return kerr.SaslAuthenticationFailed.Code
	}
}

func readRequest(r io.Reader) (key, version int16, corr int32, body kmsg.Request, err error) {
	var size [4]byte
	if _, err = io.ReadFull(r, size[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 10 || n > 1<<20 {
		return 0, 0, 0, nil, errors.New("bad frame size")
	}
	frame := make([]byte, n)
	if _, err = io.ReadFull(r, frame); err != nil {
		return
	}
	key = int16(binary.BigEndian.Uint16(frame))
	version = int16(binary.BigEndian.Uint16(frame[2:]))
	corr = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	rest := frame[10+max(idLen, 0):]
	body = kmsg.RequestForKey(key)
	if body == nil {
		return 0, 0, 0, nil, errors.New("unknown key")
	}
	body.SetVersion(version)
	if body.IsFlexible() {
		if len(rest) == 0 || rest[0] != 0 {
			return 0, 0, 0, nil, errors.New("header tags: only the empty section kgo sends is handled")
		}
		rest = rest[1:]
	}
	err = body.ReadFrom(rest)
	return
}

func writeResponse(w io.Writer, key int16, corr int32, resp kmsg.Response) error {
	b := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(corr))
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := w.Write(b)
	return err
}

func newWireClient(t *testing.T, addr string, m sasl.Mechanism) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second)}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func metadata(t *testing.T, cl *kgo.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

func wireConfig(lifetime time.Duration, allowPlain bool) SessionConfig {
	return SessionConfig{
		Mechanisms:      []string{MechanismScramSHA512, MechanismScramSHA256, MechanismPlain},
		Lookup:          testUsers().lookup,
		AllowPlain:      allowPlain,
		SessionLifetime: lifetime,
	}
}

func TestWireKgoScram(t *testing.T) {
	srv := startWireServer(t, wireConfig(0, false))
	for _, m := range []sasl.Mechanism{
		kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		kscram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(),
	} {
		if err := metadata(t, newWireClient(t, srv.ln.Addr().String(), m)); err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
	}
	if served, _ := srv.counts("User:alice"); served == 0 {
		t.Fatal("nothing served to alice")
	}
	if served, _ := srv.counts("User:bob"); served == 0 {
		t.Fatal("nothing served to bob")
	}
	plainSrv := startWireServer(t, wireConfig(0, true)) // as on a TLS listener
	plain := kplain.Auth{User: "carol", Pass: "carol-secret"}.AsMechanism()
	if err := metadata(t, newWireClient(t, plainSrv.ln.Addr().String(), plain)); err != nil {
		t.Fatalf("PLAIN: %v", err)
	}
}

func TestWireRefusals(t *testing.T) {
	srv := startWireServer(t, wireConfig(0, false))
	addr := srv.ln.Addr().String()
	cases := []struct {
		name string
		mech sasl.Mechanism
		want error
	}{
		{"wrong password", kscram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(), kerr.SaslAuthenticationFailed},
		{"unknown user", kscram.Auth{User: "mallory", Pass: "nope"}.AsSha512Mechanism(), kerr.SaslAuthenticationFailed},
		{"PLAIN without TLS", kplain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), kerr.UnsupportedSaslMechanism},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := metadata(t, newWireClient(t, addr, tc.mech))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("no authentication", func(t *testing.T) {
		if err := metadata(t, newWireClient(t, addr, nil)); err == nil {
			t.Fatal("an unauthenticated request was answered")
		}
	})
	if served, _ := srv.counts("User:alice"); served != 0 {
		t.Fatalf("%d requests served to alice", served)
	}
}

// TestWireReauthentication: with a short session lifetime, kgo
// re-authenticates on the same connection before the lifetime runs out
// and keeps being served.
func TestWireReauthentication(t *testing.T) {
	srv := startWireServer(t, wireConfig(1500*time.Millisecond, false))
	cl := newWireClient(t, srv.ln.Addr().String(), kscram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism())
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := metadata(t, cl); err != nil {
			t.Fatalf("request: %v", err)
		}
		if _, auths := srv.counts("User:carol"); auths >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no re-authentication on the connection within 15 s")
		}
		select { // pace the polling; the deadline above bounds the test
		case <-time.After(100 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
}
