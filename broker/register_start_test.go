package broker

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/meta"
)

// A broker whose data directory was wiped while it was down does not know
// the lease its previous incarnation registered under, which lives on for
// the registration TTL. It waits for that lease to lapse and starts; it
// used to exit with "node id already registered", so a replaced disk could
// not rejoin until an operator retried (chaos disk-loss).
func TestBrokerOnAWipedDiskWaitsForItsOldLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	endpoints := startExternalEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second

	// The previous incarnation: registered, then gone without revoking
	// its lease (a crash), its data directory lost with it.
	old, err := meta.Open(ctx, meta.Config{Endpoints: endpoints}, zerolog.Nop())
	if err != nil {
		t.Fatalf("open meta: %v", err)
	}
	if _, err := old.Register(ctx, meta.BrokerInfo{NodeID: 1, AZ: "a", Kafka: "127.0.0.1:1", HTTP: "127.0.0.1:2"}, ttl); err != nil {
		t.Fatalf("register the old incarnation: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Fatalf("close the old incarnation's store: %v", err)
	}

	cfg := testBrokerConfig(t) // a fresh, empty data directory
	cfg.NodeID, cfg.AZ = 1, "a"
	cfg.Meta.Endpoints = endpoints
	cfg.RegistrationTTL = ttl
	start := time.Now()
	b, _, err := tryStartBroker(t, cfg)
	if err != nil {
		t.Fatalf("broker on a wiped disk did not start: %v", err)
	}
	t.Logf("ready after %v", time.Since(start).Round(10*time.Millisecond))
	reg := b.OwnRegistration()
	if reg == nil || reg.Info().NodeID != 1 {
		t.Fatalf("registration %+v, want node 1", reg)
	}
}
