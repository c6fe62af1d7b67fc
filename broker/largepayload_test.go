package broker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/envelope"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/payload/ref"
)

// testClaimer stands in for the object service (broker/largeobj, set in
// Config.Refs at merge): it knows completed sessions by reference.
type testClaimer struct {
	mu       sync.Mutex
	sessions map[string]testSession
	claims   []string
}

type testSession struct {
	tenant string
	r      ref.Ref
}

func newTestClaimer(sessions ...testSession) *testClaimer {
	c := &testClaimer{sessions: map[string]testSession{}}
	for _, s := range sessions {
		c.sessions[s.r.ID] = s
	}
	return c
}

func (c *testClaimer) Claim(_ context.Context, tenant string, r ref.Ref, _ node.RefSite) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, tenant+"/"+r.ID)
	s, ok := c.sessions[r.ID]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ref.ErrUnknown, r.ID)
	case s.tenant != tenant:
		return fmt.Errorf("%w: %s", ref.ErrUnknown, r.ID)
	case s.r.Size != r.Size || s.r.SHA256 != r.SHA256:
		return fmt.Errorf("%w: %s", ref.ErrMismatch, r.ID)
	}
	return nil
}

func testRef(id string, size int64) ref.Ref {
	return ref.Ref{ID: id, Size: size, SHA256: ref.SumHex(sha256.Sum256([]byte(id))), ContentType: "application/octet-stream"}
}

func envelopeHeaders(r ref.Ref) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers() {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return hs
}

// TestMaxInlineBytesConfig: max.inline.bytes is a validated topic config,
// 256 KiB by default, described by DescribeConfigs.
func TestMaxInlineBytesConfig(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := "-1"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.inline.bytes": &bad}, "bad")
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("max.inline.bytes=-1: %v, want INVALID_CONFIG", err)
	}
	createTopic(t, cl, "small", 1, map[string]string{"max.inline.bytes": "1000"})
	createTopic(t, cl, "plain", 1, nil)
	rcs, err := adm.DescribeTopicConfigs(ctx, "small", "plain")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"small": "1000", "plain": "262144"} {
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range rc.Configs {
			found = found || c.Key == "max.inline.bytes" && c.MaybeValue() == want
		}
		if !found {
			t.Fatalf("%s: DescribeConfigs lacks max.inline.bytes=%s: %+v", topic, want, rc.Configs)
		}
	}
}

// produceV9 sends one batch of recs to topic-0 with a produce v9 and
// returns the partition's answer.
func produceV9(t *testing.T, cl *kgo.Client, topic string, recs ...kmsg.Record) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
		recs[i].TimestampDelta64 = time.Now().UnixMilli()
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = encodeTestBatch(recs, idx)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestProduceAboveMaxInlineBytes: a record above the topic's
// max.inline.bytes is MESSAGE_TOO_LARGE, with a message that names the
// upload API and the record in record_errors; smaller batches pass.
func TestProduceAboveMaxInlineBytes(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, cl, "small", 1, map[string]string{"max.inline.bytes": "1000"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: bytes.Repeat([]byte("a"), 1000)}).FirstErr(); err != nil {
		t.Fatalf("a record of exactly max.inline.bytes: %v", err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: bytes.Repeat([]byte("a"), 1001)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a record above max.inline.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	// Compressed: the limit holds on the records, not the compressed bytes.
	zcl := testClient(t, b, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	err = zcl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: bytes.Repeat([]byte("a"), 5000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a compressed record above max.inline.bytes: %v, want MESSAGE_TOO_LARGE", err)
	}
	sp := produceV9(t, cl, "small", kmsg.Record{Value: []byte("ok")}, kmsg.Record{Value: bytes.Repeat([]byte("b"), 2000)})
	if sp.ErrorCode != kerr.MessageTooLarge.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "POST /v1/uploads") {
		t.Fatalf("produce v9: code %d message %v", sp.ErrorCode, sp.ErrorMessage)
	}
	if len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("record_errors %+v, want record 1", sp.ErrorRecords)
	}
}

