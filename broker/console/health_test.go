package console

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
)

// healthAPI answers the broker listing and each broker's health: broker 1
// healthy, broker 2 never (it holds the question until the caller gives up,
// or until release: a console without a deadline fails the test rather than
// hanging it), broker 3 refused as unreachable, broker 4 not live.
type healthAPI struct{ release <-chan struct{} }

func (f healthAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/brokers":
		_, _ = io.WriteString(w, `{"controller":1,"brokers":[
			{"id":1,"az":"a","live":true,"controller":true,"http":"h1"},
			{"id":2,"az":"b","live":true,"http":"h2"},
			{"id":3,"az":"c","live":true,"http":"h3"},
			{"id":4,"live":false}]}`)
	case "/v1/brokers/1/health":
		_, _ = io.WriteString(w, `{"node":1,"etcd":{"ok":true,"round_trip_ms":1.25},"disk":{"level":1,"meaning":"no new topics or partitions"},
			"fsync":{"count":40,"p50_seconds":0.0004,"p99_seconds":null,"largest_bucket_seconds":1.6384}}`)
	case "/v1/brokers/2/health":
		select {
		case <-r.Context().Done():
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"peer_unreachable","message":"broker 2 did not answer within 1s"}}`)
		case <-f.release:
			_, _ = io.WriteString(w, `{"node":2,"etcd":{"ok":true,"round_trip_ms":1},"disk":{"level":0,"meaning":"none"},"fsync":{"count":0}}`)
		}
	case "/v1/brokers/3/health":
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"peer_unreachable","message":"node 3 did not answer: connection refused; retry"}}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such route"}}`)
	}
}

var healthRow = regexp.MustCompile(`(?s)<tr data-broker="(\d+)" data-health="([a-z-]+)">(.*?)</tr>`)

// rows is each broker row of a cluster page: its health state and text.
func rows(t *testing.T, body string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, m := range healthRow.FindAllStringSubmatch(body, -1) {
		out[m[1]] = [2]string{m[2], m[3]}
	}
	return out
}

// The cluster page shows every live broker's health in its row, asked of
// GET /v1/brokers/{id}/health; a broker that does not answer within the
// timeout is shown unreachable and the page is served anyway. The old page
// showed only the serving broker's own health, below the table.
func TestClusterPageShowsEveryBrokersHealth(t *testing.T) {
	c, err := New(Config{Now: func() time.Time { return t0 }, HealthTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	timer := time.AfterFunc(20*time.Second, func() { close(release) })
	defer timer.Stop()
	h := c.Mount(healthAPI{release: release}, healthAPI{})
	w := serveAs(t, h, auth.Identity{Principal: auth.Anonymous}, "/ui/")
	if w.Code != http.StatusOK {
		t.Fatalf("cluster page: %d %s", w.Code, w.Body)
	}
	got := rows(t, w.Body.String())
	want := map[string]struct{ state, text string }{
		"1": {"warn", "p50 ≤ 400µs, p99 &gt; the largest bucket over 40 fsyncs"},
		"2": {"unreachable", "unreachable: no answer within 100ms"},
		"3": {"unreachable", "unreachable: node 3 did not answer: connection refused"},
		"4": {"not-asked", "not asked: not live"},
	}
	for id, wt := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("broker %s: no row with its health in\n%s", id, w.Body)
			continue
		}
		if r[0] != wt.state || !strings.Contains(r[1], wt.text) {
			t.Errorf("broker %s: health %s %q, want %s containing %q", id, r[0], r[1], wt.state, wt.text)
		}
	}
	if r := got["1"][1]; !strings.Contains(r, "healthy (read in 1.25ms)") || !strings.Contains(r, "level 1: no new topics or partitions") {
		t.Errorf("broker 1's row %q lacks its etcd round trip or disk level", r)
	}
}
