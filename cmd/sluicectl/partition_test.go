package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeReassignAPI answers the reassignment routes as a broker does: a
// target with two replicas in one AZ is refused with the rule, a good one
// is stored and listed as pending for one poll, a cancel moves back.
type fakeReassignAPI struct {
	mu    sync.Mutex
	polls int
	calls []string
}

func (f *fakeReassignAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	f.calls = append(f.calls, r.Method+" "+r.URL.Path+" "+string(body))
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && strings.Contains(string(body), "[1,3,4]"):
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":"invalid_reassignment","message":"brokers 3 and 4 are both in AZ \"c\": a partition has at most one replica per AZ"}}`)
	case r.Method == "POST":
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"topic":"orders","partition":0,"target":[1,2,4],"original":[1,2,3]}`)
	case r.Method == "DELETE":
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"topic":"orders","partition":0,"target":[1,2,3],"original":[1,2,3],"cancelled":true}`)
	case r.URL.Path == "/v1/admin/reassignments":
		f.polls++
		if f.polls > 1 {
			_, _ = io.WriteString(w, `{"reassignments":[]}`)
			return
		}
		_, _ = io.WriteString(w, `{"reassignments":[{"topic":"orders","partition":0,"target":[1,2,4],"original":[1,2,3],"replicas":[1,2,3,4],"leader":1,"phase":"catching-up","message":"replica 4 is copying the leader's local tail"}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func runAgainst(t *testing.T, url string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "SLUICE_SERVER" {
			return url
		}
		return ""
	}
	err := run(context.Background(), args, streams{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: getenv})
	return result{exitCode(err, &errb), out.String(), errb.String()}
}

func TestPartitionReassignCommands(t *testing.T) {
	f := &fakeReassignAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()

	runAgainst(t, srv.URL, "partition", "reassign", "orders", "0", "--replicas", "1,3,4").wantErr(t, 1, `both in AZ "c"`)
	runAgainst(t, srv.URL, "partition", "reassign", "orders", "0").wantErr(t, 2, "--replicas is required")
	runAgainst(t, srv.URL, "partition", "reassign", "orders", "x", "--replicas", "1").wantErr(t, 2, `partition "x"`)
	runAgainst(t, srv.URL, "partition", "reassign", "orders", "0", "--replicas", "1,a").wantErr(t, 2, "want node ids")
	r := runAgainst(t, srv.URL, "partition", "reassign", "orders", "0", "--replicas", "1,2,4", "--wait")
	r.want(t, 0, "orders-0: reassigned to [1,2,4]")
	if !strings.Contains(r.stderr, "catching-up: replicas [1,2,3,4], leader 1") {
		t.Fatalf("--wait did not report the step: %s", r.stderr)
	}
	if got := f.calls[len(f.calls)-3]; got != `POST /v1/admin/partitions/orders/0/reassign {"replicas":[1,2,4]}` {
		t.Fatalf("request: %s", got)
	}
	runAgainst(t, srv.URL, "partition", "cancel", "orders", "0").want(t, 0, "moving back to [1,2,3]")
	f.polls = 0
	runAgainst(t, srv.URL, "partition", "reassignments").want(t, 0, "catching-up", "1,2,3,4")
	f.polls = 0
	var list reassignmentList
	if err := json.Unmarshal([]byte(runAgainst(t, srv.URL, "--json", "partition", "reassignments").want(t, 0).stdout), &list); err != nil || len(list.Reassignments) != 1 {
		t.Fatalf("--json: %v %+v", err, list)
	}
}