// TestProduceEnvelopes: a produced envelope is claimed for the topic's
// tenant; an unknown or mismatched reference is INVALID_RECORD with the
// record in record_errors and nothing of its batch appended; a broker
// without an object store refuses every envelope.
func TestProduceEnvelopes(t *testing.T) {
	good := testRef("good1", 100<<20)
	claimer := newTestClaimer(testSession{tenant: "default", r: good})
	cfg := testBrokerConfig(t)
	cfg.Refs = claimer
	b := startBroker(t, cfg)
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	createTopic(t, cl, "env", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "env", Headers: envelopeHeaders(good)}).FirstErr(); err != nil {
		t.Fatalf("envelope of a completed session: %v", err)
	}
	mismatched := good
	mismatched.Size = 5
	for _, r := range []ref.Ref{testRef("nope", 10), mismatched} {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "env", Headers: envelopeHeaders(r)}).FirstErr()
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("envelope %+v: %v, want INVALID_RECORD", r, err)
		}
	}
	var inline kmsg.Record
	env := kmsg.Record{}
	for _, h := range testRef("nope", 10).Headers() {
		env.Headers = append(env.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	sp := produceV9(t, cl, "env", inline, env)
	if sp.ErrorCode != kerr.InvalidRecord.Code || len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 1 ||
		!strings.Contains(*sp.ErrorRecords[0].ErrorMessage, "unknown object reference") {
		t.Fatalf("produce v9: code %d records %+v", sp.ErrorCode, sp.ErrorRecords)
	}
	if hw := highWatermark(t, cl, "env"); hw != 1 {
		t.Fatalf("high watermark %d: only the good envelope was to be appended", hw)
	}

	// Without an object store.
	b2 := startBroker(t, testBrokerConfig(t))
	cl2 := testClient(t, b2)
	createTopic(t, cl2, "env", 1, nil)
	err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "env", Headers: envelopeHeaders(good)}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("envelope without an object store: %v, want INVALID_RECORD", err)
	}
}

func highWatermark(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, 0)
	return o.Offset
}

// encodeTestBatch encodes recs[idx...] as one uncompressed batch.
func encodeTestBatch(recs []kmsg.Record, idx []int) []byte {
	return node.EncodeBatch(recs, idx, -1, -1, -1)
}

