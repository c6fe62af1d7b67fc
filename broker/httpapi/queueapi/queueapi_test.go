package queueapi

import (
	"bytes"
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

	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/queue"
)

// fakeBackend is an in-memory seam for the API's unit tests; the real
// backend is tested with a broker (broker/queue_http_test.go).
type fakeBackend struct {
	gen       int32
	topics    map[string]*fakeTopic
	assigned  map[string][]int32
	committed map[TP]int64
	meta      map[TP]string
	failWrite error
	failOwn   error
	hw        map[TP]int64 // a leader's high watermark below its log end (a failover): reads stop there
}

type fakeTopic struct {
	configs map[string]string
	parts   [][]Record
}

func newFake() *fakeBackend {
	return &fakeBackend{gen: 1, topics: map[string]*fakeTopic{}, assigned: map[string][]int32{}, committed: map[TP]int64{}, meta: map[TP]string{}}
}

func (f *fakeBackend) Heartbeat(_, member string, gen int32) error {
	if gen != f.gen || member != "m" {
		return &Error{Status: 409, Code: "ILLEGAL_GENERATION", Message: "stale"}
	}
	return nil
}
func (f *fakeBackend) Assignment(string, string) (map[string][]int32, error) { return f.assigned, nil }
func (f *fakeBackend) Committed(_ context.Context, _ string, tp TP) (int64, string, error) {
	return f.committed[tp], f.meta[tp], nil
}
func (f *fakeBackend) Read(_ context.Context, tp TP, from int64, _ int) ([]Record, error) {
	var out []Record
	for _, r := range f.topics[tp.Topic].parts[tp.Partition] {
		if hw, ok := f.hw[tp]; ok && r.Offset >= hw {
			break
		}
		if r.Offset >= from {
			out = append(out, r)
		}
	}
	return out, nil
}
func (f *fakeBackend) Commit(_ context.Context, _, _ string, _ int32, offsets map[TP]Commit) error {
	for tp, o := range offsets {
		f.committed[tp], f.meta[tp] = o.Offset, o.Metadata
	}
	return nil
}
func (f *fakeBackend) CommitOwn(ctx context.Context, g string, offsets map[TP]Commit) error {
	if f.failOwn != nil {
		return f.failOwn
	}
	return f.Commit(ctx, g, "", -1, offsets)
}
func (f *fakeBackend) GroupOffsets(string) (map[TP]Commit, error) {
	out := map[TP]Commit{}
	for tp, o := range f.committed {
		out[tp] = Commit{o, f.meta[tp]}
	}
	return out, nil
}
func (f *fakeBackend) Groups() []string { return []string{"g"} }
func (f *fakeBackend) Produce(_ context.Context, tp TP, rec Record) error {
	if f.failWrite != nil {
		return f.failWrite
	}
	p := &f.topics[tp.Topic].parts[tp.Partition]
	rec.Offset = int64(len(*p))
	*p = append(*p, rec)
	return nil
}
func (f *fakeBackend) Topic(name string) (map[string]string, int32, bool) {
	t := f.topics[name]
	if t == nil {
		return nil, 0, false
	}
	return t.configs, int32(len(t.parts)), true
}
func (f *fakeBackend) CreateTopic(_ context.Context, name string, n int32) error {
	if f.topics[name] == nil {
		f.topics[name] = &fakeTopic{parts: make([][]Record, n)}
	}
	return nil
}
func (f *fakeBackend) Bounds(_ context.Context, tp TP) (int64, int64, error) {
	if hw, ok := f.hw[tp]; ok {
		return 0, hw, nil
	}
	return 0, int64(len(f.topics[tp.Topic].parts[tp.Partition])), nil
}
func (f *fakeBackend) Decode(_ http.ResponseWriter, r *http.Request, v any) error {
	return json.NewDecoder(r.Body).Decode(v)
}
func (f *fakeBackend) WriteJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
func (f *fakeBackend) WriteError(w http.ResponseWriter, _ *http.Request, err error) {
	status := 500
	var e *Error
	if errors.As(err, &e) {
		status = e.Status
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
func (f *fakeBackend) Show(_ *http.Request, internal string) string { return internal }

type harness struct {
	t   *testing.T
	f   *fakeBackend
	api *API
	now time.Time
}

func newHarness(t *testing.T, configs map[string]string, records int) *harness {
	f := newFake()
	f.topics["jobs"] = &fakeTopic{configs: configs, parts: make([][]Record, 1)}
	for i := 0; i < records; i++ {
		f.topics["jobs"].parts[0] = append(f.topics["jobs"].parts[0], Record{Offset: int64(i), Value: []byte(fmt.Sprint(i)), MessageID: fmt.Sprint("id", i)})
	}
	f.assigned["jobs"] = []int32{0}
	h := &harness{t: t, f: f, now: time.UnixMilli(1_000_000)}
	h.api = New(f, zerolog.Nop())
	h.api.now = func() time.Time { return h.now }
	h.api.rnd.Seed(1)
	return h
}

func (h *harness) fetch() []Message {
	h.t.Helper()
	gen := h.f.gen
	r := httptest.NewRequest("POST", "/", nil)
	resp, err := h.api.fetch(r, "g", FetchRequest{MemberID: "m", Generation: &gen})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Messages
}

func (h *harness) settle(path string, body any) (int, Answer) {
	h.t.Helper()
	raw, _ := json.Marshal(body)
	r := httptest.NewRequest("POST", "/", bytes.NewReader(raw))
	r.SetPathValue("group", "g")
	w := httptest.NewRecorder()
	if path == "ack" {
		h.api.HandleAck(w, r)
	} else {
		h.api.HandleNack(w, r)
	}
	var ans Answer
	_ = json.Unmarshal(w.Body.Bytes(), &ans)
	return w.Code, ans
}

func (h *harness) ack(offs ...int64) Answer {
	gen := h.f.gen
	req := AckRequest{MemberID: "m", Generation: &gen}
	for _, o := range offs {
		req.Acks = append(req.Acks, Ref{"jobs", 0, o})
	}
	code, ans := h.settle("ack", req)
	if code != 200 {
		h.t.Fatalf("ack %v: %d", offs, code)
	}
	return ans
}

func TestAckOutOfOrderCommitsThePrefix(t *testing.T) {
	h := newHarness(t, nil, 3)
	if got := len(h.fetch()); got != 3 {
		t.Fatalf("fetched %d", got)
	}
	if len(h.fetch()) != 0 {
		t.Fatal("a second fetch delivered the outstanding records again")
	}
	h.ack(2)
	if h.f.committed[TP{"jobs", 0}] != 0 {
		t.Fatal("committed past the unacknowledged 0 and 1")
	}
	h.ack(0)
	if h.f.committed[TP{"jobs", 0}] != 1 {
		t.Fatalf("committed %v, want 1", h.f.committed)
	}
	ans := h.ack(1, 1)
	if h.f.committed[TP{"jobs", 0}] != 3 || ans.Results[1].Status != "not_delivered" {
		t.Fatalf("committed %v, results %+v", h.f.committed, ans.Results)
	}
}

// TestNewGenerationDeliversAgain: a rebalance delivers again what was not
// acknowledged, and only that: an acknowledgement out of order is kept in
// the commit's metadata (before, it was in memory only, and offset 1 came
// again).
func TestNewGenerationDeliversAgain(t *testing.T) {
	h := newHarness(t, nil, 3)
	h.fetch()
	h.ack(1) // out of order: kept in the commit
	h.f.gen = 2
	if got := h.fetch(); len(got) != 2 || got[0].Offset != 0 || got[1].Offset != 2 {
		t.Fatalf("after the rebalance: %+v", got)
	}
	// The old generation is refused.
	old := int32(1)
	if code, _ := h.settle("ack", AckRequest{MemberID: "m", Generation: &old, Acks: []Ref{{"jobs", 0, 0}}}); code != 409 {
		t.Fatalf("stale ack: %d", code)
	}
}

func TestRetryIsHeldUntilDue(t *testing.T) {
	h := newHarness(t, map[string]string{queue.CfgBackoffMs: "200", queue.CfgJitter: "0", queue.CfgMaxAttempts: "2"}, 1)
	h.fetch()
	gen := h.f.gen
	code, ans := h.settle("nack", NackRequest{MemberID: "m", Generation: &gen,
		Nacks: []NackRef{{Ref: Ref{"jobs", 0, 0}, ErrorClass: "transient", Error: "e1"}}})
	if code != 200 || ans.Results[0].Status != "retry" || ans.Results[0].ToTopic != "__retry.g.jobs.0" ||
		ans.Results[0].DueMs != h.now.Add(200*time.Millisecond).UnixMilli() || h.f.committed[TP{"jobs", 0}] != 1 {
		t.Fatalf("nack: %d %+v committed %v", code, ans, h.f.committed)
	}
	h.now = h.now.Add(199 * time.Millisecond)
	if got := h.fetch(); len(got) != 0 {
		t.Fatalf("delivered before due: %+v", got)
	}
	h.now = h.now.Add(time.Millisecond)
	got := h.fetch()
	if len(got) != 1 || got[0].Topic != "__retry.g.jobs.0" || got[0].Attempt != 2 || got[0].MessageID != "id0" || got[0].SourceTopic != "jobs" {
		t.Fatalf("due: %+v", got)
	}
	// The second failure is the last attempt: the dead-letter topic.
	code, ans = h.settle("nack", NackRequest{MemberID: "m", Generation: &gen,
		Nacks: []NackRef{{Ref: Ref{got[0].Topic, 0, got[0].Offset}, ErrorClass: "transient", Error: "e2"}}})
	if code != 200 || ans.Results[0].Status != "dead_letter" || ans.Results[0].ToTopic != "jobs.dlq" {
		t.Fatalf("second nack: %d %+v", code, ans)
	}
	dead := h.f.topics["jobs.dlq"].parts[0][0]
	m, ok, err := queue.Parse(dead.Headers)
	if err != nil || !ok || m.Attempt != 2 || m.History[0].Error != "e1" || m.DeadReason != "exhausted" || dead.MessageID != "id0" {
		t.Fatalf("dead letter %+v: %+v %v", dead, m, err)
	}
}

// TestTierStopsAtTheFirstRecordNotDue: a later record of a tier that is
// due (jitter) waits behind an earlier one that is not.
func TestTierStopsAtTheFirstRecordNotDue(t *testing.T) {
	h := newHarness(t, map[string]string{queue.CfgBackoffMs: "1000", queue.CfgJitter: "0"}, 0)
	tier := "__retry.g.jobs.0"
	h.f.topics[tier] = &fakeTopic{parts: make([][]Record, 1)}
	for i, due := range []time.Duration{500 * time.Millisecond, 100 * time.Millisecond} {
		m := queue.Meta{SourceTopic: "jobs", Group: "g", FirstSeen: h.now, Attempt: 1, Due: h.now.Add(due), Tier: 0,
			History: []queue.Failure{{At: h.now, Class: "transient"}}}
		h.f.topics[tier].parts[0] = append(h.f.topics[tier].parts[0], Record{Offset: int64(i), Headers: m.Headers()})
	}
	h.now = h.now.Add(200 * time.Millisecond)
	if got := h.fetch(); len(got) != 0 {
		t.Fatalf("handed out %+v behind a record not due", got)
	}
	h.now = h.now.Add(300 * time.Millisecond)
	if got := h.fetch(); len(got) != 2 {
		t.Fatalf("both due: %+v", got)
	}
}

func TestFailedCopyLeavesTheRecordOutstanding(t *testing.T) {
	h := newHarness(t, nil, 1)
	h.fetch()
	h.f.failWrite = errors.New("disk full")
	gen := h.f.gen
	_, ans := h.settle("nack", NackRequest{MemberID: "m", Generation: &gen,
		Nacks: []NackRef{{Ref: Ref{"jobs", 0, 0}, ErrorClass: "transient"}}})
	if ans.Results[0].Status != "error" || len(h.f.committed) != 0 {
		t.Fatalf("%+v committed %v", ans, h.f.committed)
	}
	h.ack(0) // still outstanding
	if h.f.committed[TP{"jobs", 0}] != 1 {
		t.Fatalf("committed %v", h.f.committed)
	}
	// A bad class is a 400.
	if code, _ := h.settle("nack", NackRequest{MemberID: "m", Generation: &gen,
		Nacks: []NackRef{{Ref: Ref{"jobs", 0, 0}, ErrorClass: "Bad Class"}}}); code != 400 {
		t.Fatalf("bad class: %d", code)
	}
}

func TestRetryTopicIsTheTenants(t *testing.T) {
	if got := retryTopic("acme~billing", "acme~orders", 1); got != "acme~__retry.billing.orders.1" {
		t.Fatal(got)
	}
	if got := retryTopic("billing", "orders", 0); got != "__retry.billing.orders.0" {
		t.Fatal(got)
	}
}

// TestQueueFetchShowsObjectRef: an envelope record of a large payload is
// answered by the queue fetch with its object_ref, as by the partition
// fetch (both through wire.NewMessage); before, the queue fetch showed the
// sluice.* headers only.
func TestQueueFetchShowsObjectRef(t *testing.T) {
	h := newHarness(t, nil, 0)
	r := ref.Ref{ID: "obj1", Size: 300 << 10, SHA256: strings.Repeat("ab", 32)}
	var hs []queue.Header
	for _, x := range r.Headers() {
		hs = append(hs, queue.Header{Key: x.Key, Value: x.Value})
	}
	h.f.topics["jobs"].parts[0] = append(h.f.topics["jobs"].parts[0], Record{Offset: 0, Headers: hs, MessageID: "big"})
	msgs := h.fetch()
	if len(msgs) != 1 || msgs[0].ObjectRef == nil || msgs[0].ObjectRef.AsRef() != r || msgs[0].ObjectRef.URL != "/v1/objects/obj1" {
		t.Fatalf("queue fetch of an envelope: %+v", msgs)
	}
	if msgs[0].MessageID != "big" || msgs[0].Topic != "jobs" || msgs[0].Attempt != 1 {
		t.Fatalf("message %+v", msgs[0])
	}
}

// keyedHarness is a per-key-strict (or per-partition-strict) topic whose
// records have the keys given.
func keyedHarness(t *testing.T, order string, keys ...string) *harness {
	h := newHarness(t, map[string]string{queue.CfgDeliveryOrder: order}, 0)
	for i, k := range keys {
		h.f.topics["jobs"].parts[0] = append(h.f.topics["jobs"].parts[0], Record{Offset: int64(i), Key: []byte(k), Value: []byte(fmt.Sprint(i))})
	}
	return h
}

func (h *harness) nack(off int64) Result {
	h.t.Helper()
	gen := h.f.gen
	code, ans := h.settle("nack", NackRequest{MemberID: "m", Generation: &gen,
		Nacks: []NackRef{{Ref: Ref{"jobs", 0, off}, ErrorClass: "bad-input", Error: "boom"}}})
	if code != 200 {
		h.t.Fatalf("nack %d: %d", off, code)
	}
	return ans.Results[0]
}

func (h *harness) key(path string, body KeyRequest) (int, KeyAnswer) {
	h.t.Helper()
	b, _ := json.Marshal(body)
	r := httptest.NewRequest("POST", "/v1/groups/g/keys:"+path, bytes.NewReader(b))
	r.SetPathValue("group", "g")
	w := httptest.NewRecorder()
	if path == "resume" {
		h.api.HandleResume(w, r)
	} else {
		h.api.HandleSkip(w, r)
	}
	var ans KeyAnswer
	_ = json.Unmarshal(w.Body.Bytes(), &ans)
	return w.Code, ans
}

func offsetsOf(msgs []Message) []int64 {
	out := []int64{}
	for _, m := range msgs {
		out = append(out, m.Offset)
	}
	return out
}

// TestStrictKeyPauseResume: a nack on key K pauses K: K's later records
// (delivered ones withdrawn, new ones held) wait while the other keys
// flow; the pause is in the commit, so a rebalance keeps it; keys:resume
// delivers K's records again from the nacked one, in order.
func TestStrictKeyPauseResume(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "A", "K", "B")
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("fetched %v", got)
	}
	res := h.nack(0)
	if res.Status != "paused" || fmt.Sprint(res.Withdrawn) != "[2]" {
		t.Fatalf("nack: %+v", res)
	}
	if ans := h.ack(2); ans.Results[0].Status != "not_delivered" {
		t.Fatalf("ack of a withdrawn record: %+v", ans.Results[0])
	}
	h.ack(1, 3)
	for i := 4; i < 8; i++ { // K and C records appended while paused
		k := []string{"K", "C"}[i%2]
		h.f.topics["jobs"].parts[0] = append(h.f.topics["jobs"].parts[0], Record{Offset: int64(i), Key: []byte(k)})
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[5 7]" {
		t.Fatalf("while paused: %v", got)
	}
	h.ack(5, 7)
	if h.f.committed[TP{"jobs", 0}] != 0 {
		t.Fatalf("committed %d past the paused record", h.f.committed[TP{"jobs", 0}])
	}
	paused := h.api.Paused(nil, "g")[TP{"jobs", 0}]
	if len(paused) != 1 || *paused[0].MessageKey != "K" || paused[0].FirstHeld != 0 || paused[0].ErrorClass != "bad-input" {
		t.Fatalf("paused %+v", paused)
	}
	// A rebalance keeps the pause and the acknowledgements.
	h.f.gen = 2
	if got := offsetsOf(h.fetch()); len(got) != 0 {
		t.Fatalf("after the rebalance: %v", got)
	}
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("A")}); code != 404 {
		t.Fatalf("resume of a key not paused: %d", code)
	}
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0}); code != 400 {
		t.Fatalf("resume without a key: %d", code)
	}
	code, ans := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")})
	if code != 200 || ans.Status != "resumed" || ans.FirstHeld != 0 {
		t.Fatalf("resume: %d %+v", code, ans)
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[0 2 4 6]" {
		t.Fatalf("after the resume: %v", got)
	}
	h.ack(0, 2, 4, 6)
	if h.f.committed[TP{"jobs", 0}] != 8 || len(h.api.Paused(nil, "g")) != 0 {
		t.Fatalf("committed %d, paused %v", h.f.committed[TP{"jobs", 0}], h.api.Paused(nil, "g"))
	}
}

