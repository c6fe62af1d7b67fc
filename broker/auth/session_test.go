package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"
)

var scramMechanisms = []string{MechanismScramSHA256, MechanismScramSHA512}

func xdgHash(mech string) scram.HashGeneratorFcn {
	if mech == MechanismScramSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

// xdgExchange runs a whole SCRAM exchange with the xdg-go client against s
// and returns the first error from either side. On success the client has
// also verified the server's signature.
func xdgExchange(t *testing.T, s *Session, mech, user, password string) error {
	t.Helper()
	if _, err := s.Handshake(mech); err != nil {
		return err
	}
	client, err := xdgHash(mech).NewClient(user, password, "")
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	conv := client.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatalf("client-first: %v", err)
	}
	serverFirst, done, err := s.Step([]byte(first))
	if err != nil {
		return err
	}
	if done {
		t.Fatalf("done after client-first")
	}
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		t.Fatalf("client-final: %v", err)
	}
	serverFinal, done, err := s.Step([]byte(final))
	if err != nil {
		return err
	}
	if !done {
		t.Fatalf("not done after client-final")
	}
	if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
		t.Fatalf("client rejects the server-final %q: %v", serverFinal, err)
	}
	return nil
}

// franzExchange drives franz-go's own SASL client session by hand, as its
// broker connection does.
func franzExchange(t *testing.T, s *Session, m sasl.Mechanism) error {
	t.Helper()
	if _, err := s.Handshake(m.Name()); err != nil {
		return err
	}
	sess, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatalf("franz authenticate: %v", err)
	}
	for range 3 {
		resp, done, err := s.Step(msg)
		if err != nil {
			return err
		}
		clientDone, next, err := sess.Challenge(resp)
		if err != nil {
			t.Fatalf("franz challenge of %q: %v", resp, err)
		}
		if done != clientDone {
			t.Fatalf("server done=%v, client done=%v", done, clientDone)
		}
		if done {
			return nil
		}
		msg = next
	}
	t.Fatalf("exchange did not finish")
	return nil
}

func mustPrincipal(t *testing.T, s *Session, want Principal) {
	t.Helper()
	got, ok := s.Principal()
	if !ok || got != want {
		t.Fatalf("Principal() = %v, %v; want %v, true", got, ok, want)
	}
}

func TestScramExchangeXdgClient(t *testing.T) {
	for _, mech := range scramMechanisms {
		t.Run(mech, func(t *testing.T) {
			s := newTestSession(t, nil)
			if err := xdgExchange(t, s, mech, "alice", "alice-secret"); err != nil {
				t.Fatalf("exchange: %v", err)
			}
			mustPrincipal(t, s, Principal{Tenant: "acme", User: "alice"})
		})
	}
}

func TestScramExchangeFranzClient(t *testing.T) {
	for _, mech := range scramMechanisms {
		t.Run(mech, func(t *testing.T) {
			auth := kscram.Auth{User: "carol", Pass: "carol-secret"}
			m := auth.AsSha256Mechanism()
			if mech == MechanismScramSHA512 {
				m = auth.AsSha512Mechanism()
			}
			s := newTestSession(t, nil)
			if err := franzExchange(t, s, m); err != nil {
				t.Fatalf("exchange: %v", err)
			}
			mustPrincipal(t, s, Principal{Tenant: "globex", User: "carol"})
		})
	}
}

