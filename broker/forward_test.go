package broker

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/wal"
)

// leaderOf waits until every broker knows a live leader of topic's
// partition and returns it.
func leaderOf(t *testing.T, c *testCluster, topic string, part int32) int32 {
	t.Helper()
	var leader int32 = -1
	eventuallyTrue(t, fmt.Sprintf("every broker knows the leader of %s-%d", topic, part), func() (bool, string) {
		leader = -1
		for _, b := range c.brokers {
			tp := b.LookupTopic(topic)
			if tp == nil || int(part) >= len(tp.States) || tp.States[part].Leader < 0 {
				return false, fmt.Sprintf("node %d knows no leader", b.Cfg.NodeID)
			}
			if leader >= 0 && tp.States[part].Leader != leader {
				return false, "views differ"
			}
			leader = tp.States[part].Leader
		}
		lb := c.brokers[leader-1]
		return lb.Leads(lb.LookupTopic(topic), part), "the leader has not taken over yet"
	})
	return leader
}

// TestHTTPPublishFromAnyBroker publishes keyed messages through every
// broker in turn: each message is acknowledged on its murmur2 partition and
// reads back in order, whichever broker leads it. On the old code a broker
// refused the partitions it did not lead with NOT_LEADER_FOR_PARTITION.
func TestHTTPPublishFromAnyBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	if code, body := postJSON(t, httpBase(c.brokers[0])+"/v1/topics", `{"name":"fw","partitions":6,"replication_factor":3}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	for p := range int32(6) {
		leaderOf(t, c, "fw", p)
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("fw")
	type sent struct {
		key, value string
	}
	byPartition := map[int32][]sent{}
	const perBroker = 60
	for bi, b := range c.brokers {
		var msgs []string
		var order []sent
		for i := range perBroker {
			s := sent{fmt.Sprintf("key-%d", i%17), fmt.Sprintf("b%d-m%d", bi, i)}
			order = append(order, s)
			msgs = append(msgs, fmt.Sprintf(`{"message_key":%q,"payload":%q}`, s.key, s.value))
		}
		code, body := postJSON(t, httpBase(b)+"/v1/topics/fw/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
		if code != http.StatusOK {
			t.Fatalf("publish through node %d: %d %v", b.Cfg.NodeID, code, body)
		}
		results := body["results"].([]any)
		for i, r := range results {
			res := r.(map[string]any)
			want := int32(part.Partition(&kgo.Record{Key: []byte(order[i].key)}, 6))
			if res["status"] != "ok" || int32(res["partition"].(float64)) != want {
				t.Fatalf("node %d message %d: %v, want ok on partition %d", b.Cfg.NodeID, i, res, want)
			}
			byPartition[want] = append(byPartition[want], order[i])
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("fw"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]sent{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < 3*perBroker && ctx.Err() == nil; {
		cons.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], sent{string(r.Key), string(r.Value)})
			n++
		})
	}
	for p, want := range byPartition {
		if fmt.Sprint(got[p]) != fmt.Sprint(want) {
			t.Fatalf("partition %d reads back\n%v\nwant\n%v", p, got[p], want)
		}
	}
}

// hostOf returns the one broker hosting a single-replica topic's partition.
func hostOf(t *testing.T, c *testCluster, topic string, part int32) *Broker {
	t.Helper()
	return c.brokers[leaderOf(t, c, topic, part)-1]
}

// TestHTTPIdempotentPublishForwarded sends an idempotent publish through a
// broker that hosts no replica of the partition, twice: the second is a
// duplicate, not a second copy.
func TestHTTPIdempotentPublishForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createReplicatedTopic(t, testClient(t, c.brokers[0]), "solo", 1, 1)
	host := hostOf(t, c, "solo", 0)
	via := c.brokers[host.Cfg.NodeID%3]
	_, pid := postJSON(t, httpBase(via)+"/v1/producers", `{}`)
	body := fmt.Sprintf(`{"producer_id":%d,"producer_epoch":0,"messages":[{"payload":"a","sequence":0},{"payload":"b","sequence":1}]}`,
		int64(pid["producer_id"].(float64)))
	var first float64 = -1
	for round, want := range []string{"ok", "duplicate"} {
		code, resp := postJSON(t, httpBase(via)+"/v1/topics/solo/messages:publish", body)
		if code != http.StatusOK {
			t.Fatalf("round %d: %d %v", round, code, resp)
		}
		for i, r := range resp["results"].([]any) {
			res := r.(map[string]any)
			if first < 0 {
				first = res["offset"].(float64)
			}
			if res["status"] != want || res["offset"].(float64) != first+float64(i) {
				t.Fatalf("round %d message %d: %v, want %s at offset %v", round, i, res, want, first+float64(i))
			}
		}
	}
	if hw := c.leaderHW(t, "solo", 0); hw != wal.Offset(first)+2 {
		t.Fatalf("high watermark %d after a duplicate, want %v", hw, first+2)
	}
}

// getMap GETs url and decodes its JSON object answer.
func getMap(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	code := getJSON(t, url, &out)
	return code, out
}

// TestHTTPGroupThroughAnyBroker runs a group member's whole life through a
// broker that neither hosts the partition nor coordinates the group: join,
// fetch, commit, lag and reset answer as if it did. On the old code the
// fetch failed with NOT_LEADER_FOR_PARTITION.
func TestHTTPGroupThroughAnyBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createReplicatedTopic(t, testClient(t, c.brokers[0]), "lone", 1, 1)
	host := hostOf(t, c, "lone", 0)
	var groupID string
	var via *Broker
	for i := 0; via == nil; i++ {
		groupID = fmt.Sprintf("g-%d", i)
		co := host.GroupCoordinator(groupID).NodeID
		if co == host.Cfg.NodeID {
			continue
		}
		for _, b := range c.brokers {
			if b.Cfg.NodeID != co && b != host {
				via = b
			}
		}
	}
	base := httpBase(via)
	var msgs []string
	for i := range 5 {
		msgs = append(msgs, fmt.Sprintf(`{"payload":"m%d"}`, i))
	}
	if code, body := postJSON(t, base+"/v1/topics/lone/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, m := postJSON(t, base+"/v1/groups/"+groupID+"/members:join", `{"topics":["lone"]}`)
	if code != http.StatusOK {
		t.Fatalf("join: %d %v", code, m)
	}
	member, gen := m["member_id"].(string), int(m["generation"].(float64))
	ref := fmt.Sprintf(`"member_id":%q,"generation":%d`, member, gen)
	code, f := postJSON(t, base+"/v1/groups/"+groupID+"/messages:fetch", `{`+ref+`,"topic":"lone","partition":0}`)
	if code != http.StatusOK || len(f["messages"].([]any)) != 5 {
		t.Fatalf("fetch: %d %v, want 5 messages", code, f)
	}
	next := int64(f["next_offset"].(float64))
	commit := func(off int64) (int, map[string]any) {
		return postJSON(t, base+"/v1/groups/"+groupID+"/offsets:commit",
			fmt.Sprintf(`{%s,"offsets":[{"topic":"lone","partition":0,"offset":%d}]}`, ref, off))
	}
	if code, body := commit(next); code != http.StatusOK {
		t.Fatalf("commit %d: %d %v", next, code, body)
	}
	code, body := commit(next + 100)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "beyond the log end") {
		t.Fatalf("commit beyond the log end: %d %v, want 400 naming the log end", code, body)
	}
	code, lag := getMap(t, base+"/v1/groups/"+groupID+"/lag")
	parts, _ := lag["partitions"].([]any)
	if code != http.StatusOK || len(parts) != 1 || parts[0].(map[string]any)["lag"].(float64) != 0 ||
		parts[0].(map[string]any)["log_end"].(float64) != float64(next) {
		t.Fatalf("lag: %d %v, want one partition at lag 0, log end %d", code, lag, next)
	}
	code, body = postJSON(t, base+"/v1/groups/"+groupID+"/messages:fetch", `{`+ref+`,"topic":"lone","partition":0,"offset":1000}`)
	if code != http.StatusGone || !strings.Contains(fmt.Sprint(body), "offsets:reset") ||
		!strings.Contains(fmt.Sprint(body), fmt.Sprintf("readable range [0, %d]", next)) {
		t.Fatalf("fetch beyond the end: %d %v, want 410 naming the readable range [0, %d] and the reset call", code, body, next)
	}
	code, body = postJSON(t, base+"/v1/groups/"+groupID+"/offsets:reset", `{"topic":"lone","to":"earliest"}`)
	if code != http.StatusConflict && code != http.StatusOK {
		t.Fatalf("reset: %d %v", code, body)
	}
	// A group with a live member refuses a reset (Kafka's rule); once the
	// member leaves, it takes it.
	if code, body := postJSON(t, base+"/v1/groups/"+groupID+"/members:leave", `{"member_id":"`+member+`"}`); code != http.StatusOK {
		t.Fatalf("leave: %d %v", code, body)
	}
	code, body = postJSON(t, base+"/v1/groups/"+groupID+"/offsets:reset", `{"topic":"lone","to":"earliest"}`)
	if code != http.StatusOK {
		t.Fatalf("reset after leaving: %d %v", code, body)
	}
	code, lag = getMap(t, base+"/v1/groups/"+groupID+"/lag")
	parts, _ = lag["partitions"].([]any)
	if code != http.StatusOK || len(parts) != 1 || parts[0].(map[string]any)["lag"].(float64) != float64(next) {
		t.Fatalf("lag after reset: %d %v, want %d", code, lag, next)
	}
}

// TestHTTPErrorsAreJSON checks that the mux's own refusals and decoding
// failures answer JSON errors written for a person. On the old code a 404
// was text and a wrong field type named Go types.
func TestHTTPErrorsAreJSON(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	code, body := getMap(t, base+"/v1/nothing-here")
	if code != http.StatusNotFound || body["error"].(map[string]any)["code"] != "not_found" {
		t.Fatalf("unknown path: %d %v", code, body)
	}
	code, body = getMap(t, base+"/v1/topics/x/messages:publish")
	if code != http.StatusMethodNotAllowed || body["error"].(map[string]any)["code"] != "method_not_allowed" {
		t.Fatalf("wrong method: %d %v", code, body)
	}
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"e","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	code, body = postJSON(t, base+"/v1/topics/e/messages:publish", `{"messages":"hello"}`)
	msg := fmt.Sprint(body["error"].(map[string]any)["message"])
	if code != http.StatusBadRequest || !strings.Contains(msg, "field messages: expected an array") ||
		strings.Contains(msg, "Go") || strings.Contains(msg, "broker.") {
		t.Fatalf("wrong field type: %d %q", code, msg)
	}
	code, body = postJSON(t, base+"/v1/topics/e/messages:publish", `{"messages":[{"payload":"x"}],"colour":1}`)
	if msg := fmt.Sprint(body["error"].(map[string]any)["message"]); code != http.StatusBadRequest || msg != `unknown field "colour"` {
		t.Fatalf("unknown field: %d %q", code, msg)
	}
}
