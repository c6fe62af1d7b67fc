package node

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/quota"
)

// TestMutationBucket drives controller_mutation_rate's token bucket with an
// injected clock: a full bucket admits one large mutation (the debt is
// allowed, KIP-599's lenient mode), the next waits until the debt is
// repaid, and the wait named is that time; another tenant is not touched.
func TestMutationBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	cfg.Quotas = quota.Static{"acme": {quota.ControllerMutationRate: 2}}
	b := New(cfg, zerolog.Nop())

	if err := b.admitMutation("acme~a", 10, "creating a"); err != nil {
		t.Fatalf("a full bucket refused: %v", err)
	}
	err := b.admitMutation("acme~b", 1, "creating b")
	var te *ThrottleError
	if !errors.As(err, &te) || te.Wait != 4*time.Second || ThrottleMillis(err) != 4000 {
		t.Fatalf("in debt of 8 at 2/s: %v (%+v), want a 4s throttle", err, te)
	}
	if err := b.admitMutation("globex~x", 100, "creating x"); err != nil {
		t.Fatalf("a tenant without the quota was throttled: %v", err)
	}
	now = now.Add(3 * time.Second)
	if err := b.admitMutation("acme~b", 1, "creating b"); err == nil || ThrottleMillis(err) != 1000 {
		t.Fatalf("after 3s of 4: %v, want a 1s throttle", err)
	}
	now = now.Add(1 * time.Second)
	if err := b.admitMutation("acme~b", 1, "creating b"); err != nil {
		t.Fatalf("debt repaid, still refused: %v", err)
	}
}
