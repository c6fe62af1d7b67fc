package auth

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"testing"
)

func TestNewScramCredential(t *testing.T) {
	for _, mech := range scramMechanisms {
		t.Run(mech, func(t *testing.T) {
			c, err := NewScramCredential(mech, "correct horse", MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !c.VerifyPassword("correct horse") {
				t.Fatal("VerifyPassword rejects the password")
			}
			for _, wrong := range []string{"", "correct horsE", "correct horse "} {
				if c.VerifyPassword(wrong) {
					t.Fatalf("VerifyPassword accepts %q", wrong)
				}
			}
			// SASLprep maps a no-break space to a space: the same password.
			if !c.VerifyPassword("correct\u00a0horse") {
				t.Fatal("VerifyPassword does not SASLprep")
			}
			again, err := NewScramCredential(mech, "correct horse", MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(again.Salt, c.Salt) || bytes.Equal(again.StoredKey, c.StoredKey) {
				t.Fatal("two credentials of one password share a salt")
			}
		})
	}
}

func TestNewScramCredentialRefusals(t *testing.T) {
	cases := map[string]struct {
		mech, pass string
		iters      int
	}{
		"too few iterations":  {MechanismScramSHA256, "pw", MinIterations - 1},
		"too many iterations": {MechanismScramSHA512, "pw", MaxIterations + 1},
		"unknown mechanism":   {"SCRAM-SHA-1", "pw", MinIterations},
		"plain is no scram":   {MechanismPlain, "pw", MinIterations},
		"empty password":      {MechanismScramSHA256, "", MinIterations},
		"saslprep refuses":    {MechanismScramSHA256, "pw\u0007", MinIterations}, // a control character
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewScramCredential(tc.mech, tc.pass, tc.iters)
			if !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("err = %v, want ErrInvalidCredential", err)
			}
		})
	}
}

// TestScramCredentialFromSaltedPassword: the KIP-554 form (salt and salted
// password) gives the same keys as deriving from the password.
func TestScramCredentialFromSaltedPassword(t *testing.T) {
	for _, mech := range scramMechanisms {
		t.Run(mech, func(t *testing.T) {
			c, err := NewScramCredential(mech, "pw-123", 5000)
			if err != nil {
				t.Fatal(err)
			}
			newHash, size := sha256.New, sha256.Size
			if mech == MechanismScramSHA512 {
				newHash, size = sha512.New, sha512.Size
			}
			salted, err := pbkdf2.Key(newHash, "pw-123", c.Salt, c.Iterations, size)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScramCredentialFromSaltedPassword(mech, c.Salt, salted, c.Iterations)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.StoredKey, c.StoredKey) || !bytes.Equal(got.ServerKey, c.ServerKey) {
				t.Fatal("keys differ from the password derivation")
			}
			if !got.VerifyPassword("pw-123") {
				t.Fatal("VerifyPassword rejects the password")
			}
			if _, err := ScramCredentialFromSaltedPassword(mech, c.Salt, salted[1:], c.Iterations); !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("short salted password: %v", err)
			}
			if _, err := ScramCredentialFromSaltedPassword(mech, nil, salted, c.Iterations); !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("no salt: %v", err)
			}
		})
	}
}

func TestScramCredentialValidate(t *testing.T) {
	good := testUsers()[MechanismScramSHA512]["alice"].cred
	breakers := map[string]func(*ScramCredential){
		"mechanism":  func(c *ScramCredential) { c.Mechanism = "SCRAM-SHA-1" },
		"iterations": func(c *ScramCredential) { c.Iterations = 1 << 30 },
		"salt":       func(c *ScramCredential) { c.Salt = nil },
		"stored key": func(c *ScramCredential) { c.StoredKey = c.StoredKey[:32] },
		"server key": func(c *ScramCredential) { c.ServerKey = nil },
	}
	for name, breakIt := range breakers {
		c := good
		breakIt(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("%s: Validate = %v", name, err)
		}
		if c.VerifyPassword("alice-secret") {
			t.Errorf("%s: an invalid credential verifies a password", name)
		}
	}
}

func TestCheckBasic(t *testing.T) {
	lookup := testUsers().lookup
	if p, err := CheckBasic(lookup, "alice", "alice-secret"); err != nil || p != (Principal{"acme", "alice"}) {
		t.Fatalf("alice: %v, %v", p, err)
	}
	if p, err := CheckBasic(lookup, "bob", "bob-secret"); err != nil || p != (Principal{"acme", "bob"}) {
		t.Fatalf("bob (SHA-256 only): %v, %v", p, err)
	}
	_, errWrong := CheckBasic(lookup, "alice", "bob-secret")
	_, errUnknown := CheckBasic(lookup, "mallory", "bob-secret")
	_, errEmpty := CheckBasic(lookup, "alice", "")
	for _, err := range []error{errWrong, errUnknown, errEmpty} {
		if !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("err = %v, want ErrAuthenticationFailed", err)
		}
	}
	if errWrong.Error() != errUnknown.Error() {
		t.Fatalf("texts differ: %q vs %q", errWrong, errUnknown)
	}
}

func TestPrincipal(t *testing.T) {
	p := Principal{Tenant: "acme", User: "alice"}
	if p.String() != "User:alice" {
		t.Fatalf("String = %q", p)
	}
	if Anonymous.String() != "User:ANONYMOUS" || Anonymous.Tenant != "default" || !Anonymous.IsAnonymous() || p.IsAnonymous() {
		t.Fatalf("Anonymous = %+v", Anonymous)
	}
}
