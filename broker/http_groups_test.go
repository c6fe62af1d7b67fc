package broker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
)

func TestRangeAssign(t *testing.T) {
	b := &Broker{Node: node.New(node.DefaultConfig(), zerolog.Nop())}
	b.ReplaceTopic(&node.Topic{Meta: meta.Topic{Name: "a", ID: [16]byte{1}}, States: make([]meta.PartitionState, 7), Partitions: make([]*partition.Partition, 7)})
	b.ReplaceTopic(&node.Topic{Meta: meta.Topic{Name: "b", ID: [16]byte{2}}, States: make([]meta.PartitionState, 2), Partitions: make([]*partition.Partition, 2)})
	sub := func(topics ...string) []byte {
		m := kmsg.ConsumerMemberMetadata{Topics: topics}
		return m.AppendTo(nil)
	}
	members := []group.MemberInfo{
		{ID: "m3", Metadata: sub("a")},
		{ID: "m1", Metadata: sub("a", "b")},
		{ID: "m2", Metadata: sub("a", "b")},
	}
	got := map[string]map[string][]int32{}
	for id, raw := range b.rangeAssign(members) {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		got[id] = map[string][]int32{}
		for _, tp := range a.Topics {
			got[id][tp.Topic] = tp.Partitions
		}
	}
	want := map[string]map[string][]int32{
		"m1": {"a": {0, 1, 2}, "b": {0}},
		"m2": {"a": {3, 4}, "b": {1}},
		"m3": {"a": {5, 6}},
	}
	for id, topics := range want {
		for tp, parts := range topics {
			if g := got[id][tp]; len(g) != len(parts) || (len(g) > 0 && (g[0] != parts[0] || g[len(g)-1] != parts[len(parts)-1])) {
				t.Errorf("%s %s: got %v, want %v", id, tp, g, parts)
			}
		}
		if len(got[id]) != len(topics) {
			t.Errorf("%s: got topics %v, want %v", id, got[id], topics)
		}
	}
}

func TestLagRates(t *testing.T) {
	var lr lagRates
	start := time.Unix(1000, 0)
	if _, ok := lr.observe("k", start, 100); ok {
		t.Fatal("a rate from one sample")
	}
	if _, ok := lr.observe("k", start.Add(5*time.Second), 100); ok {
		t.Fatal("a rate without a second distinct commit")
	}
	rate, ok := lr.observe("k", start.Add(10*time.Second), 300)
	if !ok || rate != 20 {
		t.Fatalf("rate %v %v, want 20/s", rate, ok)
	}
	// Samples older than the window are forgotten.
	if _, ok := lr.observe("k", start.Add(rateWindow+time.Hour), 300); ok {
		t.Fatal("a rate from samples outside the window")
	}
}

func TestHTTPGroupBadInput(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Coordinator.MinSessionTimeout = 500 * time.Millisecond
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	postJSON(t, base+"/v1/topics", `{"name":"bad","partitions":2}`)
	code, joined := postJSON(t, base+"/v1/groups/g/members:join", `{"topics":["bad"],"session_timeout_ms":5000}`)
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	member := joined["member_id"].(string)
	gen := int(joined["generation"].(float64))
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"join malformed", "/v1/groups/g/members:join", `{"topics":`, 400},
		{"join no topics", "/v1/groups/g/members:join", `{"topics":[]}`, 400},
		{"join unknown topic", "/v1/groups/g/members:join", `{"topics":["nope"]}`, 404},
		{"join session too short", "/v1/groups/g2/members:join", `{"topics":["bad"],"session_timeout_ms":10}`, 400},
		{"commit without generation", "/v1/groups/g/offsets:commit", fmt.Sprintf(`{"member_id":%q,"offsets":[{"topic":"bad","partition":0,"offset":1}]}`, member), 400},
		{"commit stale generation", "/v1/groups/g/offsets:commit", fmt.Sprintf(`{"member_id":%q,"generation":%d,"offsets":[{"topic":"bad","partition":0,"offset":0}]}`, member, gen+5), 409},
		{"commit unknown member", "/v1/groups/g/offsets:commit", fmt.Sprintf(`{"member_id":"ghost","generation":%d,"offsets":[{"topic":"bad","partition":0,"offset":0}]}`, gen), 409},
		{"commit negative", "/v1/groups/g/offsets:commit", fmt.Sprintf(`{"member_id":%q,"generation":%d,"offsets":[{"topic":"bad","partition":0,"offset":-3}]}`, member, gen), 400},
		{"fetch without generation", "/v1/groups/g/messages:fetch", fmt.Sprintf(`{"member_id":%q,"topic":"bad","partition":0}`, member), 400},
		{"fetch stale generation", "/v1/groups/g/messages:fetch", fmt.Sprintf(`{"member_id":%q,"generation":%d,"topic":"bad","partition":0}`, member, gen+1), 409},
		{"fetch beyond the end", "/v1/groups/g/messages:fetch", fmt.Sprintf(`{"member_id":%q,"generation":%d,"topic":"bad","partition":0,"offset":99}`, member, gen), 410},
		{"reset with members", "/v1/groups/g/offsets:reset", `{"topic":"bad","to":"earliest"}`, 409},
		{"reset two targets", "/v1/groups/g/offsets:reset", `{"topic":"bad","to":"earliest","offset":3}`, 400},
		{"reset bad to", "/v1/groups/g/offsets:reset", `{"topic":"bad","to":"middle"}`, 400},
		{"heartbeat missing member", "/v1/groups/g/members:heartbeat", `{"generation":1}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := postJSON(t, base+tt.path, tt.body)
			errObj, _ := body["error"].(map[string]any)
			if code != tt.status || errObj == nil || errObj["message"] == "" {
				t.Fatalf("status %d body %v, want %d with an error message", code, body, tt.status)
			}
		})
	}
	// The stale commits changed nothing.
	resp, err := http.Get(base + "/v1/groups/g/lag")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lag struct{ Partitions []partitionLag }
	if err := json.NewDecoder(resp.Body).Decode(&lag); err != nil || resp.StatusCode != 200 {
		t.Fatalf("lag: %d %v", resp.StatusCode, err)
	}
	// The member's two assigned partitions are listed, with nothing committed.
	if len(lag.Partitions) != 2 {
		t.Fatalf("lag lists %d partitions, want the 2 assigned: %+v", len(lag.Partitions), lag.Partitions)
	}
	for _, l := range lag.Partitions {
		if l.Committed != noCommit {
			t.Fatalf("refused commits left offsets behind: %+v", lag.Partitions)
		}
	}
}
