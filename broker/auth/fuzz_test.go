package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"
)

// The fuzz targets feed arbitrary bytes where a client's SASL message goes.
// Each asserts that nothing panics, that every error is one of the
// package's markers, and that no input completes an exchange unless it
// carries what a real client would: a valid proof for the server's nonce,
// or the right password.

func checkStepError(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrAuthenticationFailed) && !errors.Is(err, ErrIllegalState) {
		t.Fatalf("Step error %v is none of the markers", err)
	}
}

// scramFixture is one deterministic SCRAM-SHA-256 exchange for alice: the
// session's entropy is seeded, so its nonce, and so the valid client-final,
// are the same on every run.
type scramFixture struct {
	first, serverFirst, final string
	legacyFinal               string // the same proof made as librdkafka before 2.6.1 sends it
}

func newScramFixture(t testing.TB) scramFixture {
	t.Helper()
	client, err := scram.SHA256.NewClient("alice", "alice-secret", "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.WithNonceGenerator(func() string { return "fixedclientnonce" }).NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	s := fixtureSession(t)
	serverFirst, _, err := s.Step([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		t.Fatal(err)
	}
	if _, done, err := s.Step([]byte(final)); err != nil || !done {
		t.Fatalf("the fixture's own exchange fails: %v", err)
	}
	full := strings.TrimPrefix(strings.SplitN(string(serverFirst), ",", 2)[0], "r=")
	legacy, _ := scramClientProof(t, MechanismScramSHA256, "alice-secret", first, string(serverFirst), "n,,", "fixedclientnonce"+full)
	return scramFixture{first: first, serverFirst: string(serverFirst), final: final, legacyFinal: legacy}
}

// fixtureSession is a handshaken SCRAM-SHA-256 session with seeded entropy.
func fixtureSession(t testing.TB) *Session {
	t.Helper()
	s := newTestSession(t, func(c *SessionConfig) {
		c.Rand = seededRand(1)
		c.UnknownUserKey = []byte("fuzz")
	})
	if _, err := s.Handshake(MechanismScramSHA256); err != nil {
		t.Fatal(err)
	}
	return s
}

func FuzzScramClientFirst(f *testing.F) {
	fx := newScramFixture(f)
	for _, seed := range []string{
		fx.first,
		"n,,n=alice,r=abc",
		"n,a=alice,n=alice,r=abc",
		"y,,n=mallory,r=abc",
		"n,,n=a=2Cb=3Dc,r=abc,ext=1",
		"n,,n=alice,r=abc,tokenauth=true",
		"p=tls-exporter,,n=alice,r=abc",
		"n,,m=ext,n=alice,r=abc",
		"n,,n=al=ice,r=abc",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := fixtureSession(t)
		resp, done, err := s.Step(msg)
		checkStepError(t, err)
		if done {
			t.Fatalf("client-first %q completed the exchange", msg)
		}
		if _, ok := s.Principal(); ok {
			t.Fatalf("client-first %q established a principal", msg)
		}
		if err != nil {
			return
		}
		if !strings.HasPrefix(string(resp), "r=") || strings.Count(string(resp), ",") != 2 {
			t.Fatalf("server-first %q is not r=…,s=…,i=…", resp)
		}
		// Whatever the first message, the fixture's final (a proof for
		// another nonce or another first message) must not complete it,
		// unless the first message is the fixture's own.
		_, done, err = s.Step([]byte(fx.final))
		checkStepError(t, err)
		if (err == nil && done) != (string(msg) == fx.first) {
			t.Fatalf("after client-first %q the fixture's final gives done=%v err=%v", msg, done, err)
		}
	})
}

func FuzzScramClientFinal(f *testing.F) {
	fx := newScramFixture(f)
	validPrefix, validProof := splitProof(fx.final)
	legacyPrefix, legacyProof := splitProof(fx.legacyFinal)
	flipped := []byte(fx.final)
	flipped[len(flipped)-3] ^= 1
	for _, seed := range []string{
		fx.final,
		string(flipped),
		validPrefix + ",p=",
		validPrefix + ",ext=1,p=" + base64.StdEncoding.EncodeToString(validProof),
		"c=biws,r=wrongnonce,p=AAAA",
		"c=biws,p=AAAA",
		"c=,r=,p=",
		"",
		fx.legacyFinal,
		legacyPrefix + ",p=" + base64.StdEncoding.EncodeToString(validProof),
		legacyPrefix + "x,p=" + base64.StdEncoding.EncodeToString(legacyProof),
		"c=biws,r=fixedclientnonce" + strings.TrimPrefix(validPrefix, "c=biws,r=") + ",p=AAAA",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := fixtureSession(t)
		if resp, _, err := s.Step([]byte(fx.first)); err != nil || string(resp) != fx.serverFirst {
			t.Fatalf("fixture not reproduced: %q, %v", resp, err)
		}
		resp, done, err := s.Step(msg)
		checkStepError(t, err)
		p, ok := s.Principal()
		if err != nil || !done {
			if ok || done {
				t.Fatalf("client-final %q: principal %v (%v), done=%v after err %v", msg, p, ok, done, err)
			}
			return
		}
		// Success: the message must carry the valid proof over the valid
		// message, or the legacy one over the legacy message, up to
		// base64's spelling.
		prefix, proof := splitProof(string(msg))
		rfc := prefix == validPrefix && bytes.Equal(proof, validProof)
		legacy := prefix == legacyPrefix && bytes.Equal(proof, legacyProof)
		if !rfc && !legacy {
			t.Fatalf("client-final %q completed the exchange without the valid proof", msg)
		}
		if !ok || p != (Principal{Tenant: "acme", User: "alice"}) || !strings.HasPrefix(string(resp), "v=") {
			t.Fatalf("success gives principal %v (%v), server-final %q", p, ok, resp)
		}
	})
}

