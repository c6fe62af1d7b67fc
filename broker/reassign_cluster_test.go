package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fourth broker joins AZ c; the tiered partition's replica in AZ c moves
// to it, then it becomes the preferred leader and leads, then the replica
// moves back, so the leader is removed and hands over by an election; an
// idempotent producer runs throughout without a failure. The last new
// replica copies only the local tail (its log starts above offset 0: the
// rest is in object storage), every acknowledged record is read back once
// from the final replica set, and the broker that left hosts nothing of
// the partition. Targets that break a rule are refused with the rule.
func TestClusterReassignMovesAReplicaToAFourthBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-broker cluster")
	}
	c := startTestCluster(t, 3)
	b1 := c.brokers[0]
	// The fourth broker joins the running cluster in AZ c, a client of the
	// three brokers' embedded etcd (an etcd cluster keeps an odd member
	// count).
	cfg := testBrokerConfig(t)
	cfg.NodeID, cfg.AZ, cfg.ObjectStore = 4, "c", b1.Cfg.ObjectStore
	cfg.KafkaListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RegistrationTTL, cfg.ControllerTTL = 2*time.Second, 2*time.Second
	for _, b := range c.brokers {
		cfg.Meta.Endpoints = append(cfg.Meta.Endpoints, "http://"+b.Cfg.Meta.ListenClient)
	}
	b4, _ := startStoppableBroker(t, cfg)
	c.brokers = append(c.brokers, b4)
	for _, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees four brokers and a controller", b.Cfg.NodeID), func() (bool, string) {
			return len(b.Brokers()) == 4 && b.ControllerID() > 0, fmt.Sprintf("%d brokers", len(b.Brokers()))
		})
	}
	const topic = "moving"
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	for k, v := range tieringConfigs {
		cc := kmsg.NewCreateTopicsRequestTopicConfig()
		cc.Name, cc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cc)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), testClient(t, b1)); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	var replicas []int32
	eventuallyLong(t, "the partition has a leader", func() (bool, string) {
		tp := b1.LookupTopic(topic)
		if tp == nil || tp.States[0].Leader < 0 {
			return false, "no leader yet"
		}
		replicas = slices.Clone(tp.States[0].Replicas)
		return true, ""
	})
	// The replica in AZ c is on broker 3 or 4; it moves to the other one.
	from := int32(3)
	if slices.Contains(replicas, 4) {
		from = 4
	}
	to := 7 - from
	target := slices.Clone(replicas)
	target[slices.Index(target, from)] = to

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RecordRetries(50), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%12), Value: fmt.Appendf(nil, "v%06d-%0100d", i, i)}
			if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			} else {
				acked.Add(1)
			}
		}
	}()
	// Enough records that segments were uploaded and left the local logs.
	leaderOf := func() *Broker {
		tp := b1.LookupTopic(topic)
		if tp == nil || tp.States[0].Leader < 1 {
			return nil
		}
		return c.brokers[tp.States[0].Leader-1]
	}
	eventuallyLong(t, "the leader's local log starts above 0 (the rest is uploaded)", func() (bool, string) {
		l := leaderOf()
		if l == nil {
			return false, "no leader"
		}
		p, err := l.PartitionOf(topic, 0)
		if err != nil {
			return false, err.Error()
		}
		start := p.Log().StartOffset()
		return start > 0 && acked.Load() > 50, fmt.Sprintf("local log start %d, %d acknowledged", start, acked.Load())
	})

	base := httpBase(c.brokers[1])
	url := fmt.Sprintf("%s/v1/admin/partitions/%s/0/reassign", base, topic)
	bad := slices.Clone(replicas)
	bad[(slices.Index(bad, from)+1)%3] = to // two replicas in AZ c
	for _, c := range []struct {
		body, want string
	}{
		{fmt.Sprintf(`{"replicas":%s}`, ids(bad)), "both in AZ"},
		{`{"replicas":[1,2,9]}`, "broker 9 is not a live broker"},
		{`{"replicas":[1,2]}`, "keeps the replication factor"},
		{`{}`, `needs "replicas"`},
	} {
		code, body := postJSON(t, url, c.body)
		e, _ := body["error"].(map[string]any)
		if msg, _ := e["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %v, want 400 naming %q", c.body, code, body, c.want)
		}
	}
	if code, body := postJSON(t, fmt.Sprintf("%s/v1/admin/partitions/%s/5/reassign", base, topic), `{"replicas":[1,2,3]}`); code != http.StatusNotFound {
		t.Errorf("unknown partition: %d %v, want 404", code, body)
	}
	reassign := func(target []int32) {
		t.Helper()
		before := slices.Clone(b1.LookupTopic(topic).States[0].Replicas)
		if code, body := postJSON(t, url, fmt.Sprintf(`{"replicas":%s}`, ids(target))); code != http.StatusAccepted {
			t.Fatalf("reassign %v → %v: %d %v", before, target, code, body)
		}
		t.Logf("moving %v → %v", before, target)
		eventuallyLong(t, fmt.Sprintf("the reassignment to %v is done", target), func() (bool, string) {
			var list struct {
				Reassignments []map[string]any `json:"reassignments"`
			}
			getJSON(t, base+"/v1/admin/reassignments", &list)
			tp := b1.LookupTopic(topic)
			return len(list.Reassignments) == 0 && slices.Equal(tp.States[0].Replicas, target) && tp.States[0].Leader > 0,
				fmt.Sprintf("replicas %v leader %d, pending %v", tp.States[0].Replicas, tp.States[0].Leader, list.Reassignments)
		})
	}
	reassign(target)
	// Then the leader moves: broker `to` first (a reordering), a preferred
	// election makes it the leader, and a move back to `from` removes
	// the leader, which hands over by an election.
	reordered := append([]int32{to}, slices.DeleteFunc(slices.Clone(target), func(id int32) bool { return id == to })...)
	reassign(reordered)
	if code, body := postJSON(t, base+"/v1/admin/elections:preferred", fmt.Sprintf(`{"topic":%q}`, topic)); code != http.StatusAccepted {
		t.Fatalf("preferred election: %d %v", code, body)
	}
	eventuallyLong(t, fmt.Sprintf("broker %d leads", to), func() (bool, string) {
		l := b1.LookupTopic(topic).States[0].Leader
		return l == to, fmt.Sprint("leader ", l)
	})
	back := slices.Clone(reordered)
	back[0] = from
	reassign(back)
	if l := b1.LookupTopic(topic).States[0].Leader; l == to {
		t.Fatalf("broker %d, removed, still leads", to)
	}
	from, to = to, from // the last move's: the old broker and the new one
	// Records keep arriving after the move, on the new replica set.
	after := acked.Load()
	eventuallyLong(t, "records acknowledged after the move", func() (bool, string) {
		return acked.Load() > after+50, fmt.Sprint(acked.Load())
	})
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d produces failed through the move (first: %v); %d acknowledged", failed.Load(), firstErr.Load(), acked.Load())
	}

	newB, oldB := c.brokers[to-1], c.brokers[from-1]
	np, err := newB.PartitionOf(topic, 0)
	if err != nil {
		t.Fatalf("broker %d does not host the partition after the move: %v", to, err)
	}
	if start := np.Log().StartOffset(); start == 0 {
		t.Errorf("the new replica's log starts at 0: it copied the whole log, not the local tail")
	}
	eventuallyTrue(t, "the old broker hosts nothing of the partition", func() (bool, string) {
		tp := oldB.LookupTopic(topic)
		if tp.Partitions[0] != nil {
			return false, "still open"
		}
		if _, err := os.Stat(oldB.WalDir(tp.Meta.ID, 0)); !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Sprintf("its log directory: %v", err)
		}
		return true, ""
	})
	// The new replica is in sync: the leader counts it.
	eventuallyLong(t, "the new replica is in the in-sync set", func() (bool, string) {
		tp := b1.LookupTopic(topic)
		live := map[int32]bool{1: true, 2: true, 3: true, 4: true}
		isr := b1.ReportedInSync(tp.States[0], live)
		return slices.Contains(isr, to) && len(isr) == 3, fmt.Sprint(isr)
	})

	// Every acknowledged record, once, from the new replica set.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen, total := map[string]int{}, 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < int(acked.Load()) && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	if len(seen) != int(acked.Load()) || total != len(seen) {
		t.Fatalf("read %d distinct records (%d in all), %d acknowledged", len(seen), total, acked.Load())
	}
}

func ids(x []int32) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ",") + "]"
}
