package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/httpapi/redriveapi"
)

// dlqServer answers the routes the dlq commands call with the broker's
// own wire types (the broker's side is tested in broker/redrive_http_test.go);
// a redrive is done on its second progress read.
func dlqServer(t *testing.T) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var started []map[string]any
	reads := 0
	dead := time.Now().Add(-90 * time.Second).UnixMilli()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"topics": []map[string]any{{"name": "jobs", "partitions": 1}, {"name": "jobs.dlq", "partitions": 2}}})
	})
	mux.HandleFunc("GET /v1/topics/{topic}/messages", func(w http.ResponseWriter, r *http.Request) {
		k := "k7"
		l := queueapi.Listing{Topic: r.PathValue("topic"), LogStart: 3, LogEnd: 8, NextOffset: 4, Messages: []queueapi.Listed{{Offset: 3, MessageKey: &k, MessageID: "poison",
			History: &queueapi.History{SourceTopic: "jobs", Group: "workers", Attempts: 1, DeadReason: "permanent", DueMs: dead,
				Failures: []queueapi.Failure{{AtMs: dead, ErrorClass: "permanent", Error: "bad input"}}}}}}
		_ = json.NewEncoder(w).Encode(l)
	})
	mux.HandleFunc("POST /v1/dlq/{topic}/redrives", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		started = append(started, req)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(redriveapi.View{ID: "abc", DLQ: r.PathValue("topic"), Target: "jobs", State: "running", Total: 10})
	})
	mux.HandleFunc("GET /v1/redrives/{id}", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		reads++
		v := redriveapi.View{ID: "abc", DLQ: "jobs.dlq", Target: "jobs", State: "running", Total: 10, Decided: 5, Redriven: 5}
		if reads >= 2 {
			v.State, v.Decided, v.Redriven, v.Skipped = "done", 10, 8, 2
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(v)
	})
	mux.HandleFunc("GET /v1/dlq/{topic}/redrives", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"redrives": []redriveapi.View{{ID: "abc", Target: "jobs", State: "done", Total: 10, Decided: 10}}})
	})
	mux.HandleFunc("POST /v1/redrives/{id}/cancel", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(redriveapi.View{ID: "abc", State: "cancelled", Reason: "cancelled by the client"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &started
}

func TestDLQCommands(t *testing.T) {
	srv, started := dlqServer(t)
	ctl := func(args ...string) result {
		var out, errb bytes.Buffer
		getenv := func(k string) string {
			if k == "SLUICE_SERVER" {
				return srv.URL
			}
			return ""
		}
		err := run(context.Background(), args, streams{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: getenv})
		return result{exitCode(err, &errb), out.String(), errb.String()}
	}
	r := ctl("dlq", "ls").want(t, 0, "DLQ", "jobs.dlq", "10", "1m3")
	if strings.Contains(r.stdout, "jobs ") {
		t.Fatalf("a source topic listed as a DLQ:\n%s", r.stdout)
	}
	ctl("dlq", "show", "jobs.dlq").want(t, 0, "offset 3", "key k7", "message_id poison", "from jobs-0@0", "1. ", "permanent  bad input")
	ctl("dlq", "redrive", "jobs.dlq", "--target", "jobs", "--from", "2", "--to", "2026-01-02T00:00:00Z", "--key", "", "--class", "transient", "--rate", "5", "--wait").
		want(t, 0, "abc running: 5/10 decided", "redrive abc of jobs.dlq to jobs: done; 10/10 decided, 8 redriven, 0 already there, 2 skipped")
	want := map[string]any{"target": "jobs", "from_offset": 2.0, "to_ms": float64(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixMilli()),
		"message_key": "", "error_class": "transient", "rate": 5.0}
	got := (*started)[0]
	if len(got) != len(want) {
		t.Fatalf("request %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("request %v, want %v", got, want)
		}
	}
	ctl("dlq", "redrives", "jobs.dlq").want(t, 0, "ID", "abc", "done")
	ctl("dlq", "cancel", "abc").want(t, 0, "cancelled (cancelled by the client)")
	ctl("dlq", "redrive", "jobs.dlq").wantErr(t, 2, "--target is required")
	ctl("dlq", "redrive", "jobs.dlq", "--target", "jobs", "--from", "yesterday").wantErr(t, 2, "--from")
}