func ptr[T any](v T) *T { return &v }

// TestStrictSkipDeadLetters: keys:skip writes the paused record to the
// dead-letter topic (reason skipped) and delivers the key's later records.
func TestStrictSkipDeadLetters(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "K")
	h.fetch()
	h.nack(0)
	code, ans := h.key("skip", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")})
	if code != 200 || ans.Status != "skipped" || ans.ToTopic != "jobs.dlq" || ans.Committed != 1 {
		t.Fatalf("skip: %d %+v", code, ans)
	}
	dl := h.f.topics["jobs.dlq"].parts[0]
	m, ok, err := queue.Parse(dl[0].Headers)
	if len(dl) != 1 || !ok || err != nil || m.DeadReason != "skipped" || m.SourceOffset != 0 || m.History[0].Class != "bad-input" {
		t.Fatalf("dead letter %+v %v %v", m, ok, err)
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("after the skip: %v", got)
	}
}

// TestStrictSkipWhileLeaderCatchesUp: a keys:skip while the partition's new
// leader cannot serve the paused record yet (its high watermark below it,
// after a failover) is refused as retriable (503 offset_not_available),
// not as a record gone (500); the key stays paused, and the skip succeeds
// once the record is readable. (Seen in the chaos poison family: skips
// right after every broker restarted answered 500 "no longer in the log".)
func TestStrictSkipWhileLeaderCatchesUp(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "K")
	h.fetch()
	h.nack(0)
	h.f.hw = map[TP]int64{{"jobs", 0}: 0}
	code, _ := h.key("skip", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")})
	if code != http.StatusServiceUnavailable {
		t.Fatalf("skip while the leader catches up: %d, want 503", code)
	}
	if dl := h.f.topics["jobs.dlq"]; dl != nil && len(dl.parts[0]) != 0 {
		t.Fatalf("dead-lettered %v anyway", dl.parts[0])
	}
	h.f.hw = nil
	if got := offsetsOf(h.fetch()); len(got) != 0 {
		t.Fatalf("delivered %v after a refused skip", got)
	}
	if code, ans := h.key("skip", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")}); code != 200 || ans.Status != "skipped" {
		t.Fatalf("skip: %d %+v", code, ans)
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("after the skip: %v", got)
	}
}

