package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/broker/hotkeys"
	"github.com/sluice-mq/sluice/broker/httpapi"
)

// topServer answers the two routes `top` reads with the broker's own wire
// types (the broker's side is tested in broker/hotkeys_test.go).
func topServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"topics": []map[string]any{{"name": "clicks"}, {"name": "quiet"}}})
	})
	mux.HandleFunc("GET /v1/topics/{topic}/hot-keys", func(w http.ResponseWriter, r *http.Request) {
		hk := httpapi.HotKeys{Topic: r.PathValue("topic"), WindowSeconds: 10, Counters: 16}
		switch hk.Topic {
		case "clicks":
			keys := []hotkeys.KeyRate{
				{Key: "user-7", KeyBytes: 6, RecordsPerSec: 3000, ErrorPerSec: 0, Share: 0.6},
				{Key: "0x00ff", KeyBytes: 40, Truncated: true, RecordsPerSec: 1000, ErrorPerSec: 50, Share: 0.2},
			}
			if r.URL.Query().Get("top") == "1" {
				keys = keys[:1]
			}
			hk.Partitions = []httpapi.PartitionHotKeys{
				{Partition: 0, Leader: 2, Report: hotkeys.Report{BytesPerSec: 2.5e6, RecordsPerSec: 5000, Keys: keys}},
				{Partition: 1, Leader: 3, Error: "node 3: connection refused"},
			}
		case "quiet":
			hk.Partitions = []httpapi.PartitionHotKeys{{Partition: 0, Leader: 1, Report: hotkeys.Report{Keys: []hotkeys.KeyRate{}}}}
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"UNKNOWN_TOPIC_OR_PARTITION","message":"unknown topic: ` + hk.Topic + `"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(hk)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestTop(t *testing.T) {
	srv := topServer(t)
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
	r := ctl("top").want(t, 0, "TOPIC", "HOT KEY", "user-7", "5.0k", "2.5M", "60%", "(node 3: connection refused)")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "clicks") || !strings.HasPrefix(lines[3], "quiet") {
		t.Fatalf("want clicks (busiest) first, one key each, quiet last:\n%s", r.stdout)
	}
	ctl("top", "--topic", "clicks", "--keys", "2").want(t, 0, "0x00ff…", "1.0k±50", "20%")
	ctl("top", "--limit", "1").want(t, 0, "user-7")
	hk := decode[httpapi.HotKeys](t, ctl("top", "--topic", "clicks", "--json").want(t, 0))
	if hk.Topic != "clicks" || len(hk.Partitions) != 2 || hk.Partitions[0].Keys[0].Key != "user-7" {
		t.Fatalf("--json: %+v", hk)
	}
	all := decode[struct{ Topics []httpapi.HotKeys }](t, ctl("--json", "top").want(t, 0))
	if len(all.Topics) != 2 {
		t.Fatalf("--json over every topic: %+v", all)
	}
	ctl("top", "--topic", "none").wantErr(t, 1, "unknown topic: none")
	ctl("top", "--keys", "17").wantErr(t, 2, "--keys 17")
	ctl("top", "extra").wantErr(t, 2, `unexpected argument "extra"`)
	ctl("top", "--help").want(t, 0)
}
