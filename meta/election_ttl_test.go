package meta

import (
	"testing"
	"time"
)

// A controller that dies leaves its partitions leaderless until its
// session lease expires and another broker wins the post, so the default
// lease is etcd's shortest (2 s with its default election timeout), and a
// controller whose process dies is replaced within about that long.
func TestCampaignDefaultLeaseReplacesADeadControllerQuickly(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	dying, heir := clientStore(t, s), clientStore(t, s)
	ctx := testContext(t)

	first := nextController(t, campaignAll(t, []*Store{dying}, 0))
	ttl, err := s.Client().TimeToLive(ctx, first.c.session.Lease())
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	if got, want := time.Duration(ttl.GrantedTTL)*time.Second, DefaultControllerTTL; got != want || want > 2*time.Second {
		t.Fatalf("a default campaign's session lease is %v (DefaultControllerTTL %v), want 2 s", got, want)
	}
	next := campaignAll(t, []*Store{heir}, 0)

	// Death: the client goes away without resigning; the lease is left to
	// expire.
	died := time.Now()
	if err := dying.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	second := nextController(t, next)
	took := second.at.Sub(died)
	t.Logf("a dead controller replaced after %v (default lease %v)", took.Round(time.Millisecond), DefaultControllerTTL)
	// The lease, plus etcd's check of expired leases (every 500 ms) and a
	// round trip.
	if limit := DefaultControllerTTL + 1500*time.Millisecond; took > limit {
		t.Errorf("a dead controller was replaced after %v, want within %v", took.Round(time.Millisecond), limit)
	}
}
