package redriveapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
)

// TestRedriveCoveredBy: a record is covered by an earlier job only when that job
// decided its offset (in [start, cursor) of the same partition) and its
// scope took it, or when a copy of it naming the job was found past the
// job's cursor.
func TestRedriveCoveredBy(t *testing.T) {
	keyA := queue.RedriveScope{HasKey: true, Key: []byte("A")}
	prior := []earlier{
		{ID: "j1", Scope: keyA, Decided: map[int32]span{0: {From: 0, To: 10}}},
		{ID: "j2", Scope: queue.RedriveScope{FromOffset: 20}, Decided: map[int32]span{1: {From: 20, To: 25}},
			Beyond: map[int32]map[int64]bool{1: {27: true}}},
	}
	rec := func(off int64, key string) Record { return Record{Offset: off, Key: []byte(key)} }
	for _, c := range []struct {
		p    int32
		rec  Record
		want string
	}{
		{0, rec(0, "A"), "j1"},
		{0, rec(9, "A"), "j1"},
		{0, rec(10, "A"), ""}, // at j1's cursor: not decided
		{0, rec(5, "B"), ""},  // decided but out of j1's scope: skipped, not published
		{1, rec(5, "A"), ""},  // another partition
		{1, rec(20, "B"), "j2"},
		{1, rec(24, "A"), "j2"},
		{1, rec(25, "B"), ""},
		{1, rec(27, "B"), "j2"}, // past j2's cursor, its copy found on the target
		{0, rec(27, "B"), ""},
	} {
		got, ok := coveredBy(prior, c.p, c.rec)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("partition %d offset %d key %s: covered by %q %v, want %q", c.p, c.rec.Offset, c.rec.Key, got, ok, c.want)
		}
	}
	if _, ok := coveredBy(nil, 0, rec(0, "A")); ok {
		t.Error("covered with no earlier job")
	}
}

// repeatFixture is a DLQ of 30 dead letters (keys A and B alternating,
// even offsets A) redriven to target t by jobs run one after the other.
type repeatFixture struct {
	t     *testing.T
	store *meta.Store
	be    *memBackend
	m     *Manager
	reg   *meta.Registration
}

