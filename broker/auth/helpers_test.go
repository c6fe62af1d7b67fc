package auth

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// credStore is a CredentialLookup over a map: mechanism → user → entry.
type credStore map[string]map[string]storeEntry

type storeEntry struct {
	cred   ScramCredential
	tenant string
}

func (cs credStore) lookup(mechanism, user string) (ScramCredential, string, bool) {
	e, ok := cs[mechanism][user]
	return e.cred, e.tenant, ok
}

func (cs credStore) add(tenant, user, password string, mechanisms ...string) {
	for _, m := range mechanisms {
		cred, err := NewScramCredential(m, password, DefaultIterations)
		if err != nil {
			panic(fmt.Sprintf("NewScramCredential(%s, %s): %v", m, user, err))
		}
		if cs[m] == nil {
			cs[m] = map[string]storeEntry{}
		}
		cs[m][user] = storeEntry{cred: cred, tenant: tenant}
	}
}

// testUsers: alice (tenant acme, both SCRAM mechanisms), bob (tenant acme,
// SHA-256 only), carol (tenant globex, both). Built once: PBKDF2 is the
// slow part of these tests.
var testUsers = sync.OnceValue(func() credStore {
	cs := credStore{}
	cs.add("acme", "alice", "alice-secret", MechanismScramSHA256, MechanismScramSHA512)
	cs.add("acme", "bob", "bob-secret", MechanismScramSHA256)
	cs.add("globex", "carol", "carol-secret", MechanismScramSHA256, MechanismScramSHA512)
	return cs
})

// fakeClock is a settable clock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// newTestSession makes a session over testUsers with every mechanism.
func newTestSession(t testing.TB, mutate func(*SessionConfig)) *Session {
	t.Helper()
	cfg := SessionConfig{
		Mechanisms: []string{MechanismScramSHA512, MechanismScramSHA256, MechanismPlain},
		Lookup:     testUsers().lookup,
		AllowPlain: true,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := NewSession(cfg)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return s
}

// seededRand is a deterministic entropy source for reproducible nonces.
func seededRand(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	s[0] = byte(seed)
	return rand.NewChaCha8(s)
}