// TestScramFailuresLookAlike: a wrong password and an unknown user fail at
// the same step with the same client text, and the unknown user is shown a
// salt as stable as a real user's.
func TestScramFailuresLookAlike(t *testing.T) {
	for _, mech := range scramMechanisms {
		t.Run(mech, func(t *testing.T) {
			wrong := newTestSession(t, nil)
			errWrong := xdgExchange(t, wrong, mech, "alice", "not-the-secret")
			unknown := newTestSession(t, nil)
			errUnknown := xdgExchange(t, unknown, mech, "mallory", "whatever")
			for name, err := range map[string]error{"wrong password": errWrong, "unknown user": errUnknown} {
				var ae *AuthError
				if !errors.Is(err, ErrAuthenticationFailed) || !errors.As(err, &ae) {
					t.Fatalf("%s: err = %v, want an *AuthError", name, err)
				}
			}
			if errWrong.Error() != errUnknown.Error() {
				t.Fatalf("client texts differ: wrong password %q, unknown user %q", errWrong, errUnknown)
			}
			if strings.Contains(errUnknown.Error(), "mallory") || strings.Contains(errUnknown.Error(), "unknown") {
				t.Fatalf("client text %q names the user or says it is unknown", errUnknown)
			}
			var ae *AuthError
			errors.As(errUnknown, &ae)
			if ae.User != "mallory" || ae.Reason == "" {
				t.Fatalf("log fields = %+v, want the user and a reason", ae)
			}
			for _, s := range []*Session{wrong, unknown} {
				if p, ok := s.Principal(); ok {
					t.Fatalf("failed session has principal %v", p)
				}
				if _, _, err := s.Step([]byte("x")); !errors.Is(err, ErrIllegalState) {
					t.Fatalf("Step after failure: %v, want ErrIllegalState", err)
				}
				if _, err := s.Handshake(mech); !errors.Is(err, ErrIllegalState) {
					t.Fatalf("Handshake after failure: %v, want ErrIllegalState", err)
				}
			}
			// The salt offered for an unknown name is the same every time.
			if a, b := serverFirstSalt(t, mech, "mallory"), serverFirstSalt(t, mech, "mallory"); a != b {
				t.Fatalf("unknown user's salt changes between sessions: %q, %q", a, b)
			}
			if a, b := serverFirstSalt(t, mech, "mallory"), serverFirstSalt(t, mech, "trudy"); a == b {
				t.Fatalf("two unknown users share salt %q", a)
			}
		})
	}
}

// serverFirstSalt returns the s= field the server offers user.
func serverFirstSalt(t *testing.T, mech, user string) string {
	t.Helper()
	s := newTestSession(t, nil)
	if _, err := s.Handshake(mech); err != nil {
		t.Fatal(err)
	}
	resp, _, err := s.Step([]byte("n,,n=" + user + ",r=abcdef"))
	if err != nil {
		t.Fatalf("client-first for %s: %v", user, err)
	}
	for f := range strings.SplitSeq(string(resp), ",") {
		if salt, ok := strings.CutPrefix(f, "s="); ok {
			return salt
		}
	}
	t.Fatalf("no salt in %q", resp)
	return ""
}

func TestScramRefusals(t *testing.T) {
	cases := []struct {
		name  string
		first string
	}{
		{"authzid of another user", "n,a=carol,n=alice,r=abcdef"},
		{"delegation token", "n,,n=alice,r=abcdef,tokenauth=true"},
		{"not scram", "hello"},
		{"channel binding required", "p=tls-unique,,n=alice,r=abcdef"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, nil)
			if _, err := s.Handshake(MechanismScramSHA256); err != nil {
				t.Fatal(err)
			}
			_, _, err := s.Step([]byte(tc.first))
			if !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("Step(%q) = %v, want ErrAuthenticationFailed", tc.first, err)
			}
		})
	}
	t.Run("authzid equal to the user", func(t *testing.T) {
		s := newTestSession(t, nil)
		if _, err := s.Handshake(MechanismScramSHA256); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Step([]byte("n,a=alice,n=alice,r=abcdef")); err != nil {
			t.Fatalf("Step: %v", err)
		}
	})
}

func TestPlain(t *testing.T) {
	cases := []struct {
		name, user, pass, zid string
		want                  Principal // zero: refused
	}{
		{"sha512 credential", "alice", "alice-secret", "", Principal{"acme", "alice"}},
		{"sha256-only credential", "bob", "bob-secret", "", Principal{"acme", "bob"}},
		{"authzid equal to the user", "alice", "alice-secret", "alice", Principal{"acme", "alice"}},
		{"wrong password", "alice", "bob-secret", "", Principal{}},
		{"unknown user", "mallory", "alice-secret", "", Principal{}},
		{"authzid of another user", "alice", "alice-secret", "carol", Principal{}},
	}
	var texts = map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSession(t, nil)
			m := kplain.Auth{User: tc.user, Pass: tc.pass, Zid: tc.zid}.AsMechanism()
			err := franzExchange(t, s, m)
			if tc.want == (Principal{}) {
				if !errors.Is(err, ErrAuthenticationFailed) {
					t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
				}
				texts[tc.name] = err.Error()
				return
			}
			if err != nil {
				t.Fatalf("exchange: %v", err)
			}
			mustPrincipal(t, s, tc.want)
		})
	}
	if texts["wrong password"] != texts["unknown user"] {
		t.Fatalf("client texts differ: %q vs %q", texts["wrong password"], texts["unknown user"])
	}
}

