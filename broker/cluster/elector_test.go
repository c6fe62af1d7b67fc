package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/google/uuid"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
)

// fakeReplica stands in for another broker's replicas: one pure
// replica.Replica per partition behind an HTTP server, created on the first
// message about it. It steps the envelopes it receives, persists its hard
// state at once, and POSTs its messages for the controller to ctrlURL.
type fakeReplica struct {
	id      int32
	ctrlURL string
	srv     *httptest.Server

	mu sync.Mutex
	rs map[PartitionKey]*replica.Replica // guarded by mu
}

func newFakeReplica(t *testing.T, id int32, ctrlURL string) *fakeReplica {
	t.Helper()
	f := &fakeReplica{id: id, ctrlURL: ctrlURL, rs: map[PartitionKey]*replica.Replica{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeReplica) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// fenced is the epoch the replica of key promised; -1 if it heard nothing.
func (f *fakeReplica) fenced(key PartitionKey) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rs[key]
	if r == nil {
		return -1
	}
	return int32(r.Status().Fenced)
}

func (f *fakeReplica) serve(w http.ResponseWriter, r *http.Request) {
	var envs []envelope
	if err := json.NewDecoder(r.Body).Decode(&envs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out []envelope
	f.mu.Lock()
	for _, env := range envs {
		rp := f.rs[env.Key]
		if rp == nil {
			rp = replica.New(replica.Config{ID: replica.NodeID(f.id)}, replica.HardState{}, nil, 0, 0)
			f.rs[env.Key] = rp
		}
		rp.Step(env.Msg)
		for rp.HasReady() {
			rd := rp.Ready()
			for _, m := range rd.Messages {
				if m.To == replica.ControllerNode {
					out = append(out, envelope{Key: env.Key, Msg: m})
				}
			}
			rp.Advance()
			if rd.HardState != nil {
				rp.HardStateDurable(*rd.HardState) // "persisted" at once
			}
		}
	}
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if len(out) == 0 {
		return
	}
	body, _ := json.Marshal(out)
	resp, err := http.Post(f.ctrlURL+ReplicationPath, "application/json", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close() // lost answers are the core's to retry
	}
}

// electorFixture is a controller broker (node 9, not a replica) with its
// own embedded etcd, a partition with replicas 1, 2, 3 led by 1 at epoch 0,
// and fake replicas 2 and 3; broker 1 is not live.
type electorFixture struct {
	b      *Cluster
	store  *meta.Store
	state  meta.PartitionState
	fakes  map[int32]*fakeReplica
	ctx    context.Context
	cancel context.CancelFunc
}

func newElectorFixture(t *testing.T) *electorFixture {
	t.Helper()
	b := idleBroker(t, 9)
	store, err := meta.Open(context.Background(), b.Cfg.Meta, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	b.Store = store
	_, states, err := store.CreateTopicWithPartitions(context.Background(),
		meta.Topic{Name: "elect", ReplicationFactor: 3}, [][]int32{{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	// New partitions are created leaderless; these tests start from one
	// that broker 1 leads at epoch 0, as an older version wrote them.
	key := store.Prefix() + "partitions/" + uuid.UUID(states[0].TopicID).String() + "/0"
	if _, err := store.Client().Put(context.Background(), key, `{"v":1,"replicas":[1,2,3],"leader":1,"leader_epoch":0}`); err != nil {
		t.Fatal(err)
	}
	if states, err = store.Partitions(context.Background(), states[0].TopicID); err != nil || states[0].Leader != 1 {
		t.Fatalf("partition state %+v: %v", states, err)
	}
	fx := &electorFixture{b: b, store: store, state: states[0], fakes: map[int32]*fakeReplica{}}

	ctrl := httptest.NewServer(http.HandlerFunc(b.HTTPReplication))
	t.Cleanup(ctrl.Close)
	live := []meta.BrokerInfo{{NodeID: 9, InterBroker: strings.TrimPrefix(ctrl.URL, "http://")}}
	for _, id := range []int32{2, 3} {
		fx.fakes[id] = newFakeReplica(t, id, ctrl.URL)
		live = append(live, meta.BrokerInfo{NodeID: id, InterBroker: fx.fakes[id].addr()})
	}
	b.setLiveBrokers(live)
	b.controller.Store(9)
	startTransport(t, b)
	fx.ctx, fx.cancel = context.WithCancel(context.Background())
	t.Cleanup(fx.cancel)
	return fx
}

func (fx *electorFixture) key() PartitionKey {
	return PartitionKey{TopicID: fx.state.TopicID, Partition: fx.state.Partition}
}

// stored reads the partition's state from etcd.
func (fx *electorFixture) stored(t *testing.T) meta.PartitionState {
	t.Helper()
	states, err := fx.store.Partitions(context.Background(), fx.state.TopicID)
	if err != nil || len(states) != 1 {
		t.Fatalf("read partition: %v (%d states)", err, len(states))
	}
	return states[0]
}

// run runs fn on a goroutine and returns a channel closed when it returns;
// the test's end waits for it.
func (fx *electorFixture) run(t *testing.T, fn func()) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	t.Cleanup(func() {
		fx.cancel()
		waitClosed(t, "the elector's goroutine after its cancel", done)
	})
	return done
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not after 20s", what)
	}
}

func TestElectorElectsWhenLeaderNotLive(t *testing.T) {
	fx := newElectorFixture(t)
	c, err := fx.store.Campaign(fx.ctx, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := fx.run(t, func() { fx.b.runElections(fx.ctx, c) })

	var st meta.PartitionState
	brokertest.Eventually(t, 20*time.Second, "a new leader in etcd", func() bool {
		st = fx.stored(t)
		return st.LeaderEpoch > fx.state.LeaderEpoch
	})
	// Both live replicas have empty logs: the first in replica order wins.
	if st.Leader != 2 || st.LeaderEpoch < 1 || !slices.Equal(st.Replicas, []int32{1, 2, 3}) {
		t.Fatalf("elected %+v, want leader 2 at an epoch above 0, replicas unchanged", st)
	}
	// The winner and a quorum were fenced at the new epoch before the CAS.
	for id, f := range fx.fakes {
		if got := f.fenced(fx.key()); got != st.LeaderEpoch {
			t.Errorf("replica %d fenced at %d, want %d", id, got, st.LeaderEpoch)
		}
	}
	// The loop hears the CAS's answer after etcd shows its write.
	brokertest.Eventually(t, 20*time.Second, "the election counted as written", func() bool {
		return electionResults[0] == electionWritten && fx.b.repl.elections[0].Load() == 1
	})
	if fx.b.repl.elector.Load() == nil {
		t.Fatal("no elector published while the loop runs")
	}

	fx.cancel()
	waitClosed(t, "runElections returns when its context ends", done)
	if fx.b.repl.elector.Load() != nil {
		t.Fatal("elector still published after the loop returned")
	}
}

func TestElectorFollowsWatchAndLiveBrokers(t *testing.T) {
	fx := newElectorFixture(t)
	// All of 1, 2, 3 are "live" at first: nothing to elect.
	live := fx.b.Brokers()
	fx.b.setLiveBrokers(append(slices.Clone(live), meta.BrokerInfo{NodeID: 1, InterBroker: "127.0.0.1:1"}))
	c, err := fx.store.Campaign(fx.ctx, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	fx.run(t, func() { fx.b.runElections(fx.ctx, c) })
	brokertest.Eventually(t, 20*time.Second, "the elector runs", func() bool { return fx.b.repl.elector.Load() != nil })
	if got := fx.stored(t); got.LeaderEpoch != 0 || got.Leader != 1 {
		t.Fatalf("state moved to %+v with its leader live", got)
	}
	// Broker 1 leaves: the elector notices and elects.
	fx.b.setLiveBrokers(live)
	brokertest.Eventually(t, 20*time.Second, "a new leader after broker 1 left", func() bool { return fx.stored(t).LeaderEpoch > 0 })
	if got := fx.stored(t); got.Leader != 2 {
		t.Fatalf("elected %+v, want leader 2", got)
	}
	// A partition created after the loop started is followed from the
	// watch: its leader (1) is not live, so it is elected too.
	_, states, err := fx.store.CreateTopicWithPartitions(context.Background(),
		meta.Topic{Name: "later", ReplicationFactor: 3}, [][]int32{{1, 3, 2}})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 20*time.Second, "the later partition gets a leader", func() bool {
		ps, err := fx.store.Partitions(context.Background(), states[0].TopicID)
		return err == nil && len(ps) == 1 && ps[0].LeaderEpoch > 0 && ps[0].Leader == 3
	})
}

func TestElectorDeposedControllerStops(t *testing.T) {
	fx := newElectorFixture(t)
	c, err := fx.store.Campaign(fx.ctx, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Deposed before its first write. electLoop is runElections without
	// the Lost channel, so only the refused CAS can end it.
	if err := c.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := fx.run(t, func() { fx.b.electLoop(fx.ctx, c.IfLeader(), nil, c.Epoch()) })
	waitClosed(t, "the elector returns after its CAS is refused", done)
	if n := fx.b.repl.elections[3].Load(); electionResults[3] != electionDeposed || n != 1 {
		t.Fatalf("deposed elections %d, want 1", n)
	}
	if got := fx.stored(t); got.LeaderEpoch != 0 || got.Leader != 1 || got.Revision != fx.state.Revision {
		t.Fatalf("a deposed controller changed the state: %+v", got)
	}
	// The replicas were fenced (the round ran), but nobody was elected.
	for id, f := range fx.fakes {
		if f.fenced(fx.key()) < 1 {
			t.Errorf("replica %d not fenced", id)
		}
	}
	if fx.b.repl.elector.Load() != nil {
		t.Fatal("elector still published after the loop returned")
	}
}

func TestElectorReturnsWhenTenureLost(t *testing.T) {
	fx := newElectorFixture(t)
	c, err := fx.store.Campaign(fx.ctx, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := fx.run(t, func() { fx.b.runElections(fx.ctx, c) })
	brokertest.Eventually(t, 20*time.Second, "the elector runs", func() bool { return fx.b.repl.elector.Load() != nil })
	if err := c.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "runElections returns once the tenure is lost", done)
}

func TestElectorStateMapping(t *testing.T) {
	key := testKey()
	for _, st := range []meta.PartitionState{
		{TopicID: key.TopicID, Partition: key.Partition, Replicas: []int32{3, 1, 2}, Leader: 1, LeaderEpoch: 7, Revision: 99},
		{TopicID: key.TopicID, Partition: key.Partition, Replicas: []int32{2}, Leader: meta.NoLeader, LeaderEpoch: 0, Revision: 5},
	} {
		rs := replicaStateOf(st)
		if (st.Leader == meta.NoLeader) != (rs.Leader == replica.NoLeader) || rs.Version != st.Revision || int32(rs.Epoch) != st.LeaderEpoch {
			t.Fatalf("%+v became %+v", st, rs)
		}
		back := metaStateOf(key, rs)
		if back.Leader != st.Leader || back.LeaderEpoch != st.LeaderEpoch || back.Revision != st.Revision ||
			!slices.Equal(back.Replicas, st.Replicas) || back.TopicID != st.TopicID || back.Partition != st.Partition {
			t.Fatalf("%+v came back as %+v", st, back)
		}
	}
}
