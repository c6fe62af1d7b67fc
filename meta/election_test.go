package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startCluster starts n embedded etcd members on free ports as one cluster
// (Config.InitialCluster) and returns a Store on each, each talking only to
// its own member: n brokers with embedded etcd. They are closed at the end
// of the test (Close is idempotent, so a test may close one earlier).
func startCluster(t *testing.T, n int) []*Store {
	t.Helper()
	return startClusterWith(t, n, func(*Config) {})
}

// startClusterWith is startCluster with each member's Config changed by
// tune (before its peer URL is taken from it).
func startClusterWith(t *testing.T, n int, tune func(*Config)) []*Store {
	t.Helper()
	// A port picked free can be taken before a member binds it: start
	// again on fresh ports when that happens.
	for attempt := 1; ; attempt++ {
		stores, err := tryStartCluster(t, n, tune)
		if err == nil {
			return stores
		}
		if !strings.Contains(err.Error(), "address already in use") || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; starting again on fresh ports", attempt, err)
	}
}

func tryStartCluster(t *testing.T, n int, tune func(*Config)) ([]*Store, error) {
	t.Helper()
	cfgs := make([]Config, n)
	members := make([]string, n)
	for i := range cfgs {
		cfgs[i] = Config{
			DataDir:      t.TempDir(),
			Name:         fmt.Sprint(i + 1),
			ListenClient: freeAddr(t),
			ListenPeer:   freeAddr(t),
			StartTimeout: testTimeout,
		}
		tune(&cfgs[i])
		peer := cfgs[i].peerURL(cfgs[i].ListenPeer)
		members[i] = cfgs[i].Name + "=" + peer.String()
	}
	stores := make([]*Store, n)
	errs := make([]error, n)
	// A member that cannot bind never joins; the others would wait for it
	// until testTimeout: stop waiting as soon as one fails.
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(members, ",")
		wg.Add(1)
		go func() { // members start together: none is ready before a quorum is up
			defer wg.Done()
			stores[i], errs[i] = Open(ctx, cfgs[i], zerolog.Nop())
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("Open member %d of %d: %w", i+1, n, err)
		// The members stopped by the cancel report that; the cause is the
		// one that could not bind.
		if first == nil || strings.Contains(err.Error(), "address already in use") {
			first = err
		}
	}
	if first != nil {
		for _, s := range stores {
			if s != nil {
				_ = s.Close()
			}
		}
		return nil, first
	}
	t.Cleanup(func() {
		for _, s := range stores {
			_ = s.Close()
		}
	})
	return stores, nil
}

// campaignResult is what one asynchronous Campaign returned, and when.
type campaignResult struct {
	node int32
	c    *Controller
	err  error
	at   time.Time
}

// campaignAll starts a Campaign for each store (node ids 1..n) and returns
// the channel their results arrive on. The campaigns end with the test.
func campaignAll(t *testing.T, stores []*Store, ttl time.Duration) <-chan campaignResult {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	results := make(chan campaignResult, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := int32(i + 1)
			c, err := s.Campaign(ctx, node, ttl)
			results <- campaignResult{node: node, c: c, err: err, at: time.Now()}
		}()
	}
	t.Cleanup(func() {
		cancel()
		waitGroupWithin(t, &wg, "the campaigns to return after their cancel")
	})
	return results
}

// nextController waits for the next campaign to win.
func nextController(t *testing.T, results <-chan campaignResult) campaignResult {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	select {
	case r := <-results:
		if r.err != nil {
			t.Fatalf("Campaign of node %d: %v", r.node, r.err)
		}
		return r
	case <-deadline.C:
		t.Fatal("no controller elected before the deadline")
	}
	return campaignResult{}
}

// assertController checks that s reports node as controller at epoch.
func assertController(t *testing.T, s *Store, node int32, epoch int64) {
	t.Helper()
	id, got, err := s.ControllerID(testContext(t))
	if err != nil {
		t.Fatalf("ControllerID: %v", err)
	}
	if id != node || got != epoch {
		t.Fatalf("ControllerID = node %d epoch %d, want node %d epoch %d", id, got, node, epoch)
	}
}

// guardedPut writes key under c's IfLeader fence through s and reports
// whether the transaction succeeded.
func guardedPut(t *testing.T, s *Store, c *Controller, key string) bool {
	t.Helper()
	resp, err := s.Client().Txn(testContext(t)).If(c.IfLeader()).
		Then(clientv3.OpPut(s.Prefix()+"test/"+key, fmt.Sprint(c.Epoch()))).Commit()
	if err != nil {
		t.Fatalf("guarded txn: %v", err)
	}
	return resp.Succeeded
}

func TestCampaignSingleAndResign(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if id, epoch, err := s.ControllerID(ctx); err != nil || id != -1 || epoch != 0 {
		t.Fatalf("ControllerID before any campaign = %d, %d, %v; want -1, 0, nil", id, epoch, err)
	}
	c, err := s.Campaign(ctx, 0, shortTTL)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if c.Epoch() <= 0 || c.NodeID() != 0 {
		t.Fatalf("controller node %d epoch %d", c.NodeID(), c.Epoch())
	}
	assertController(t, s, 0, c.Epoch())
	if !guardedPut(t, s, c, "while-leader") {
		t.Fatal("IfLeader transaction failed while leader")
	}
	if err := c.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !isClosed(c.Lost()) {
		t.Error("Lost not closed when Resign returned")
	}
	if id, _, err := s.ControllerID(ctx); err != nil || id != -1 {
		t.Errorf("ControllerID after Resign = %d, %v; want -1", id, err)
	}
	if guardedPut(t, s, c, "after-resign") {
		t.Error("IfLeader transaction succeeded after Resign")
	}
	if err := c.Resign(ctx); err != nil {
		t.Errorf("second Resign: %v", err)
	}
	// Campaigning again wins at once, with a greater epoch.
	again, err := s.Campaign(ctx, 0, shortTTL)
	if err != nil {
		t.Fatalf("second Campaign: %v", err)
	}
	defer func() { _ = again.Resign(ctx) }()
	if again.Epoch() <= c.Epoch() {
		t.Errorf("epoch %d after re-election, want above %d", again.Epoch(), c.Epoch())
	}
}

