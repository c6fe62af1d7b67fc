package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// shortTTL is the lease TTL of tests that wait for an expiry (etcd's
// minimum with the embedded member's default election timeout).
const shortTTL = 2 * time.Second

// pollInterval is how often waitUntil checks its condition.
const pollInterval = 20 * time.Millisecond

// waitUntil polls cond until it holds, failing the test with what at the deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// waitClosedSignal waits for ch to close, failing the test at the deadline.
func waitClosedSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	select {
	case <-ch:
	case <-deadline.C:
		t.Fatalf("%s: not signalled before the deadline", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testBroker(id int32) BrokerInfo {
	return BrokerInfo{
		NodeID: id,
		AZ:     fmt.Sprintf("az-%d", id),
		Kafka:  fmt.Sprintf("127.0.0.1:%d", 9092+id),
		HTTP:   fmt.Sprintf("127.0.0.1:%d", 8080+id),

		InterBroker: fmt.Sprintf("127.0.0.1:%d", 9192+id),
	}
}

func nodeIDs(brokers []BrokerInfo) []int32 {
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.NodeID
	}
	return ids
}

// register registers b and closes the registration at the end of the test.
func register(t *testing.T, s *Store, b BrokerInfo, ttl time.Duration) *Registration {
	t.Helper()
	r, err := s.Register(testContext(t), b, ttl)
	if err != nil {
		t.Fatalf("Register node %d: %v", b.NodeID, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

func brokerIDs(t *testing.T, s *Store) []int32 {
	t.Helper()
	brokers, err := s.Brokers(testContext(t))
	if err != nil {
		t.Fatalf("Brokers: %v", err)
	}
	return nodeIDs(brokers)
}

// clientStore opens a Store with no embedded member, on s's etcd: another
// broker process of the same cluster.
func clientStore(t *testing.T, s *Store) *Store {
	t.Helper()
	return openStore(t, Config{Endpoints: s.Client().Endpoints(), StartTimeout: testTimeout})
}

func TestRegisterListAndClose(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	started := time.UnixMilli(1767000000123)
	b2 := testBroker(2)
	b2.Started = started
	r2 := register(t, s, b2, 0)
	r1 := register(t, s, testBroker(1), 0)

	brokers, err := s.Brokers(ctx)
	if err != nil {
		t.Fatalf("Brokers: %v", err)
	}
	if got := nodeIDs(brokers); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("Brokers = %v, want [1 2] (sorted by node id)", got)
	}
	got := brokers[1]
	want := r2.Info()
	if !sameBroker(got, want) || !got.Started.Equal(started) || got.AZ != "az-2" || got.Kafka != b2.Kafka || got.HTTP != b2.HTTP ||
		got.InterBroker != b2.InterBroker {
		t.Errorf("listed broker %+v, want %+v", got, want)
	}
	if got.Incarnation == 0 || got.Lease == 0 {
		t.Errorf("listed broker has incarnation %d lease %x, want both set", got.Incarnation, got.Lease)
	}
	ttl, err := s.Client().TimeToLive(ctx, got.Lease)
	if err != nil || ttl.GrantedTTL != int64(DefaultRegistrationTTL/time.Second) {
		t.Errorf("lease TTL %+v (err %v), want granted %v", ttl, err, DefaultRegistrationTTL)
	}

	if err := r1.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := brokerIDs(t, s); !slices.Equal(got, []int32{2}) {
		t.Fatalf("Brokers right after Close = %v, want [2]", got)
	}
	if isClosed(r1.Lost()) {
		t.Error("Lost closed by Close: a deliberate close is not a loss")
	}
	if err := r1.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRegisterRefusesLiveNodeID(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := clientStore(t, s) // a second broker process started with the same --node-id
	ctx := testContext(t)
	first := register(t, s, testBroker(7), 0)

	leases, err := s.Client().Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	dup := testBroker(7)
	dup.AZ = "elsewhere"
	for _, st := range []*Store{s, other} {
		_, err := st.Register(ctx, dup, 0)
		if !errors.Is(err, ErrNodeIDInUse) {
			t.Fatalf("second Register of node 7: %v, want ErrNodeIDInUse", err)
		}
		if !strings.Contains(err.Error(), "node 7") {
			t.Errorf("error %q does not name the node id", err)
		}
	}
	after, err := s.Client().Leases(ctx)
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	if len(after.Leases) != len(leases.Leases) {
		t.Errorf("refused Registers left leases behind: %d before, %d after", len(leases.Leases), len(after.Leases))
	}
	brokers, err := s.Brokers(ctx)
	if err != nil || len(brokers) != 1 || !sameBroker(brokers[0], first.Info()) {
		t.Fatalf("Brokers = %+v (err %v), want only the first registration", brokers, err)
	}

	if err := first.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	second := register(t, other, dup, 0)
	if second.Info().Incarnation <= first.Info().Incarnation {
		t.Errorf("new incarnation %d not above the old %d", second.Info().Incarnation, first.Info().Incarnation)
	}
	brokers, err = s.Brokers(ctx)
	if err != nil || len(brokers) != 1 || brokers[0].AZ != "elsewhere" {
		t.Fatalf("Brokers = %+v (err %v), want the second registration", brokers, err)
	}
}

func TestRegistrationLostWhenLeaseRevoked(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	r := register(t, s, testBroker(3), shortTTL)
	other := clientStore(t, s)
	if _, err := other.Client().Revoke(ctx, r.Info().Lease); err != nil {
		t.Fatalf("Revoke from another client: %v", err)
	}
	if got := brokerIDs(t, s); len(got) != 0 {
		t.Errorf("Brokers after revoke = %v, want none", got)
	}
	waitClosedSignal(t, r.Lost(), "Lost after the lease was revoked elsewhere")
	if err := r.Close(ctx); err != nil {
		t.Errorf("Close after loss: %v", err)
	}
	// The node id is free again.
	register(t, s, testBroker(3), shortTTL)
}

func TestRegistrationExpiresWhenKeepAliveStops(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	dying := clientStore(t, s)
	r := register(t, dying, testBroker(4), shortTTL)

	// Closing the broker's Store stops the keep-alive without revoking: a crash.
	closed := time.Now()
	if err := dying.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosedSignal(t, r.Lost(), "Lost after the store closed")
	if got := brokerIDs(t, s); !slices.Equal(got, []int32{4}) {
		t.Fatalf("Brokers right after the crash = %v, want [4] until the lease expires", got)
	}
	waitUntil(t, "the crashed broker's lease expires", func() bool { return len(brokerIDs(t, s)) == 0 })
	t.Logf("registration with TTL %v gone %v after its keep-alive stopped", shortTTL, time.Since(closed).Round(time.Millisecond))
	if err := r.Close(ctx); err != nil {
		t.Errorf("Close after loss: %v", err)
	}
}

func TestRegistrationLostWhenEtcdUnreachable(t *testing.T) {
	server := openStore(t, embeddedConfig(t))
	broker := clientStore(t, server)
	r := register(t, broker, testBroker(5), shortTTL)
	stopped := time.Now()
	if err := server.Close(); err != nil {
		t.Fatalf("Close etcd: %v", err)
	}
	waitClosedSignal(t, r.Lost(), "Lost while etcd is unreachable")
	t.Logf("registration with TTL %v reported lost %v after etcd stopped", shortTTL, time.Since(stopped).Round(time.Millisecond))
}

func TestRegisterValidates(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	tests := []struct {
		name string
		edit func(*BrokerInfo)
	}{
		{"negative node id", func(b *BrokerInfo) { b.NodeID = -1 }},
		{"empty az", func(b *BrokerInfo) { b.AZ = " " }},
		{"kafka without port", func(b *BrokerInfo) { b.Kafka = "127.0.0.1" }},
		{"kafka without host", func(b *BrokerInfo) { b.Kafka = ":9092" }},
		{"kafka port zero", func(b *BrokerInfo) { b.Kafka = "h:0" }},
		{"http port not a number", func(b *BrokerInfo) { b.HTTP = "h:http" }},
		{"http empty", func(b *BrokerInfo) { b.HTTP = "" }},
		{"inter-broker without host", func(b *BrokerInfo) { b.InterBroker = ":9093" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBroker(1)
			tt.edit(&b)
			if _, err := s.Register(ctx, b, 0); !errors.Is(err, ErrInvalidBroker) {
				t.Fatalf("Register(%+v) = %v, want ErrInvalidBroker", b, err)
			}
		})
	}
	if _, err := s.Register(ctx, testBroker(1), -time.Second); !errors.Is(err, ErrInvalidBroker) {
		t.Errorf("Register with negative ttl = %v, want ErrInvalidBroker", err)
	}
	if err := testBroker(0).Validate(); err != nil {
		t.Errorf("node 0 refused: %v", err)
	}
	if got := brokerIDs(t, s); len(got) != 0 {
		t.Errorf("invalid registrations stored: %v", got)
	}
}

func TestBrokersRefusesUnreadableRecords(t *testing.T) {
	tests := []struct {
		name, key, val string
		want           error
	}{
		{"newer version", "9", `{"v":2,"node_id":9}`, ErrUnknownVersion},
		{"not json", "9", `{`, ErrCorrupt},
		{"node id mismatch", "9", `{"v":1,"node_id":8,"az":"a","kafka":"h:1","http":"h:2"}`, ErrCorrupt},
		{"key not a number", "x", `{"v":1,"node_id":9}`, ErrCorrupt},
	}
	s := openStore(t, embeddedConfig(t))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			key := s.brokersPrefix() + tt.key
			if _, err := s.Client().Put(ctx, key, tt.val); err != nil {
				t.Fatalf("Put: %v", err)
			}
			t.Cleanup(func() { _, _ = s.Client().Delete(context.Background(), key) })
			if _, err := s.Brokers(ctx); !errors.Is(err, tt.want) {
				t.Fatalf("Brokers = %v, want %v", err, tt.want)
			}
		})
	}
}

// nextBrokers waits for a list whose node ids are want, failing at the deadline.
func nextBrokers(t *testing.T, ch <-chan []BrokerInfo, want ...int32) []BrokerInfo {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	var last []int32
	for {
		select {
		case list, ok := <-ch:
			if !ok {
				t.Fatalf("broker watch closed while waiting for %v", want)
			}
			if last = nodeIDs(list); slices.Equal(last, want) {
				return list
			}
		case <-deadline.C:
			t.Fatalf("broker watch: no list %v before the deadline (last %v)", want, last)
		}
	}
}

func TestWatchBrokersSeesJoinsAndLeaves(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := clientStore(t, s)
	ctx := testContext(t)
	register(t, s, testBroker(1), 0)
	wctx, cancel := context.WithCancel(ctx)
	lists := s.WatchBrokers(wctx)
	nextBrokers(t, lists, 1) // the state at the call comes first

	r2 := register(t, other, testBroker(2), 0)
	r0 := register(t, s, testBroker(0), 0)
	list := nextBrokers(t, lists, 0, 1, 2)
	if !sameBroker(list[2], r2.Info()) {
		t.Errorf("watched broker %+v, want %+v", list[2], r2.Info())
	}
	if err := r0.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	nextBrokers(t, lists, 1, 2)
	if err := other.Close(); err != nil { // broker 2 crashes: it leaves when its lease expires
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Client().Revoke(ctx, r2.Info().Lease); err != nil { // ... or is revoked at once
		t.Fatalf("Revoke: %v", err)
	}
	nextBrokers(t, lists, 1)

	cancel()
	drainWithin(t, lists, "the broker watch to close after its cancel")
}

func TestWatchBrokersClosesWithStore(t *testing.T) {
	s, err := Open(testContext(t), embeddedConfig(t), zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	lists := s.WatchBrokers(testContext(t))
	nextBrokers(t, lists)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	drainWithin(t, lists, "the broker watch to close with the store")
	if _, ok := recvWithin(t, s.WatchBrokers(testContext(t)), "a broker watch on a closed store to close"); ok {
		t.Error("WatchBrokers on a closed store sent a list")
	}
	if _, err := s.Register(testContext(t), testBroker(1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Register on a closed store = %v, want ErrClosed", err)
	}
}

func TestWatchBrokersKeepsOnlyNewestList(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	w := &brokerWatcher{s: s, out: make(chan []BrokerInfo, 1)}
	w.publish([]BrokerInfo{testBroker(1)})
	w.publish([]BrokerInfo{testBroker(1), testBroker(2)}) // must not block on the unread list
	list, _ := recvWithin(t, w.out, "the published list")
	if got := nodeIDs(list); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("reader got %v, want the newest list [1 2]", got)
	}
}

// TestRegisterTakingOverPreviousIncarnation: a broker crashes (its Store
// closes without revoking) and restarts at once. Its key still lives for
// the lease's TTL; RegisterTakingOver with any other lease is refused, and
// with the lease the crashed incarnation recorded it succeeds at once.
func TestRegisterTakingOverPreviousIncarnation(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	const longTTL = time.Minute // far beyond the test: only a takeover frees the key
	crashed := clientStore(t, s)
	old := register(t, crashed, testBroker(6), longTTL)
	if err := crashed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosedSignal(t, old.Lost(), "Lost after the store closed")

	restarted := testBroker(6)
	restarted.AZ = "az-after-restart"
	if _, err := s.Register(ctx, restarted, 0); !errors.Is(err, ErrNodeIDInUse) {
		t.Fatalf("Register during the old lease = %v, want ErrNodeIDInUse", err)
	}
	other, err := s.Client().Grant(ctx, 60)
	if err != nil {
		t.Fatalf("Grant: %v", err)
	}
	for _, prev := range []clientv3.LeaseID{other.ID, old.Info().Lease + 1} {
		if _, err := s.RegisterTakingOver(ctx, restarted, 0, prev); !errors.Is(err, ErrNodeIDInUse) {
			t.Fatalf("RegisterTakingOver with lease %x (not the holder) = %v, want ErrNodeIDInUse", prev, err)
		}
	}
	if ttl, err := s.Client().TimeToLive(ctx, other.ID); err != nil || ttl.TTL <= 0 {
		t.Fatalf("the wrong lease was touched: TTL %v, err %v", ttl, err)
	}

	r, err := s.RegisterTakingOver(ctx, restarted, 0, old.Info().Lease)
	if err != nil {
		t.Fatalf("RegisterTakingOver with the previous lease: %v", err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	if r.Info().Incarnation <= old.Info().Incarnation || r.Info().Lease == old.Info().Lease {
		t.Errorf("new registration %+v does not follow the old %+v", r.Info(), old.Info())
	}
	if ttl, err := s.Client().TimeToLive(ctx, old.Info().Lease); err != nil || ttl.TTL != -1 {
		t.Errorf("previous lease still alive: TTL %v, err %v", ttl.TTL, err)
	}
	brokers, err := s.Brokers(ctx)
	if err != nil || len(brokers) != 1 || !sameBroker(brokers[0], r.Info()) || brokers[0].AZ != "az-after-restart" {
		t.Fatalf("Brokers = %+v (err %v), want the new registration only", brokers, err)
	}

	// With nothing to take over it is Register; a live holder is not taken over twice.
	if _, err := s.RegisterTakingOver(ctx, restarted, 0, old.Info().Lease); !errors.Is(err, ErrNodeIDInUse) {
		t.Fatalf("RegisterTakingOver of a live new incarnation = %v, want ErrNodeIDInUse", err)
	}
	fresh, err := s.RegisterTakingOver(ctx, testBroker(8), 0, old.Info().Lease)
	if err != nil {
		t.Fatalf("RegisterTakingOver of a free node id: %v", err)
	}
	_ = fresh.Close(ctx)
}

// TestRegistrationHeldUntil: HeldUntil starts within the granted TTL of the
// registration and moves forward as keep-alives are answered, never past
// what the lease can still hold.
func TestRegistrationHeldUntil(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	before := time.Now()
	reg, err := s.Register(context.Background(), testBroker(1), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	first := reg.HeldUntil()
	if first.Before(before) || first.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("held until %v, registered between %v and now (+2s)", first, before)
	}
	waitUntil(t, "HeldUntil moves with the keep-alives", func() bool { return reg.HeldUntil().After(first) })
	if got := reg.HeldUntil(); got.After(time.Now().Add(2 * time.Second)) {
		t.Fatalf("held until %v, beyond a full TTL from now", got)
	}
}