func TestPlainRefusedWithoutAllowPlain(t *testing.T) {
	s := newTestSession(t, func(c *SessionConfig) { c.AllowPlain = false })
	enabled, err := s.Handshake(MechanismPlain)
	if !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("Handshake(PLAIN) = %v, want ErrUnsupportedMechanism", err)
	}
	if want := []string{MechanismScramSHA512, MechanismScramSHA256}; !slices.Equal(enabled, want) {
		t.Fatalf("enabled = %v, want %v", enabled, want)
	}
	if _, _, err := s.Step([]byte("\x00alice\x00alice-secret")); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("Step after a refused handshake = %v, want ErrIllegalState", err)
	}
	// The session may still handshake an enabled mechanism.
	if err := xdgExchange(t, s, MechanismScramSHA512, "alice", "alice-secret"); err != nil {
		t.Fatalf("SCRAM after the refused PLAIN: %v", err)
	}
}

func TestHandshakeStates(t *testing.T) {
	s := newTestSession(t, nil)
	if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("Step before handshake = %v, want ErrIllegalState", err)
	}
	if _, err := s.Handshake("GSSAPI"); !errors.Is(err, ErrUnsupportedMechanism) || !strings.Contains(err.Error(), "SCRAM-SHA-512") {
		t.Fatalf("Handshake(GSSAPI) = %v, want ErrUnsupportedMechanism listing the enabled ones", err)
	}
	if _, err := s.Handshake(MechanismScramSHA256); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Handshake(MechanismScramSHA256); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("Handshake mid-exchange = %v, want ErrIllegalState", err)
	}
}

func TestNewSessionConfig(t *testing.T) {
	lookup := testUsers().lookup
	bad := map[string]SessionConfig{
		"no lookup":               {Mechanisms: []string{MechanismScramSHA256}},
		"unknown mechanism":       {Mechanisms: []string{"SCRAM-SHA-1"}, Lookup: lookup},
		"twice":                   {Mechanisms: []string{MechanismScramSHA256, MechanismScramSHA256}, Lookup: lookup},
		"only plain, not allowed": {Mechanisms: []string{MechanismPlain}, Lookup: lookup},
		"none":                    {Lookup: lookup},
		"negative lifetime":       {Mechanisms: []string{MechanismScramSHA256}, Lookup: lookup, SessionLifetime: -time.Second},
	}
	for name, cfg := range bad {
		if _, err := NewSession(cfg); err == nil {
			t.Errorf("%s: NewSession succeeded", name)
		}
	}
}

func TestReauthentication(t *testing.T) {
	clock := newClock()
	withClock := func(c *SessionConfig) {
		c.Now = clock.Now
		c.SessionLifetime = time.Minute
	}
	t.Run("principal holds while re-authenticating", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA512, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(50 * time.Second)
		// Mid re-authentication the old principal still holds.
		if _, err := s.Handshake(MechanismScramSHA512); err != nil {
			t.Fatal(err)
		}
		mustPrincipal(t, s, Principal{"acme", "alice"})
		if _, err := s.Handshake(MechanismScramSHA512); !errors.Is(err, ErrIllegalState) {
			t.Fatalf("second handshake = %v", err)
		}
	})
	t.Run("same user renews the lifetime", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA512, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(50 * time.Second)
		if got := s.SessionLifetimeMs(); got != 10_000 {
			t.Fatalf("SessionLifetimeMs = %d, want 10000", got)
		}
		if err := xdgExchange(t, s, MechanismScramSHA512, "alice", "alice-secret"); err != nil {
			t.Fatalf("re-authentication: %v", err)
		}
		mustPrincipal(t, s, Principal{"acme", "alice"})
		if got := s.SessionLifetimeMs(); got != 60_000 {
			t.Fatalf("SessionLifetimeMs after re-authentication = %d, want 60000", got)
		}
		if s.Expired(clock.Now().Add(59 * time.Second)) {
			t.Fatal("expired before the renewed lifetime")
		}
	})
	t.Run("after expiry, as Kafka allows", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA256, "bob", "bob-secret"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		if _, ok := s.Principal(); ok || !s.Expired(clock.Now()) {
			t.Fatal("not expired")
		}
		if err := xdgExchange(t, s, MechanismScramSHA256, "bob", "bob-secret"); err != nil {
			t.Fatalf("re-authentication after expiry: %v", err)
		}
		mustPrincipal(t, s, Principal{"acme", "bob"})
	})
	t.Run("another user is refused", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA256, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
		err := xdgExchange(t, s, MechanismScramSHA256, "bob", "bob-secret")
		if !errors.Is(err, ErrAuthenticationFailed) || !strings.Contains(err.Error(), "same principal") {
			t.Fatalf("re-authentication as bob = %v, want a failure naming the principal change", err)
		}
		if p, ok := s.Principal(); ok {
			t.Fatalf("principal %v survives a refused re-authentication", p)
		}
	})
	t.Run("another mechanism is refused", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA256, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
		_, err := s.Handshake(MechanismScramSHA512)
		if !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("re-authentication with SHA-512 = %v, want ErrAuthenticationFailed", err)
		}
		if _, ok := s.Principal(); ok {
			t.Fatal("principal survives a refused re-authentication")
		}
	})
	t.Run("wrong password on re-authentication", func(t *testing.T) {
		s := newTestSession(t, withClock)
		if err := xdgExchange(t, s, MechanismScramSHA256, "alice", "alice-secret"); err != nil {
			t.Fatal(err)
		}
		if err := xdgExchange(t, s, MechanismScramSHA256, "alice", "changed"); !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("re-authentication with a wrong password = %v", err)
		}
		if _, ok := s.Principal(); ok {
			t.Fatal("principal survives a failed re-authentication")
		}
	})
}