// TestStrictResumeFailureKeepsPause: a resume whose commit fails is
// refused and the key stays paused.
func TestStrictResumeFailureKeepsPause(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "K")
	h.fetch()
	h.nack(0)
	h.f.failOwn = errors.New("etcd down")
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")}); code != 500 {
		t.Fatalf("resume with a failing commit: %d", code)
	}
	if got := offsetsOf(h.fetch()); len(got) != 0 {
		t.Fatalf("delivered %v after a failed resume", got)
	}
	h.f.failOwn = nil
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")}); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("after the resume: %v", got)
	}
}

// TestStrictPartitionPause: on per-partition-strict a nack holds the whole
// partition; keys:resume without a key lifts it.
func TestStrictPartitionPause(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerPartitionStrict, "A", "B", "C")
	h.fetch()
	if res := h.nack(1); res.Status != "paused" || fmt.Sprint(res.Withdrawn) != "[2]" {
		t.Fatalf("nack: %+v", res)
	}
	h.ack(0)
	h.f.topics["jobs"].parts[0] = append(h.f.topics["jobs"].parts[0], Record{Offset: 3, Key: []byte("D")})
	if got := offsetsOf(h.fetch()); len(got) != 0 {
		t.Fatalf("while paused: %v", got)
	}
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("B")}); code != 400 {
		t.Fatalf("resume with a key on a partition pause: %d", code)
	}
	paused := h.api.Paused(nil, "g")[TP{"jobs", 0}]
	if len(paused) != 1 || !paused[0].WholePartition || paused[0].FirstHeld != 1 {
		t.Fatalf("paused %+v", paused)
	}
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0}); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("after the resume: %v", got)
	}
}

