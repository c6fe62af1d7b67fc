package broker

// An HTTP publish that this broker took as the partition's leader, but
// whose append the partition refused because the leadership had moved in
// between (before any of it reached the log), is forwarded to the new
// leader within the request instead of answered NOT_LEADER.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// recordsIn is broker b's sluice_topic_records_in_total for topic: the
// records its HTTP publish enqueued on a local partition.
func recordsIn(t *testing.T, b *Broker, topic string) float64 {
	t.Helper()
	code, body := httpGet(t, httpBase(b)+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	prefix := fmt.Sprintf(`sluice_topic_records_in_total{topic=%q} `, topic)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// TestHTTPPublishRefusedByAMovedLeaderIsForwarded: the leader L of a
// partition is drained while its partition's owner goroutine is held in the
// fsync that persists the controller's fence. Its core has stepped down,
// but what L's HTTP API reads (the published status) still says it leads,
// so a publish to L is enqueued on L's partition. Released, the owner
// refuses it before appending (not the leader); the publish must then reach
// the new leader and be acknowledged once. On the old code it was answered
// NOT_LEADER_FOR_PARTITION (207).
// Both kinds of publish: an ordinary one (forwarded through the broker's
// forwarding producer) and an idempotent one (forwarded as its batches).
func TestHTTPPublishRefusedByAMovedLeaderIsForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	for _, idempotent := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) { publishToMovedLeader(t, idempotent) })
	}
}

func publishToMovedLeader(t *testing.T, idempotent bool) {
	blocks := map[int32]*blockedSyncs{}
	for id := int32(1); id <= 3; id++ {
		blocks[id] = &blockedSyncs{entered: make(chan struct{}), release: make(chan struct{})}
	}
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		cfg.FS = vfs.NewFaulty(vfs.OS, blocks[cfg.NodeID].inject)
	})
	for _, bs := range blocks {
		t.Cleanup(bs.unblock) // before the brokers stop
	}
	const topic = "moved"
	if code, body := postJSON(t, httpBase(c.brokers[0])+"/v1/topics", `{"name":"moved","partitions":1,"replication_factor":3}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	leader := leaderOf(t, c, topic, 0)
	lb := c.brokers[leader-1]
	producer, seq := "", 0
	if idempotent {
		_, pid := postJSON(t, httpBase(lb)+"/v1/producers", `{}`)
		producer = fmt.Sprintf(`"producer_id":%d,"producer_epoch":0,`, int64(pid["producer_id"].(float64)))
	}
	publish := func(payload string) (int, map[string]any) {
		msg := fmt.Sprintf(`{"payload":%q}`, payload)
		if idempotent {
			msg = fmt.Sprintf(`{"payload":%q,"sequence":%d}`, payload, seq)
			seq++
		}
		return postJSON(t, httpBase(lb)+"/v1/topics/moved/messages:publish", fmt.Sprintf(`{%s"messages":[%s]}`, producer, msg))
	}
	if code, body := publish("before"); code != http.StatusOK {
		t.Fatalf("publish before the move: %d %v", code, body)
	}

	// Hold L's next fsync of the partition's epochs file: the one that
	// persists the fence of the drain's election.
	epochs := lb.WalDir(lb.LookupTopic(topic).Meta.ID, 0) + "/epochs"
	blocks[leader].path.Store(&epochs)
	blocks[leader].armed.Store(true)
	other := c.brokers[leader%3]
	if code, body := postJSON(t, fmt.Sprintf("%s/v1/admin/brokers/%d/drain", httpBase(other), leader), ``); code != http.StatusOK {
		t.Fatalf("drain broker %d: %d %v", leader, code, body)
	}
	select {
	case <-blocks[leader].entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the fence never reached broker L's partition")
	}
	var moved int32
	eventuallyLong(t, "another broker leads the partition", func() (bool, string) {
		tp := other.LookupTopic(topic)
		moved = tp.States[0].Leader
		if moved <= 0 || moved == leader {
			return false, fmt.Sprintf("leader %d", moved)
		}
		nb := c.brokers[moved-1]
		return nb.Leads(nb.LookupTopic(topic), 0), fmt.Sprintf("broker %d has not taken over", moved)
	})
	if !lb.Leads(lb.LookupTopic(topic), 0) {
		t.Fatal("broker L no longer claims the partition: the race this test sets up did not happen")
	}

	// The publish is enqueued on L's held partition; then the owner goes on.
	before := recordsIn(t, lb, topic)
	var wg sync.WaitGroup
	var code int
	var body map[string]any
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, body = publish("after")
	}()
	eventuallyTrue(t, "the publish is enqueued on broker L", func() (bool, string) {
		n := recordsIn(t, lb, topic)
		return n > before, fmt.Sprintf("%v records in", n)
	})
	blocks[leader].unblock()
	wg.Wait()
	res, _ := body["results"].([]any)
	if code != http.StatusOK || len(res) != 1 || res[0].(map[string]any)["status"] != "ok" {
		t.Fatalf("publish enqueued on the old leader: %d %v, want 200 with the message ok", code, body)
	}
	off := int64(res[0].(map[string]any)["offset"].(float64))

	// The partition holds "before" and "after", each once, "after" at the
	// offset answered.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Offset))
		})
	}
	cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
	defer ccancel()
	cons.PollFetches(cctx).EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Offset)) })
	// "before" precedes "after", not always at off-1: the new leader's
	// epoch may start with a control batch between them (an offset no
	// consumer is given).
	var beforeAt int64 = -1
	if len(got) == 2 {
		_, _ = fmt.Sscanf(got[0], "before@%d", &beforeAt)
	}
	if len(got) != 2 || beforeAt < 0 || beforeAt >= off || got[1] != fmt.Sprintf("after@%d", off) {
		t.Fatalf("partition reads %v, want [before@<below %d> after@%d]", got, off, off)
	}
}
