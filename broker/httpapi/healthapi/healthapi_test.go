package healthapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
)

// A quantile is the bound of the bucket that holds it; none before the
// first sample or beyond the last bucket.
func TestQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.004}
	for _, tc := range []struct {
		cum   []uint64
		total uint64
		q     float64
		want  string
	}{
		{[]uint64{0, 0, 0}, 0, 0.5, "none"},
		{[]uint64{10, 10, 10}, 10, 0.99, "0.001"},
		{[]uint64{5, 9, 10}, 10, 0.5, "0.001"},
		{[]uint64{5, 9, 10}, 10, 0.99, "0.004"},
		{[]uint64{5, 9, 9}, 10, 0.99, "none"}, // one sample beyond 4 ms
		{[]uint64{1, 99, 100}, 100, 0.99, "0.002"},
	} {
		got := "none"
		if b := quantile(bounds, tc.cum, tc.total, tc.q); b != nil {
			got = fmt.Sprint(*b)
		}
		if got != tc.want {
			t.Errorf("quantile(%v, %d, %g) = %s, want %s", tc.cum, tc.total, tc.q, got, tc.want)
		}
	}
}

// The public route asks another broker through the peer call within
// PeerTimeout, and says why it could not: a bad id is 400, a peer that
// does not answer in time is 503 peer_unreachable, the peer call's own
// refusals pass as they are.
func TestPublicAsksPeer(t *testing.T) {
	n := &node.Node{Cfg: node.Config{NodeID: 1}}
	peer := Health{Node: 2, Etcd: Etcd{OK: true, RoundTripMs: 0.5}, Disk: Disk{Level: 0, Meaning: "none"}}
	ask := func(ctx context.Context, id int32, method, path string, body, out any) error {
		if method != http.MethodGet || path != InternalPath || body != nil {
			t.Errorf("asked %s %s with %v", method, path, body)
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the peer was asked without a deadline")
		}
		switch id {
		case 2:
			*out.(*Health) = peer
			return nil
		case 3:
			<-ctx.Done()
			return fmt.Errorf("call to peer 3: %w", ctx.Err())
		}
		return apierr.Errorf(http.StatusServiceUnavailable, "peer_unreachable", "node %d is not live; retry", id)
	}
	writeError := func(w http.ResponseWriter, _ *http.Request, err error) {
		var ae *apierr.Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v is not an API error", err)
		}
		apierr.Write(w, ae)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(Route, Public(n, ask, writeError))
	for _, tc := range []struct {
		id   string
		code int
		body string
	}{
		{"2", http.StatusOK, `"round_trip_ms": 0.5`},
		{"3", http.StatusServiceUnavailable, `broker 3 did not answer within 1s`},
		{"4", http.StatusServiceUnavailable, `node 4 is not live; retry`},
		{"x", http.StatusBadRequest, `broker id \"x\" is not a number`},
	} {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/brokers/"+tc.id+"/health", nil))
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("broker %s: %d %s, want %d with %s", tc.id, w.Code, w.Body, tc.code, tc.body)
		}
		if tc.code == http.StatusOK {
			var h Health
			if err := json.Unmarshal(w.Body.Bytes(), &h); err != nil || h.Node != 2 || h.Fsync.P99Seconds != nil {
				t.Errorf("broker 2's answer %s: %+v %v", w.Body, h, err)
			}
		}
	}
}
