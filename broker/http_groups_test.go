package broker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"
)

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
	var lag struct{ Partitions []httpapi.PartitionLag }
	if err := json.NewDecoder(resp.Body).Decode(&lag); err != nil || resp.StatusCode != 200 {
		t.Fatalf("lag: %d %v", resp.StatusCode, err)
	}
	// The member's two assigned partitions are listed, with nothing committed.
	if len(lag.Partitions) != 2 {
		t.Fatalf("lag lists %d partitions, want the 2 assigned: %+v", len(lag.Partitions), lag.Partitions)
	}
	for _, l := range lag.Partitions {
		if l.Committed != httpapi.NoCommit {
			t.Fatalf("refused commits left offsets behind: %+v", lag.Partitions)
		}
	}
}