func newRepeatFixture(t *testing.T) *repeatFixture {
	store := openStore(t)
	be := &memBackend{topics: map[string][][]Record{"t.dlq": {nil}, "t": {nil, nil}}}
	for i := range 30 {
		key := "A"
		if i%2 == 1 {
			key = "B"
		}
		be.topics["t.dlq"][0] = append(be.topics["t.dlq"][0], Record{Offset: int64(i), Key: []byte(key),
			Value: fmt.Appendf(nil, "v%d", i), MessageID: fmt.Sprintf("m%d", i)})
	}
	reg, err := store.Register(t.Context(), meta.BrokerInfo{NodeID: 1, AZ: "a", Kafka: "127.0.0.1:1", HTTP: "127.0.0.1:2"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &repeatFixture{t: t, store: store, be: be, m: New(be, store, 1, zerolog.Nop()), reg: reg}
}

func (f *repeatFixture) create(id string, created int64, scope meta.RedriveScope) meta.Redrive {
	f.t.Helper()
	qs := scopeOf(scope)
	starts := map[int32]int64{0: qs.Start(0)}
	ends := qs.Ends(map[int32]int64{0: 30})
	f.be.mu.Lock()
	ts := map[int32]int64{0: int64(len(f.be.topics["t"][0])), 1: int64(len(f.be.topics["t"][1]))}
	f.be.mu.Unlock()
	job, err := f.store.CreateRedrive(f.t.Context(), meta.Redrive{ID: id, Tenant: "default", DLQ: "t.dlq", Target: "t", Scope: scope,
		Starts: starts, Ends: ends, TargetStarts: ts, State: meta.RedriveRunning, CreatedMs: created})
	if err != nil {
		f.t.Fatal(err)
	}
	return job
}

// run runs a job to its end on this broker and returns its progress.
func (f *repeatFixture) run(id string) (meta.Redrive, meta.RedriveProgress) {
	f.t.Helper()
	claim, err := f.store.ClaimRedrive(f.t.Context(), id, 1, f.reg.Info().Lease)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); f.m.runJob(f.t.Context(), f.reg, claim) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		f.t.Fatalf("redrive %s did not end", id)
	}
	job, prog, err := f.store.GetRedrive(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return job, prog[0]
}

// copies counts the copies of each message id on the target.
func (f *repeatFixture) copies() map[string]int {
	out := map[string]int{}
	for _, log := range f.be.topics["t"] {
		for _, r := range log {
			out[r.MessageID]++
		}
	}
	return out
}

// TestRunnerRepeatedRedriveSkipsWhatAnEarlierJobRedrove: job 1 redrives
// key A of offsets 0–9; job 2, over the whole DLQ, publishes only what job
// 1 did not (key B there, and every record from 10 on) and counts job 1's
// five as deduped. On the old code job 2 published those five again.
func TestRunnerRepeatedRedriveSkipsWhatAnEarlierJobRedrove(t *testing.T) {
	f := newRepeatFixture(t)
	f.create("j1", 1, meta.RedriveScope{ToOffset: 10, HasKey: true, Key: []byte("A")})
	job, p := f.run("j1")
	if job.State != meta.RedriveDone || p.Redriven != 5 || p.Skipped != 5 || p.Deduped != 0 {
		t.Fatalf("job 1: %s %+v", job.State, p)
	}
	f.create("j2", 2, meta.RedriveScope{})
	job, p = f.run("j2")
	if job.State != meta.RedriveDone || p.Cursor != 30 || p.Redriven != 25 || p.Deduped != 5 || p.Skipped != 0 {
		t.Fatalf("job 2: %s %+v, want done with 25 redriven and 5 deduped", job.State, p)
	}
	copies := f.copies()
	for i := range 30 {
		if id := fmt.Sprintf("m%d", i); copies[id] != 1 {
			t.Errorf("%s: %d copies", id, copies[id])
		}
	}
	for _, log := range f.be.topics["t"] {
		for _, r := range log {
			var off int
			fmt.Sscanf(r.MessageID, "m%d", &off)
			want := "j2"
			if off < 10 && off%2 == 0 {
				want = "j1"
			}
			if _, ok := queue.RedrivenOffset(r.Headers, want, 0); !ok {
				t.Errorf("copy of %s is not %s's", r.MessageID, want)
			}
		}
	}
}

// TestRunnerRepeatedRedriveAfterACrashedCancelledJob: job 1's runner died
// after publishing copies its recorded cursor does not cover, and the job
// was then cancelled; job 2 finds those copies on the target (they name
// job 1) and publishes every dead letter that is not there yet, once.
func TestRunnerRepeatedRedriveAfterACrashedCancelledJob(t *testing.T) {
	f := newRepeatFixture(t)
	job1 := f.create("j1", 1, meta.RedriveScope{})
	claim, err := f.store.ClaimRedrive(t.Context(), "j1", 1, f.reg.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	f.be.crashAt = 7 // no progress was written before the crash
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.m.runPartition(t.Context(), f.reg, claim, job1, meta.RedriveProgress{Partition: 0, Cursor: 0}, nil)
	}()
	<-done
	f.be.crashAt = 0
	if err := f.store.ReleaseRedrive(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	job1, _, err = f.store.GetRedrive(t.Context(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	job1.State, job1.Reason = meta.RedriveCancelled, "cancelled by the client"
	if _, err := f.store.UpdateRedrive(t.Context(), job1, nil); err != nil {
		t.Fatal(err)
	}
	f.create("j2", 2, meta.RedriveScope{})
	job, p := f.run("j2")
	if job.State != meta.RedriveDone || p.Redriven != 23 || p.Deduped != 7 {
		t.Fatalf("job 2: %s %+v, want done with 23 redriven and 7 deduped", job.State, p)
	}
	copies := f.copies()
	for i := range 30 {
		if id := fmt.Sprintf("m%d", i); copies[id] != 1 {
			t.Errorf("%s: %d copies", id, copies[id])
		}
	}
}

// TestRedriveWaitsForABusyEarlierJob: a job does not start while a job
// on the same DLQ and target created before it runs, nor while an ended
// one's runner still holds its claim (it may still write progress); a
// later running job, or one on another target, does not hold it back.
func TestRedriveWaitsForABusyEarlierJob(t *testing.T) {
	f := newRepeatFixture(t)
	ctx := t.Context()
	f.create("j1", 1, meta.RedriveScope{})
	j2 := f.create("j2", 2, meta.RedriveScope{})
	if _, err := f.m.earlierJobs(ctx, j2); !errors.Is(err, errEarlierBusy) || !strings.Contains(err.Error(), "j1") {
		t.Fatalf("j2 with j1 running: %v, want errEarlierBusy naming j1", err)
	}
	j1, _, err := f.store.GetRedrive(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	if prior, err := f.m.earlierJobs(ctx, j1); err != nil || len(prior) != 0 {
		t.Fatalf("j1 with the later j2 running: %v %v, want to start", prior, err)
	}
	claim, err := f.store.ClaimRedrive(ctx, "j1", 1, f.reg.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	j1.State = meta.RedriveCancelled
	if _, err := f.store.UpdateRedrive(ctx, j1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.earlierJobs(ctx, j2); !errors.Is(err, errEarlierBusy) {
		t.Fatalf("j2 with j1 cancelled but still claimed: %v, want errEarlierBusy", err)
	}
	if err := f.store.ReleaseRedrive(ctx, claim); err != nil {
		t.Fatal(err)
	}
	prior, err := f.m.earlierJobs(ctx, j2)
	if err != nil || len(prior) != 1 || prior[0].ID != "j1" {
		t.Fatalf("j2 after j1 ended: %+v %v", prior, err)
	}
}

// testFrontend is the HTTP front end's part the handlers use, without
// tenants or ACLs.
type testFrontend struct{}

func (testFrontend) Decode(_ http.ResponseWriter, r *http.Request, v any) error {
	return json.NewDecoder(r.Body).Decode(v)
}

func (testFrontend) WriteJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f testFrontend) WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	status, code := http.StatusInternalServerError, "internal"
	var e *Error
	if errors.As(err, &e) {
		status, code = e.Status, e.Code
	}
	f.WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": err.Error()}})
}

func (testFrontend) Show(_ *http.Request, internal string) (string, bool) { return internal, true }
func (testFrontend) Allowed(*http.Request, string, string) error          { return nil }
func (testFrontend) Tenant(string) string                                 { return "default" }

// TestRedriveStartRefusedWhileAnotherRunsOnTheSameDLQAndTarget: 409
// redrive_running naming the running job; another target is accepted,
// and so is the same one once the running job ended.
func TestRedriveStartRefusedWhileAnotherRunsOnTheSameDLQAndTarget(t *testing.T) {
	f := newRepeatFixture(t)
	f.be.topics["u"] = [][]Record{nil}
	api := NewAPI(f.m, testFrontend{})
	start := func(target string) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/v1/dlq/t.dlq/redrives", strings.NewReader(`{"target":"`+target+`"}`))
		req.SetPathValue("topic", "t.dlq")
		rec := httptest.NewRecorder()
		api.HandleStart(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%d %q: %v", rec.Code, rec.Body, err)
		}
		return rec.Code, body
	}
	status, body := start("t")
	if status != http.StatusAccepted {
		t.Fatalf("first job: %d %v", status, body)
	}
	id := body["id"].(string)
	status, body = start("t")
	e, _ := body["error"].(map[string]any)
	if status != http.StatusConflict || e["code"] != "redrive_running" || !strings.Contains(fmt.Sprint(e["message"]), id) {
		t.Fatalf("second job on the same DLQ and target: %d %v, want 409 redrive_running naming %s", status, body, id)
	}
	if status, body := start("u"); status != http.StatusAccepted {
		t.Fatalf("a job to another target: %d %v", status, body)
	}
	job, _, err := f.store.GetRedrive(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	job.State = meta.RedriveDone
	if _, err := f.store.UpdateRedrive(context.Background(), job, nil); err != nil {
		t.Fatal(err)
	}
	if status, body := start("t"); status != http.StatusAccepted {
		t.Fatalf("a job after the first ended: %d %v", status, body)
	}
}