// splitProof splits a client-final message into its part without proof and
// the decoded proof (nil if it does not decode).
func splitProof(final string) (string, []byte) {
	i := strings.LastIndex(final, ",p=")
	if i < 0 {
		return final, nil
	}
	proof, err := base64.StdEncoding.DecodeString(final[i+3:])
	if err != nil {
		return final[:i], nil
	}
	return final[:i], proof
}

func FuzzPlain(f *testing.F) {
	for _, seed := range []string{
		"\x00alice\x00alice-secret",
		"alice\x00alice\x00alice-secret",
		"\x00bob\x00bob-secret",
		"carol\x00alice\x00alice-secret",
		"\x00alice\x00wrong",
		"\x00mallory\x00x",
		"\x00\x00",
		"alice",
		"",
	} {
		f.Add([]byte(seed))
	}
	known := map[string]string{"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := newTestSession(t, nil)
		if _, err := s.Handshake(MechanismPlain); err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Step(msg)
		checkStepError(t, err)
		p, ok := s.Principal()
		success := err == nil && done
		if success != ok {
			t.Fatalf("%q: success %v but principal %v", msg, success, ok)
		}
		// The oracle: three fields, a known user, an authzid empty or the
		// user, and a password equal to the user's after SASLprep.
		parts := strings.Split(string(msg), "\x00")
		want := false
		if len(parts) == 3 && (parts[0] == "" || parts[0] == parts[1]) {
			if pw, isUser := known[parts[1]]; isUser {
				prepped, perr := stringprep.SASLprep.Prepare(parts[2])
				want = perr == nil && prepped == pw
			}
		}
		if success != want {
			t.Fatalf("PLAIN %q: success %v, want %v", msg, success, want)
		}
		if success && p.User != parts[1] {
			t.Fatalf("PLAIN %q gives principal %v", msg, p)
		}
	})
}

func FuzzParseAPIKey(f *testing.F) {
	key, _, _, err := NewAPIKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(key)
	f.Add("sk_abc_def")
	f.Add("")
	f.Fuzz(func(t *testing.T, k string) {
		id, err := ParseAPIKey(k)
		if err != nil {
			if !errors.Is(err, ErrInvalidAPIKey) || id != "" {
				t.Fatalf("ParseAPIKey(%q) = %q, %v", k, id, err)
			}
			return
		}
		if !strings.HasPrefix(k, "sk_"+id+"_") || len(id) != apiKeyIDChars {
			t.Fatalf("ParseAPIKey(%q) = %q", k, id)
		}
	})
}

// FuzzParseLegacyClientFinal: the parser of the legacy client-final never
// panics, and what it accepts is three fields whose parts, written out
// again, parse to the same parts.
func FuzzParseLegacyClientFinal(f *testing.F) {
	fx := newScramFixture(f)
	for _, seed := range []string{
		fx.legacyFinal, fx.final, "c=biws,r=,p=", "c=biws,r=a,b,p=", "c=,r=x,p=AAAA", "c=biws,r=x,x=1,p=AAAA",
		"r=x,c=biws,p=AAAA", "c=b!ws,r=x,p=AAAA", "c=biws,r=x,p=A", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		cf, err := parseLegacyClientFinal(msg)
		if err != nil {
			return
		}
		if strings.Count(msg, ",") != 2 || !strings.HasPrefix(msg, cf.withoutProof+",p=") {
			t.Fatalf("%q parsed to %+v", msg, cf)
		}
		again := "c=" + base64.StdEncoding.EncodeToString(cf.channelBinding) + ",r=" + cf.nonce +
			",p=" + base64.StdEncoding.EncodeToString(cf.proof)
		cf2, err := parseLegacyClientFinal(again)
		if err != nil || !bytes.Equal(cf2.channelBinding, cf.channelBinding) || cf2.nonce != cf.nonce || !bytes.Equal(cf2.proof, cf.proof) {
			t.Fatalf("%q: written out again as %q parses to %+v, %v", msg, again, cf2, err)
		}
	})
}