func TestCampaignGivesUpWhenContextEnds(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	leader, err := s.Campaign(ctx, 1, shortTTL)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	defer func() { _ = leader.Resign(ctx) }()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := s.Campaign(short, 2, shortTTL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign while another leads = %v, want DeadlineExceeded", err)
	}
	resp, err := s.Client().Get(ctx, s.electionPrefix()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if resp.Count != 1 {
		t.Errorf("%d election keys after the abandoned campaign, want only the leader's", resp.Count)
	}
	assertController(t, s, 1, leader.Epoch())
}

// TestControllerFailover runs three brokers with a three-member embedded
// etcd: one is elected; when it resigns another takes over at once, and
// when that one dies (its Store and etcd member stop without resigning) the
// last takes over once the session lease expires. Each successor has a
// greater epoch and each predecessor's fenced writes fail.
func TestControllerFailover(t *testing.T) {
	stores := startCluster(t, 3)
	results := campaignAll(t, stores, shortTTL)

	first := nextController(t, results)
	store := func(r campaignResult) *Store { return stores[r.node-1] }
	for _, s := range stores {
		assertController(t, s, first.node, first.c.Epoch())
	}
	select {
	case r := <-results:
		t.Fatalf("node %d won while node %d leads (err %v)", r.node, first.node, r.err)
	default:
	}
	if !guardedPut(t, store(first), first.c, "first") {
		t.Fatal("first controller's fenced write failed while it leads")
	}

	// Resign: a successor is elected as soon as the key is gone.
	resigned := time.Now()
	if err := first.c.Resign(testContext(t)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	second := nextController(t, results)
	t.Logf("failover after Resign: node %d -> node %d in %v", first.node, second.node, second.at.Sub(resigned).Round(time.Millisecond))
	if second.c.Epoch() <= first.c.Epoch() {
		t.Errorf("epoch %d after failover, want above %d", second.c.Epoch(), first.c.Epoch())
	}
	if guardedPut(t, store(second), first.c, "deposed-first") {
		t.Error("the resigned controller's fenced write succeeded")
	}
	assertController(t, store(first), second.node, second.c.Epoch())

	// Death: the second controller's broker stops without resigning.
	var third campaignResult
	died := time.Now()
	if err := store(second).Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosedSignal(t, second.c.Lost(), "Lost after the store closed")
	third = nextController(t, results)
	t.Logf("failover after death: node %d -> node %d in %v (session TTL %v)", second.node, third.node, third.at.Sub(died).Round(time.Millisecond), shortTTL)
	if third.node == first.node {
		t.Fatalf("node %d, which resigned and left the race, was elected", third.node)
	}
	if third.c.Epoch() <= second.c.Epoch() {
		t.Errorf("epoch %d after failover, want above %d", third.c.Epoch(), second.c.Epoch())
	}
	if guardedPut(t, store(third), second.c, "deposed-second") {
		t.Error("the dead controller's fenced write succeeded")
	}
	if !guardedPut(t, store(third), third.c, "third") {
		t.Error("the new controller's fenced write failed")
	}
	assertController(t, store(first), third.node, third.c.Epoch())
	if isClosed(third.c.Lost()) {
		t.Error("the new controller's Lost is closed")
	}
	if err := third.c.Resign(testContext(t)); err != nil {
		t.Errorf("Resign: %v", err)
	}
}

func TestControllerLostWhenSessionRevoked(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := clientStore(t, s)
	ctx := testContext(t)
	c, err := s.Campaign(ctx, 1, shortTTL)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	follower := campaignAll(t, []*Store{other}, shortTTL)
	if _, err := s.Client().Revoke(ctx, c.session.Lease()); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	waitClosedSignal(t, c.Lost(), "Lost after the session lease was revoked")
	next := nextController(t, follower)
	if next.c.Epoch() <= c.Epoch() {
		t.Errorf("epoch %d after revoke, want above %d", next.c.Epoch(), c.Epoch())
	}
	if guardedPut(t, s, c, "revoked") {
		t.Error("the revoked controller's fenced write succeeded")
	}
	if err := c.Resign(ctx); err != nil {
		t.Errorf("Resign after loss: %v", err)
	}
	if err := next.c.Resign(ctx); err != nil {
		t.Errorf("Resign: %v", err)
	}
}

func TestControllerIDRefusesCorruptValue(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, err := s.Client().Put(ctx, s.electionPrefix()+"/1234", "not-a-node"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, _, err := s.ControllerID(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ControllerID = %v, want ErrCorrupt", err)
	}
}

func TestCampaignOnClosedStore(t *testing.T) {
	s, err := Open(testContext(t), embeddedConfig(t), zerolog.Nop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Campaign(testContext(t), 1, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Campaign on a closed store = %v, want ErrClosed", err)
	}
}
