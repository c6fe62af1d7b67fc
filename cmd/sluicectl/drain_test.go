package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeDrainAPI answers the routes a drain reads as a broker does: broker 2
// leads orders-0 and coordinates group billing until its drain mark is
// set; then orders-0 is led by 3, and billing is served by 3 unless stuck.
type fakeDrainAPI struct {
	stuck bool // billing stays on broker 2

	mu      sync.Mutex
	drained bool // guarded by mu
}

func (f *fakeDrainAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	moved := f.drained
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/topics":
		_, _ = io.WriteString(w, `{"topics":[{"name":"orders"}]}`)
	case "GET /v1/topics/orders":
		leader := 2
		if moved {
			leader = 3
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"partitions": []map[string]int{{"partition": 0, "leader": leader}, {"partition": 1, "leader": 1}}})
	case "GET /v1/groups":
		_, _ = io.WriteString(w, `{"groups":[{"group":"billing","coordinator":2},{"group":"other","coordinator":1}]}`)
	case "GET /v1/groups/billing":
		co := 2
		if moved && !f.stuck {
			co = 3
		}
		_ = json.NewEncoder(w).Encode(map[string]int{"coordinator": co})
	case "POST /v1/admin/brokers/2/drain":
		f.drained = true
		_, _ = io.WriteString(w, `{"broker":2,"draining":true}`)
	case "GET /v1/brokers":
		leaders := 1
		if moved {
			leaders = 0
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"brokers": []map[string]any{{"id": 2, "leaders": leaders, "draining": moved}}})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestBrokerDrainReport: a drain names each leadership and group it moved
// and where it went (--json too), and fails, naming the group, when a
// group it coordinated is still on the broker when --timeout ends. The
// same command against real brokers is e2e's
// TestSluicectlDrainAndPreferredElection.
func TestBrokerDrainReport(t *testing.T) {
	srv := httptest.NewServer(&fakeDrainAPI{})
	defer srv.Close()
	var out struct {
		Broker int32 `json:"broker"`
		Moved  struct {
			Partitions []movedPartition `json:"partitions"`
			Groups     []movedGroup     `json:"groups"`
		} `json:"moved"`
	}
	r := runAgainst(t, srv.URL, "--json", "broker", "drain", "2", "--timeout", "10s").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if out.Broker != 2 || len(out.Moved.Partitions) != 1 || out.Moved.Partitions[0] != (movedPartition{"orders", 0, 2, 3}) ||
		len(out.Moved.Groups) != 1 || out.Moved.Groups[0] != (movedGroup{"billing", 2, 3}) {
		t.Fatalf("--json: %+v", out)
	}

	srv2 := httptest.NewServer(&fakeDrainAPI{})
	defer srv2.Close()
	runAgainst(t, srv2.URL, "broker", "drain", "2").want(t, 0, "broker 2 drained",
		"moved 1 partition leadership and 1 group off it", "  orders-0: 2 -> 3\n", "  group billing: 2 -> 3\n")

	stuck := httptest.NewServer(&fakeDrainAPI{stuck: true})
	defer stuck.Close()
	runAgainst(t, stuck.URL, "broker", "drain", "2", "--timeout", "3s").
		wantErr(t, 1, "broker 2 leads no partition, but group billing did not move off broker 2: it still coordinates it")
}