// TestVisibilityTimeout: with visibility.timeout.ms, records fetched and
// neither acked nor nacked in time are delivered again (a key's in its
// order); without it they are not.
func TestVisibilityTimeout(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "A", "K")
	h.f.topics["jobs"].configs[queue.CfgVisibilityMs] = "1000"
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("fetched %v", got)
	}
	h.ack(1)
	h.now = h.now.Add(999 * time.Millisecond)
	if got := offsetsOf(h.fetch()); len(got) != 0 {
		t.Fatalf("before the timeout: %v", got)
	}
	h.now = h.now.Add(time.Millisecond)
	if got := offsetsOf(h.fetch()); fmt.Sprint(got) != "[0 2]" {
		t.Fatalf("after the timeout: %v", got)
	}
	h.ack(0, 2)
	if h.f.committed[TP{"jobs", 0}] != 3 {
		t.Fatalf("committed %d", h.f.committed[TP{"jobs", 0}])
	}
	h2 := keyedHarness(t, queue.OrderPerKeyStrict, "K")
	h2.fetch()
	h2.now = h2.now.Add(time.Hour)
	if got := offsetsOf(h2.fetch()); len(got) != 0 {
		t.Fatalf("without a visibility timeout: %v", got)
	}
}

// TestResumeUsesTheDurableState: a lane in memory that is not what the
// commit holds (another coordinator paused a second key since) is not
// used by keys:resume, so the other pause is kept.
func TestResumeUsesTheDurableState(t *testing.T) {
	h := keyedHarness(t, queue.OrderPerKeyStrict, "K", "L", "K", "L")
	h.fetch()
	h.nack(0)
	// Another coordinator: it paused L too and wrote that to the commit.
	other := New(h.f, zerolog.Nop())
	other.now = h.api.now
	gen := h.f.gen
	r := httptest.NewRequest("POST", "/", nil)
	if _, err := other.fetch(r, "g", FetchRequest{MemberID: "m", Generation: &gen}); err != nil {
		t.Fatal(err)
	}
	saved := h.api
	h.api = other
	h.nack(1)
	h.api = saved
	if code, _ := h.key("resume", KeyRequest{Topic: "jobs", Partition: 0, MessageKey: ptr("K")}); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	paused := h.api.Paused(nil, "g")[TP{"jobs", 0}]
	if len(paused) != 1 || *paused[0].MessageKey != "L" {
		t.Fatalf("paused after resuming K: %+v", paused)
	}
}
