package broker

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// eventuallyLong is eventuallyTrue with a minute's patience: elections of
// a new topic's partitions and moves of leadership are slow on a loaded
// machine.
func eventuallyLong(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	brokertest.EventuallyWhy(t, time.Minute, what, cond)
}

// leadersOf counts the partitions of topic each broker leads, as b's
// Metadata answers.
func leadersOf(t *testing.T, b *Broker, topic string) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, mt := range metadataOf(t, b).Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			for _, mp := range mt.Partitions {
				out[mp.Leader]++
			}
		}
	}
	return out
}

// A drained broker gives up every partition it leads and every group it
// coordinates while an idempotent producer goes on without a failure, does
// not take them back while drained, and after an undrain a preferred
// election gives it its preferred leaderships again.
func TestClusterDrainMovesLeadershipAndGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	c := startTestCluster(t, 3)
	b1 := c.brokers[0]
	eventuallyTrue(t, "a controller is elected", func() (bool, string) { return b1.ControllerID() > 0, "none yet" })
	createReplicatedTopic(t, testClient(t, b1), "drained", 6, 3)
	eventuallyLong(t, "every broker leads two partitions", func() (bool, string) {
		l := leadersOf(t, b1, "drained")
		return l[1] == 2 && l[2] == 2 && l[3] == 2, fmt.Sprint(l)
	})
	// A group that broker 2 coordinates before the drain.
	group := ""
	for i := 0; group == ""; i++ {
		g := fmt.Sprintf("g%d", i)
		if b1.GroupCoordinator(g).NodeID == 2 {
			group = g
		}
	}

	// An idempotent producer runs through the drain.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("drained"),
		kgo.RecordRetries(50), kgo.RecordDeliveryTimeout(30*time.Second))
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
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%12), Value: fmt.Appendf(nil, "v%d", i)}
			if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			} else {
				acked.Add(1)
			}
		}
	}()
	eventuallyTrue(t, "some records acknowledged before the drain", func() (bool, string) {
		return acked.Load() > 0, fmt.Sprintf("%d acknowledged, %d failed", acked.Load(), failed.Load())
	})
	base := httpBase(b1)
	if code, body := postJSON(t, base+"/v1/admin/brokers/2/drain", ``); code != http.StatusOK || body["draining"] != true {
		t.Fatalf("drain: %d %v", code, body)
	}
	eventuallyLong(t, "broker 2 leads nothing", func() (bool, string) {
		var ba brokersAnswer
		getJSON(t, base+"/v1/brokers", &ba)
		for _, bl := range ba.Brokers {
			if bl.ID == 2 {
				return bl.Leaders == 0 && bl.Draining, fmt.Sprintf("%+v", bl)
			}
		}
		return false, "broker 2 not listed"
	})
	eventuallyTrue(t, "every broker places the group off broker 2", func() (bool, string) {
		for _, b := range c.brokers {
			if id := b.GroupCoordinator(group).NodeID; id == 2 {
				return false, fmt.Sprintf("broker %d places %s on 2", b.Cfg.NodeID, group)
			}
		}
		return true, ""
	})
	// Drained, it stays without leaderships (no move back to the
	// preferred replica) for longer than a preferred move waits.
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	for range 30 {
		<-watch.C
		for _, b := range c.brokers {
			if n := leadersOf(t, b, "drained")[2]; n != 0 {
				t.Fatalf("broker %d sees broker 2 lead %d partitions while drained", b.Cfg.NodeID, n)
			}
		}
	}
	// A group still forms and commits with broker 2 drained.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("drained"), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	for got := 0; got == 0 && ctx.Err() == nil; {
		got = cons.PollFetches(ctx).NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit in group %s with broker 2 drained: %v", group, err)
	}
	cancel()
	cons.Close()

	// Undrain and ask for a preferred election: broker 2 leads its two
	// preferred partitions again.
	req, _ := http.NewRequest(http.MethodDelete, base+"/v1/admin/brokers/2/drain", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("undrain: %v %v", err, resp)
	}
	resp.Body.Close()
	eventuallyTrue(t, "the controller sees the undrain", func() (bool, string) {
		ctl := c.brokers[b1.ControllerID()-1]
		return len(ctl.Draining()) == 0, fmt.Sprint(ctl.Draining())
	})
	if code, body := postJSON(t, httpBase(c.brokers[2])+"/v1/admin/elections:preferred", `{"topic":"drained"}`); code != http.StatusAccepted || body["partitions"] != float64(6) {
		t.Fatalf("preferred election: %d %v", code, body)
	}
	eventuallyLong(t, "broker 2 leads its preferred partitions again", func() (bool, string) {
		l := leadersOf(t, b1, "drained")
		return l[2] == 2, fmt.Sprint(l)
	})
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d produces failed through the drain (first: %v); %d acknowledged", failed.Load(), firstErr.Load(), acked.Load())
	}
	if acked.Load() == 0 {
		t.Fatal("no produce acknowledged")
	}
	// Everything acknowledged is there, once.
	seen := consumeAll(t, c, "drained", int(acked.Load()))
	if len(seen) != int(acked.Load()) {
		t.Fatalf("read %d distinct records, %d acknowledged", len(seen), acked.Load())
	}
}
