package workload

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeQueue answers the queue routes of one group as the test scripts it.
type fakeQueue struct {
	mu      sync.Mutex
	joins   []string // the member id each join asked with
	leaves  []string
	fetchTo int // the status of the next fetch (0: 200)
	gen     int32
}

func (f *fakeQueue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	switch {
	case strings.HasSuffix(r.URL.Path, "/members:join"):
		id, _ := body["member_id"].(string)
		f.joins = append(f.joins, id)
		f.gen++
		if id == "" {
			id = "m" + string(rune('0'+f.gen))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"member_id": id, "generation": f.gen})
	case strings.HasSuffix(r.URL.Path, "/members:leave"):
		id, _ := body["member_id"].(string)
		f.leaves = append(f.leaves, id)
	case strings.HasSuffix(r.URL.Path, "/messages:fetch"):
		if f.fetchTo != 0 {
			w.WriteHeader(f.fetchTo)
			_, _ = w.Write([]byte(`{"error":{"code":"x","message":"y"}}`))
			f.fetchTo = 0
			return
		}
		_, _ = w.Write([]byte(`{"messages":[{"topic":"t","partition":0,"offset":7,"message_key":"k","payload":"ok","attempt":1}]}`))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// A fetch whose answer may have been lost (a 5xx here) makes the member
// leave and join again as a new member: a new generation delivers again
// what the lost answer held. A 409 only joins again, with the same id.
func TestQueueMemberRejoinsAfterALostFetch(t *testing.T) {
	f := &fakeQueue{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx := context.Background()
	m := &QueueMember{Bases: []string{srv.URL}, Group: "g", Topics: []string{"t"}}
	msgs, err := m.Fetch(ctx, 0)
	if err != nil || len(msgs) != 1 || msgs[0].Offset != 7 || *msgs[0].MessageKey != "k" {
		t.Fatalf("first fetch: %v %+v", err, msgs)
	}
	first := m.Generation()
	f.fetchTo = http.StatusServiceUnavailable
	if _, err := m.Fetch(ctx, 0); err == nil {
		t.Fatal("a 503 fetch succeeded")
	}
	if m.Joined() {
		t.Fatal("still joined after a fetch whose answer may be lost")
	}
	if _, err := m.Fetch(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if len(f.leaves) != 1 || f.leaves[0] != "m1" || len(f.joins) != 2 || f.joins[1] != "" || m.Generation() == first {
		t.Fatalf("leaves %v joins %v generation %d (was %d)", f.leaves, f.joins, m.Generation(), first)
	}
	f.fetchTo = http.StatusConflict
	if _, err := m.Fetch(ctx, 0); !errors.Is(err, ErrRejoin) {
		t.Fatalf("a 409 fetch: %v", err)
	}
	if _, err := m.Fetch(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if len(f.leaves) != 1 || len(f.joins) != 3 || f.joins[2] != "m2" {
		t.Fatalf("after a 409: leaves %v joins %v", f.leaves, f.joins)
	}
}
