package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/broker/node"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
)

// idleBroker is a Broker that is never Run: its methods can be called
// directly, with the fields a test sets by hand.
func idleBroker(t *testing.T, id int32) *Cluster {
	t.Helper()
	cfg := brokertest.Config(t)
	cfg.NodeID = id
	cfg.KafkaAdvertise = cfg.KafkaListen
	cfg.Meta.DataDir, cfg.Meta.Name = cfg.DataDir, fmt.Sprint(id) // as broker.New sets them
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Logs show with -v or when the test fails.
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	b := New(node.New(cfg, logger.With().Int32("node", id).Logger()))
	b.controller.Store(-1)
	return b
}

// startTransport runs b's senders until the test ends.
func startTransport(t *testing.T, b *Cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.startReplicationTransport(ctx)
	t.Cleanup(func() {
		cancel()
		brokertest.WaitGroupWithin(t, &b.clusterWG, 10*time.Second, "the replication senders to stop after their cancel")
	})
}

// installElector makes b look like a running controller's elector.
func installElector(b *Cluster, capacity int) *elector {
	e := &elector{inbox: make(chan envelope, capacity)}
	b.repl.elector.Store(e)
	return e
}

func testKey() PartitionKey {
	return PartitionKey{TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: 3}
}

func TestReplicationTransportRejectsBadBodies(t *testing.T) {
	b := idleBroker(t, 1)
	fetch, err := json.Marshal([]envelope{{Key: testKey(), Msg: replica.Message{Type: replica.MsgFetch, To: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	withBatch, err := json.Marshal([]envelope{{Key: testKey(), Msg: replica.Message{
		Type: replica.MsgFence, To: 1, Batches: []replica.Batch{{Data: []byte("x")}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"empty array", `[]`, http.StatusNoContent},
		{"unknown partition is dropped, not refused", `[{"key":{"topic_id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partition":0},"msg":{"Type":3,"From":-2,"To":1,"Epoch":2}}]`, http.StatusNoContent},
		// An epoch whose successor overflows would leave the controller
		// no round to elect with; a fence comes only from the controller.
		{"fence at the last epoch", `[{"key":{"partition":0},"msg":{"Type":3,"From":-2,"To":1,"Epoch":2147483647}}]`, http.StatusBadRequest},
		{"complaint fenced at the last epoch", `[{"key":{"partition":0},"msg":{"Type":5,"From":2,"To":-2,"Epoch":3,"LastEpoch":2147483647}}]`, http.StatusBadRequest},
		{"fenced ack at the last epoch", `[{"key":{"partition":0},"msg":{"Type":4,"From":2,"To":-2,"Epoch":2147483647,"Err":2}}]`, http.StatusBadRequest},
		{"fence from a replica", `[{"key":{"partition":0},"msg":{"Type":3,"From":2,"To":1,"Epoch":2}}]`, http.StatusBadRequest},
		{"not JSON", `[{`, http.StatusBadRequest},
		{"object, not an array", `{"key":{}}`, http.StatusBadRequest},
		{"data after the array", `[] []`, http.StatusBadRequest},
		{"wrong field type", `[{"key":{"partition":"x"}}]`, http.StatusBadRequest},
		{"record fetch is not carried", string(fetch), http.StatusBadRequest},
		{"batches are not carried", string(withBatch), http.StatusBadRequest},
		{"over the size bound", "[" + strings.Repeat(" ", maxReplicationBody) + "]", http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, ReplicationPath, strings.NewReader(tc.body))
			rec := httptest.NewRecorder()
			b.HTTPReplication(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status >= 400 {
				var got struct {
					Error httpapi.APIError `json:"error"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Error.Message == "" {
					t.Fatalf("error body %q: %v", rec.Body, err)
				}
				t.Logf("%d: %s", rec.Code, got.Error.Message)
			}
		})
	}
}

func TestReplicationTransportDeliversToSelfLocally(t *testing.T) {
	// No HTTP server and no senders: only local dispatch can deliver.
	b := idleBroker(t, 1)
	b.controller.Store(1)
	e := installElector(b, 4)
	ack := replica.Message{Type: replica.MsgFenceAck, From: 1, Epoch: 7, LastEpoch: 3, Offset: 42}
	b.sendToController(envelope{Key: testKey(), Msg: ack})
	select {
	case got := <-e.inbox:
		if got.Key != testKey() || got.Msg.Type != replica.MsgFenceAck || got.Msg.To != replica.ControllerNode || got.Msg.Offset != 42 {
			t.Fatalf("elector got %+v", got)
		}
	default:
		t.Fatal("a message for the controller on this broker did not reach its elector")
	}
	// A fence to this broker goes to its (here absent) replica, not to a queue.
	b.sendToReplica(1, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 1, Epoch: 7}})
	if n, m := b.repl.dropped(dropNoPartition), b.repl.dropped(dropNoRoute); n != 1 || m != 0 {
		t.Fatalf("drops: no partition %d (want 1), no route %d (want 0)", n, m)
	}
	// Not the controller any more: dropped, not queued.
	b.repl.elector.Store(nil)
	b.sendToController(envelope{Key: testKey(), Msg: ack})
	if n := b.repl.dropped(dropNotController); n != 1 {
		t.Fatalf("not-controller drops %d, want 1", n)
	}
	// Record data never travels here.
	b.sendToReplica(1, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFetchResp, To: 1}})
	if n := b.repl.dropped(dropUnsupported); n != 1 {
		t.Fatalf("unsupported drops %d, want 1", n)
	}
}

func TestReplicationTransportFullQueueDrops(t *testing.T) {
	b := idleBroker(t, 1)
	// A destination whose sender is stuck: nothing drains its queue.
	q := &peerQueue{node: 2, ch: make(chan envelope, replicationQueue), cancel: func() {}}
	b.repl.queues = map[int32]*peerQueue{2: q}
	const extra = 5
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range replicationQueue + extra {
			b.sendToReplica(2, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFence, To: 2, Epoch: 1, Seq: uint64(i)}})
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("sendToReplica blocked on a full queue")
	}
	if len(q.ch) != replicationQueue {
		t.Fatalf("queue holds %d, want %d", len(q.ch), replicationQueue)
	}
	if n := b.repl.dropped(dropQueueFull); n != extra {
		t.Fatalf("queue-full drops %d, want %d", n, extra)
	}
	// The oldest stay queued; the newest were dropped.
	if first := brokertest.RecvWithin(t, q.ch, 10*time.Second, "the head of the queue"); first.Msg.Seq != 0 {
		t.Fatalf("head of the queue is message %d, want 0", first.Msg.Seq)
	}
	// A destination that is not live has no queue: dropped at once.
	b.sendToReplica(3, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFence, To: 3, Epoch: 1}})
	if n := b.repl.dropped(dropNoRoute); n != 1 {
		t.Fatalf("no-route drops %d, want 1", n)
	}
}

func TestReplicationTransportBetweenBrokers(t *testing.T) {
	b1, b2 := idleBroker(t, 1), idleBroker(t, 2)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ReplicationPath, b2.HTTPReplication)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b2.controller.Store(2)
	e := installElector(b2, 1000)

	b1.controller.Store(2)
	b1.setLiveBrokers([]meta.BrokerInfo{
		{NodeID: 1, InterBroker: "127.0.0.1:1"},
		{NodeID: 2, InterBroker: strings.TrimPrefix(srv.URL, "http://")},
	})
	startTransport(t, b1)
	brokertest.Eventually(t, 20*time.Second, "a sender for broker 2", func() bool {
		b1.repl.mu.Lock()
		defer b1.repl.mu.Unlock()
		return b1.repl.queues[2] != nil
	})

	const n = 600 // more than one batch
	for i := range n {
		b1.sendToController(envelope{Key: testKey(), Msg: replica.Message{
			Type: replica.MsgLeaderUnreachable, From: 1, Epoch: 4, LastEpoch: 4, Offset: wal.Offset(i),
		}})
	}
	for i := range n {
		select {
		case env := <-e.inbox:
			if env.Key != testKey() || env.Msg.Type != replica.MsgLeaderUnreachable || env.Msg.Offset != wal.Offset(i) {
				t.Fatalf("message %d: got %+v", i, env)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d of %d not delivered; drops: %v", i, n, dropCounts(b1))
		}
	}
	if got := b2.repl.received.Load(); got != n {
		t.Fatalf("broker 2 received %d, want %d", got, n)
	}
	brokertest.Eventually(t, 20*time.Second, "broker 1 counts them sent", func() bool { return b1.repl.sent.Load() == n })

	// A fence for broker 2's replica reaches broker 2's partitions (here
	// none, so it is dropped there, not on broker 1).
	b1.sendToReplica(2, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFence, From: replica.ControllerNode, To: 2, Epoch: 5}})
	brokertest.Eventually(t, 20*time.Second, "the fence reaches broker 2", func() bool { return b2.repl.dropped(dropNoPartition) == 1 })

	// A broker that leaves loses its sender; its messages are dropped.
	b1.setLiveBrokers([]meta.BrokerInfo{{NodeID: 1, InterBroker: "127.0.0.1:1"}})
	brokertest.Eventually(t, 20*time.Second, "the sender for broker 2 stops", func() bool {
		b1.repl.mu.Lock()
		defer b1.repl.mu.Unlock()
		return b1.repl.queues[2] == nil
	})
	b1.sendToReplica(2, envelope{Key: testKey(), Msg: replica.Message{Type: replica.MsgFence, To: 2, Epoch: 6}})
	if n := b1.repl.dropped(dropNoRoute); n != 1 {
		t.Fatalf("no-route drops %d, want 1", n)
	}
	// The counters are exported.
	if got := gathered(t, b1, "sluice_replication_messages_dropped_total", dropNoRoute); got != 1 {
		t.Fatalf("exported no-route drops %v, want 1", got)
	}
	if got := gathered(t, b1, "sluice_replication_messages_sent_total", ""); got != n+1 {
		t.Fatalf("exported sent %v, want %d (the messages and the fence)", got, n+1)
	}
}

// gathered is the value of counter name (with the label value, if any)
// in b's registry.
func gathered(t *testing.T, b *Cluster, name, label string) float64 {
	t.Helper()
	mfs, err := b.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("metric %s{%s} not exported", name, label)
	return 0
}

func dropCounts(b *Cluster) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range dropReasons {
		out[r] = b.repl.dropped(r)
	}
	return out
}