func TestSessionLifetime(t *testing.T) {
	clock := newClock()
	s := newTestSession(t, func(c *SessionConfig) {
		c.Now = clock.Now
		c.SessionLifetime = 30 * time.Second
	})
	if s.Expired(clock.Now().Add(time.Hour)) || s.SessionLifetimeMs() != 0 {
		t.Fatal("an unauthenticated session has a lifetime")
	}
	if err := xdgExchange(t, s, MechanismScramSHA256, "bob", "bob-secret"); err != nil {
		t.Fatal(err)
	}
	if got := s.SessionLifetimeMs(); got != 30_000 {
		t.Fatalf("SessionLifetimeMs = %d, want 30000", got)
	}
	start := clock.Now()
	if s.Expired(start.Add(30*time.Second - time.Millisecond)) {
		t.Fatal("expired early")
	}
	if !s.Expired(start.Add(30 * time.Second)) {
		t.Fatal("not expired at the lifetime")
	}
	mustPrincipal(t, s, Principal{"acme", "bob"})
	clock.Advance(30 * time.Second)
	if p, ok := s.Principal(); ok {
		t.Fatalf("expired session still has principal %v", p)
	}
	clock.Advance(time.Hour)
	if got := s.SessionLifetimeMs(); got != 1 {
		t.Fatalf("SessionLifetimeMs past expiry = %d, want 1 (never 0, which means unlimited)", got)
	}

	unlimited := newTestSession(t, func(c *SessionConfig) { c.Now = clock.Now })
	if err := xdgExchange(t, unlimited, MechanismScramSHA256, "bob", "bob-secret"); err != nil {
		t.Fatal(err)
	}
	if unlimited.SessionLifetimeMs() != 0 || unlimited.Expired(clock.Now().Add(1000*time.Hour)) {
		t.Fatal("an unlimited session has a lifetime")
	}
}

func TestLookupAnswersValidated(t *testing.T) {
	good := testUsers()["SCRAM-SHA-256"]["alice"].cred
	weak := good
	weak.Iterations = 1
	lookups := map[string]CredentialLookup{
		"no tenant": func(string, string) (ScramCredential, string, bool) { return good, "", true },
		"other mechanism's credential": func(m, _ string) (ScramCredential, string, bool) {
			return testUsers()[MechanismScramSHA512]["alice"].cred, "acme", m == MechanismScramSHA256
		},
		"too few iterations": func(string, string) (ScramCredential, string, bool) { return weak, "acme", true },
	}
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			s := newTestSession(t, func(c *SessionConfig) { c.Lookup = lookup })
			if err := xdgExchange(t, s, MechanismScramSHA256, "alice", "alice-secret"); !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
			}
		})
	}
}

func TestOversizedMessage(t *testing.T) {
	s := newTestSession(t, nil)
	if _, err := s.Handshake(MechanismScramSHA256); err != nil {
		t.Fatal(err)
	}
	big := "n,,n=alice,r=" + strings.Repeat("a", MaxAuthBytes)
	if _, _, err := s.Step([]byte(big)); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
	}
}