// TestHTTPPublishObjectRef: an HTTP publish with object_ref writes an
// envelope record (the convention's headers, the preview as value) that a
// Kafka consumer reads and an HTTP fetch answers with its object_ref; an
// unknown reference is 400 INVALID_RECORD; an inline payload above
// max.inline.bytes is 413 naming POST /v1/uploads.
func TestHTTPPublishObjectRef(t *testing.T) {
	good := testRef("upl7k2", 100<<20)
	cfg := testBrokerConfig(t)
	cfg.Refs = newTestClaimer(testSession{tenant: "default", r: good})
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"docs","partitions":1,"configs":{"max.inline.bytes":"4096"}}`); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	resp, err := http.Get(base + "/v1/topics/docs")
	if err != nil {
		t.Fatal(err)
	}
	desc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`"max.inline.bytes"[^}]*"4096"`).Match(desc) {
		t.Fatalf("GET /v1/topics/docs does not show max.inline.bytes 4096: %s", desc)
	}
	objRef := fmt.Sprintf(`{"ref":%q,"size":%d,"sha256":%q,"content_type":"application/pdf","expires_if_unpublished":"2026-12-02T15:00:00Z"}`,
		good.ID, good.Size, good.SHA256)
	code, body := postJSON(t, base+"/v1/topics/docs/messages:publish",
		`{"messages":[{"message_key":"invoice-1","headers":{"trace":"t1"},"object_ref":`+objRef+`,"preview":"Invoice 1"}]}`)
	if code != 200 {
		t.Fatalf("publish object_ref: %d %v", code, body)
	}
	for _, c := range []struct {
		name, msg string
		status    int
		contains  string
	}{
		{"unknown", fmt.Sprintf(`{"object_ref":{"ref":"nope","size":1,"sha256":%q}}`, good.SHA256), 400, "unknown object reference"},
		{"malformed", `{"object_ref":{"ref":"a/b","size":1,"sha256":"x"}}`, 400, "malformed object reference"},
		{"forged headers", fmt.Sprintf(`{"headers":{"sluice.ref":"nope","sluice.size":"1","sluice.sha256":%q}}`, good.SHA256), 400, "unknown object reference"},
		{"both", `{"payload":"x","object_ref":` + objRef + `}`, 400, "not both"},
		{"preview too long", `{"object_ref":` + objRef + `,"preview":"` + strings.Repeat("p", 1025) + `"}`, 400, "preview"},
		{"too large inline", `{"payload":"` + strings.Repeat("x", 5000) + `"}`, 413, "POST /v1/uploads"},
	} {
		code, body := postJSON(t, base+"/v1/topics/docs/messages:publish", `{"messages":[`+c.msg+`]}`)
		e, _ := body["error"].(map[string]any)
		if code != c.status || e == nil || !strings.Contains(fmt.Sprint(e["message"]), c.contains) {
			t.Fatalf("%s: %d %v, want %d with %q", c.name, code, body, c.status, c.contains)
		}
		if c.status == 400 && c.name != "both" && c.name != "preview too long" && e["code"] != "INVALID_RECORD" {
			t.Fatalf("%s: code %v, want INVALID_RECORD", c.name, e["code"])
		}
	}

	// A Kafka consumer sees the envelope.
	cl := testClient(t, b, kgo.ConsumeTopics("docs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got *kgo.Record
	for got == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no record consumed")
		}
		fs.EachRecord(func(r *kgo.Record) { got = r })
	}
	hs := make([]ref.Header, len(got.Headers))
	for i, h := range got.Headers {
		hs[i] = ref.Header{Key: h.Key, Value: h.Value}
	}
	r, ok, err := ref.Parse(hs)
	want := good
	want.ContentType = "application/pdf"
	if !ok || err != nil || r != want || string(got.Value) != "Invoice 1" || string(got.Key) != "invoice-1" {
		t.Fatalf("consumed %+v: parse %+v %v %v", got, r, ok, err)
	}
	if hw := highWatermark(t, cl, "docs"); hw != 1 {
		t.Fatalf("high watermark %d: the refused publishes appended records", hw)
	}

	// An HTTP fetch answers the object_ref.
	code, joined := postJSON(t, base+"/v1/groups/g/members:join", `{"topics":["docs"],"session_timeout_ms":10000}`)
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	code, fetched := postJSON(t, base+"/v1/groups/g/messages:fetch", fmt.Sprintf(`{"member_id":%q,"generation":%d,"topic":"docs","partition":0}`,
		joined["member_id"], int(joined["generation"].(float64))))
	msgs, _ := fetched["messages"].([]any)
	if code != 200 || len(msgs) != 1 {
		t.Fatalf("fetch: %d %v", code, fetched)
	}
	m := msgs[0].(map[string]any)
	or, _ := m["object_ref"].(map[string]any)
	if or == nil || or["ref"] != good.ID || or["size"] != float64(good.Size) || or["sha256"] != good.SHA256 ||
		or["content_type"] != "application/pdf" || or["url"] != "/v1/objects/"+good.ID || m["payload"] != "Invoice 1" {
		t.Fatalf("fetched %v", m)
	}
	if h, _ := m["headers"].(map[string]any); h["trace"] != "t1" || h["sluice.ref"] != good.ID {
		t.Fatalf("fetched headers %v", m["headers"])
	}
}

// slowClaimer is a claimer whose first claim takes longer than a batch
// may wait for its append: it moves the broker's clock past
// envelope.AppendWithin while it runs, as a stalled etcd would.
type slowClaimer struct {
	*testClaimer
	skew    *atomic.Int64 // nanoseconds added to the broker's clock
	stalled atomic.Bool
}

func (c *slowClaimer) Claim(ctx context.Context, tenant string, r ref.Ref, at node.RefSite) error {
	if c.stalled.CompareAndSwap(false, true) {
		c.skew.Add(int64(envelope.AppendWithin + time.Second))
	}
	return c.testClaimer.Claim(ctx, tenant, r, at)
}

// TestClaimedBatchPastItsBoundIsNotAppended: a batch whose claim took
// longer than envelope.AppendWithin is refused (REQUEST_TIMED_OUT, never
// appended late, so the ledger's settle time bounds every claimed record);
// the producer's retry claims again and is appended once. Over HTTP the
// publish fails and appends nothing. On the old code the late batch was
// appended.
func TestClaimedBatchPastItsBoundIsNotAppended(t *testing.T) {
	good := testRef("late1", 100<<20)
	var skew atomic.Int64
	claimer := &slowClaimer{testClaimer: newTestClaimer(testSession{tenant: "default", r: good}), skew: &skew}
	cfg := testBrokerConfig(t)
	cfg.Refs = claimer
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	b := startBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "late", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Kafka: the first attempt is refused, the retry appended once.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "late", Headers: envelopeHeaders(good)}).FirstErr(); err != nil {
		t.Fatalf("envelope produce with retries: %v", err)
	}
	claimer.mu.Lock()
	claims := len(claimer.claims)
	claimer.mu.Unlock()
	if claims != 2 {
		t.Fatalf("%d claims, want 2 (the refused attempt's and its retry's)", claims)
	}
	if hw := highWatermark(t, cl, "late"); hw != 1 {
		t.Fatalf("high watermark %d, want 1: the late attempt must not be appended", hw)
	}

	// HTTP: the publish whose claim stalled fails and appends nothing.
	claimer.stalled.Store(false)
	objRef := fmt.Sprintf(`{"ref":%q,"size":%d,"sha256":%q,"content_type":"application/octet-stream"}`, good.ID, good.Size, good.SHA256)
	code, body := postJSON(t, "http://"+b.Cfg.HTTPListen+"/v1/topics/late/messages:publish", `{"messages":[{"object_ref":`+objRef+`}]}`)
	if code == 200 || !strings.Contains(fmt.Sprint(body), "REQUEST_TIMED_OUT") {
		t.Fatalf("HTTP publish after a stalled claim: %d %v, want a REQUEST_TIMED_OUT result", code, body)
	}
	if hw := highWatermark(t, cl, "late"); hw != 1 {
		t.Fatalf("high watermark %d after the refused HTTP publish, want 1", hw)
	}
}
