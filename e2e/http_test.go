package e2e

// The HTTP API against the real process: publishing (partitions agree with
// franz-go's key partitioner, message_id arrives as a record header, bad
// input gets the right 4xx) and the HTTP consumer-group flow (join, fetch,
// commit, crash and replay from the last commit, reset by timestamp, lag).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// httpCall sends body (a string is sent as is, anything else as JSON) and
// returns the status and the raw answer.
func httpCall(t testing.TB, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s %s: encode body: %v", method, url, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := &http.Client{Timeout: 45 * time.Second} // longer than any session timeout a join may wait out
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return resp.StatusCode, raw
}

// httpExpect calls and fails unless the status is want; the answer is
// decoded into out when out is not nil.
func httpExpect(t testing.TB, want int, method, url string, body, out any) {
	t.Helper()
	status, raw := httpCall(t, method, url, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, status, want, lastN(string(raw), 2000))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: answer is not the expected JSON: %v: %s", method, url, err, lastN(string(raw), 2000))
		}
	}
}

// apiErrorBody is the API's error envelope.
type apiErrorBody struct {
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expectAPIError fails unless the call answers status with a well-formed
// error envelope, and returns the envelope's code and message.
func expectAPIError(t testing.TB, status int, method, url string, body any) (code, message string) {
	t.Helper()
	got, raw := httpCall(t, method, url, body)
	var e apiErrorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%s %s: status %d, answer %q is not {\"error\":{\"code\",\"message\"}}", method, url, got, lastN(string(raw), 1000))
	}
	if got != status {
		t.Fatalf("%s %s: status %d (%s: %s), want %d", method, url, got, e.Error.Code, e.Error.Message, status)
	}
	return e.Error.Code, e.Error.Message
}

type publishMsg struct {
	MessageKey    *string           `json:"message_key,omitempty"`
	MessageID     string            `json:"message_id,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       *string           `json:"payload,omitempty"`
	PayloadBase64 *string           `json:"payload_base64,omitempty"`
	Partition     *int32            `json:"partition,omitempty"`
	Sequence      *int32            `json:"sequence,omitempty"`
	TimestampMs   *int64            `json:"timestamp_ms,omitempty"`
}

type publishReq struct {
	Messages      []publishMsg `json:"messages"`
	ProducerID    *int64       `json:"producer_id,omitempty"`
	ProducerEpoch *int16       `json:"producer_epoch,omitempty"`
}

type publishResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Status    string `json:"status"`
	Error     string `json:"error"`
}

// publish posts msgs to topic and fails unless every message is accepted
// with one of the given statuses ("ok" when none are given).
func publish(t testing.TB, b *broker, topic string, req publishReq, statuses ...string) []publishResult {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []string{"ok"}
	}
	var out struct {
		Results []publishResult `json:"results"`
	}
	httpExpect(t, http.StatusOK, "POST", "http://"+b.httpAddr+"/v1/topics/"+topic+"/messages:publish", req, &out)
	if len(out.Results) != len(req.Messages) {
		t.Fatalf("publish to %s: %d results for %d messages", topic, len(out.Results), len(req.Messages))
	}
	for i, r := range out.Results {
		ok := false
		for _, s := range statuses {
			ok = ok || r.Status == s
		}
		if !ok {
			t.Fatalf("publish to %s: message %d: status %q (%s), want one of %v", topic, i, r.Status, r.Error, statuses)
		}
	}
	return out.Results
}

func createTopicHTTP(t testing.TB, b *broker, name string, partitions int32, configs map[string]string) {
	t.Helper()
	httpExpect(t, http.StatusCreated, "POST", "http://"+b.httpAddr+"/v1/topics",
		map[string]any{"name": name, "partitions": partitions, "configs": configs}, nil)
	waitTopicReady(t, newAdmin(t, b), name, partitions)
}

func ptr[T any](v T) *T { return &v }

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	out := make(map[int32]int64)
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

func headerValue(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestHTTPPublish(t *testing.T) {
	const (
		topic      = "http-pub"
		partitions = 6
		n          = 60
	)
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	adm := newAdmin(t, b)
	createTopicHTTP(t, b, topic, partitions, nil)

	// HTTP messages 0..n-1 with keys, ids, headers and explicit timestamps.
	ts0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond).UnixMilli()
	var req publishReq
	for i := range n {
		m := publishMsg{
			MessageKey:  ptr(fmt.Sprintf("key-%d", i)),
			MessageID:   fmt.Sprintf("mid-%d", i),
			Headers:     map[string]string{"origin": "http", "n": fmt.Sprint(i)},
			TimestampMs: ptr(ts0 + int64(i)),
		}
		if i%2 == 0 {
			m.Payload = ptr(fmt.Sprintf("payload-%d", i))
		} else {
			m.PayloadBase64 = ptr(base64.StdEncoding.EncodeToString([]byte{0, 0xff, byte(i), '\n'}))
		}
		req.Messages = append(req.Messages, m)
	}
	results := publish(t, b, topic, req)

	// The same keys through franz-go's default partitioner.
	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("kgo")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("franz-go produce: %v", err)
	}
	for i, r := range recs {
		if r.Partition != results[i].Partition {
			t.Errorf("key-%d: HTTP put it in partition %d, franz-go in %d", i, results[i].Partition, r.Partition)
		}
	}

	// franz-go reads what HTTP published, where HTTP said it put it.
	got := consumeAll(t, b, topic, partitions, 2*n)
	byID := make(map[string]*kgo.Record)
	for _, prs := range got {
		for _, r := range prs {
			if id, ok := headerValue(r, "message_id"); ok {
				byID[id] = r
			}
		}
	}
	for i, res := range results {
		r := byID[fmt.Sprintf("mid-%d", i)]
		if r == nil {
			t.Errorf("message %d: no record has header message_id=mid-%d", i, i)
			continue
		}
		want := []byte(fmt.Sprintf("payload-%d", i))
		if i%2 == 1 {
			want = []byte{0, 0xff, byte(i), '\n'}
		}
		if r.Partition != res.Partition || r.Offset != res.Offset {
			t.Errorf("message %d: published at %d/%d, read at %d/%d", i, res.Partition, res.Offset, r.Partition, r.Offset)
		}
		if string(r.Key) != fmt.Sprintf("key-%d", i) || !bytes.Equal(r.Value, want) {
			t.Errorf("message %d: key %q value %q, want key-%d %q", i, r.Key, r.Value, i, want)
		}
		if h, _ := headerValue(r, "origin"); h != "http" {
			t.Errorf("message %d: header origin=%q, want http", i, h)
		}
		if h, _ := headerValue(r, "n"); h != fmt.Sprint(i) {
			t.Errorf("message %d: header n=%q, want %d", i, h, i)
		}
		if r.Timestamp.UnixMilli() != ts0+int64(i) {
			t.Errorf("message %d: timestamp %d, want %d", i, r.Timestamp.UnixMilli(), ts0+int64(i))
		}
	}

	t.Run("idempotent-retry", func(t *testing.T) {
		var pr struct {
			ProducerID    *int64 `json:"producer_id"`
			ProducerEpoch *int16 `json:"producer_epoch"`
		}
		httpExpect(t, http.StatusOK, "POST", "http://"+b.httpAddr+"/v1/producers", map[string]any{}, &pr)
		if pr.ProducerID == nil || *pr.ProducerID < 0 || pr.ProducerEpoch == nil {
			t.Fatalf("POST /v1/producers: %+v", pr)
		}
		req := publishReq{ProducerID: pr.ProducerID, ProducerEpoch: pr.ProducerEpoch}
		for i := range 3 {
			req.Messages = append(req.Messages, publishMsg{Payload: ptr(fmt.Sprintf("idem-%d", i)), Partition: ptr(int32(0)), Sequence: ptr(int32(i))})
		}
		first := publish(t, b, topic, req)
		again := publish(t, b, topic, req, "duplicate")
		for i := range first {
			if again[i].Partition != first[i].Partition || again[i].Offset != first[i].Offset {
				t.Errorf("retry of message %d answered %d/%d, first publish %d/%d", i, again[i].Partition, again[i].Offset, first[i].Partition, first[i].Offset)
			}
		}
		if end := endOffsets(t, adm, topic)[0]; end != first[2].Offset+1 {
			t.Errorf("partition 0 ends at %d after a retried publish, want %d", end, first[2].Offset+1)
		}
	})

	t.Run("bad-input", func(t *testing.T) {
		const small = "http-small"
		createTopicHTTP(t, b, small, 1, map[string]string{"max.message.bytes": "1024"})
		before := endOffsets(t, adm, topic)
		pubURL := "http://" + b.httpAddr + "/v1/topics/" + topic + "/messages:publish"
		cases := []struct {
			name   string
			url    string
			body   any
			status int
		}{
			{"malformed-json", pubURL, `{"messages":[{"payload":"x"}`, http.StatusBadRequest},
			{"not-an-object", pubURL, `["payload"]`, http.StatusBadRequest},
			{"bad-base64", pubURL, publishReq{Messages: []publishMsg{{PayloadBase64: ptr("not base64!")}}}, http.StatusBadRequest},
			{"unknown-topic", "http://" + b.httpAddr + "/v1/topics/no-such-topic/messages:publish",
				publishReq{Messages: []publishMsg{{Payload: ptr("x")}}}, http.StatusNotFound},
			{"oversize", "http://" + b.httpAddr + "/v1/topics/" + small + "/messages:publish",
				publishReq{Messages: []publishMsg{{Payload: ptr(strings.Repeat("x", 2048))}}}, http.StatusRequestEntityTooLarge},
			{"producer-id-without-sequence", pubURL,
				publishReq{ProducerID: ptr(int64(1)), ProducerEpoch: ptr(int16(0)), Messages: []publishMsg{{Payload: ptr("x")}}}, http.StatusBadRequest},
			{"no-messages", pubURL, publishReq{Messages: []publishMsg{}}, http.StatusBadRequest},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				code, msg := expectAPIError(t, tc.status, "POST", tc.url, tc.body)
				t.Logf("%d %s: %s", tc.status, code, msg)
			})
		}
		if after := endOffsets(t, adm, topic); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("rejected publishes moved end offsets of %s: %v -> %v", topic, before, after)
		}
		if end := endOffsets(t, adm, small)[0]; end != 0 {
			t.Errorf("%s ends at %d after an oversize publish, want 0", small, end)
		}
	})
}

// The HTTP consumer-group API's shapes (the contract in the issue).
type (
	httpJoinResp struct {
		MemberID   string `json:"member_id"`
		Generation int32  `json:"generation"`
		Assignment []struct {
			Topic      string  `json:"topic"`
			Partitions []int32 `json:"partitions"`
		} `json:"assignment"`
	}
	httpFetchedMsg struct {
		Offset        int64           `json:"offset"`
		Partition     int32           `json:"partition"`
		MessageKey    *string         `json:"message_key"`
		MessageID     string          `json:"message_id"`
		Headers       json.RawMessage `json:"headers"`
		PayloadBase64 string          `json:"payload_base64"`
		TimestampMs   int64           `json:"timestamp_ms"`
	}
	httpFetchResp struct {
		Messages      []httpFetchedMsg `json:"messages"`
		HighWatermark *int64           `json:"high_watermark"`
		NextOffset    *int64           `json:"next_offset"`
	}
	httpLagPartition struct {
		Topic                 string `json:"topic"`
		Partition             int32  `json:"partition"`
		Committed             int64  `json:"committed"`
		LogEnd                int64  `json:"log_end"`
		Lag                   int64  `json:"lag"`
		LagBytes              int64  `json:"lag_bytes"`
		OldestUnconsumedAgeMs int64  `json:"oldest_unconsumed_age_ms"`
	}
)

// httpGroup drives one group through the HTTP API.
type httpGroup struct {
	t           testing.TB
	base, topic string
}

func (g httpGroup) url(op string) string { return g.base + op }

// join joins as a new member and waits (polling through 409s and
// assignments without the partition, e.g. while a crashed member's session
// runs out) until the new member owns partition 0.
func (g httpGroup) join(sessionMs int) httpJoinResp {
	g.t.Helper()
	var jr httpJoinResp
	eventually(g.t, 45*time.Second, "join "+g.base, func() (bool, string) {
		status, raw := httpCall(g.t, "POST", g.url("/members:join"), map[string]any{"topics": []string{g.topic}, "session_timeout_ms": sessionMs})
		switch status {
		case http.StatusOK:
		case http.StatusConflict:
			return false, "409: " + string(raw)
		default:
			g.t.Fatalf("join: status %d: %s", status, lastN(string(raw), 1000))
		}
		jr = httpJoinResp{}
		if err := json.Unmarshal(raw, &jr); err != nil || jr.MemberID == "" {
			g.t.Fatalf("join: answer %q lacks member_id/generation/assignment (%v)", raw, err)
		}
		for _, a := range jr.Assignment {
			if a.Topic == g.topic && len(a.Partitions) == 1 && a.Partitions[0] == 0 {
				return true, ""
			}
		}
		// Someone else (a crashed member whose session has not run out)
		// still owns the partition: leave, so retries do not pile up members.
		httpExpect(g.t, http.StatusOK, "POST", g.url("/members:leave"), map[string]any{"member_id": jr.MemberID}, nil)
		return false, fmt.Sprintf("assignment %+v does not give the new member %s/0", jr.Assignment, g.topic)
	})
	return jr
}

// fetchAll fetches from offset (nil: where the group stands) until want
// messages arrived, following next_offset.
func (g httpGroup) fetchAll(m httpJoinResp, offset *int64, want int) []httpFetchedMsg {
	g.t.Helper()
	var out []httpFetchedMsg
	for len(out) < want {
		body := map[string]any{"member_id": m.MemberID, "generation": m.Generation, "topic": g.topic, "partition": 0,
			"max_bytes": 1 << 20, "wait_ms": 200}
		if offset != nil {
			body["offset"] = *offset
		}
		var fr httpFetchResp
		httpExpect(g.t, http.StatusOK, "POST", g.url("/messages:fetch"), body, &fr)
		if fr.NextOffset == nil || fr.HighWatermark == nil {
			g.t.Fatalf("fetch: answer lacks next_offset or high_watermark: %+v", fr)
		}
		if len(fr.Messages) == 0 {
			g.t.Fatalf("fetch from %v: no messages with %d of %d read, high watermark %d", offset, len(out), want, *fr.HighWatermark)
		}
		out = append(out, fr.Messages...)
		offset = fr.NextOffset
	}
	return out[:want]
}

func (g httpGroup) commit(m httpJoinResp, offset int64) {
	g.t.Helper()
	httpExpect(g.t, http.StatusOK, "POST", g.url("/offsets:commit"), map[string]any{"member_id": m.MemberID, "generation": m.Generation,
		"offsets": []map[string]any{{"topic": g.topic, "partition": 0, "offset": offset}}}, nil)
}

func (g httpGroup) lag() httpLagPartition {
	g.t.Helper()
	var lr struct {
		Partitions []httpLagPartition `json:"partitions"`
	}
	httpExpect(g.t, http.StatusOK, "GET", g.url("/lag"), nil, &lr)
	for _, p := range lr.Partitions {
		if p.Topic == g.topic && p.Partition == 0 {
			return p
		}
	}
	g.t.Fatalf("lag: no entry for %s/0: %+v", g.topic, lr.Partitions)
	return httpLagPartition{}
}

// checkMessages fails unless msgs are the published messages first.. in order.
func checkMessages(t testing.TB, msgs []httpFetchedMsg, first int, ts0 int64) {
	t.Helper()
	for i, m := range msgs {
		n := first + i
		payload, err := base64.StdEncoding.DecodeString(m.PayloadBase64)
		switch {
		case m.Offset != int64(n) || m.Partition != 0:
			t.Fatalf("message %d of the fetch is at %d/%d, want 0/%d", i, m.Partition, m.Offset, n)
		case err != nil || string(payload) != fmt.Sprintf("payload-%d", n):
			t.Fatalf("offset %d: payload_base64 %q (%v), want payload-%d", n, m.PayloadBase64, err, n)
		case m.MessageID != fmt.Sprintf("mid-%d", n):
			t.Fatalf("offset %d: message_id %q, want mid-%d", n, m.MessageID, n)
		case m.TimestampMs != ts0+int64(n)*1000:
			t.Fatalf("offset %d: timestamp_ms %d, want %d", n, m.TimestampMs, ts0+int64(n)*1000)
		case m.MessageKey == nil || *m.MessageKey != fmt.Sprintf("key-%d", n):
			t.Fatalf("offset %d: message_key %v, want key-%d", n, m.MessageKey, n)
		}
	}
}

func TestHTTPGroupFlow(t *testing.T) {
	const (
		topic     = "http-group"
		total     = 50
		sessionMs = 6_000 // the broker's minimum, Kafka's group.min.session.timeout.ms
	)
	b := startBroker(t, brokerOptions{noAutoCreate: true})
	createTopicHTTP(t, b, topic, 1, nil)
	g := httpGroup{t: t, base: "http://" + b.httpAddr + "/v1/groups/http-flow", topic: topic}

	// Skip only while the endpoints are missing from the router: Go's mux
	// answers those with a plain-text 404/405, never the API's JSON envelope.
	status, raw := httpCall(t, "POST", g.url("/members:join"), map[string]any{"topics": []string{topic}, "session_timeout_ms": sessionMs})
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		var e apiErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Error == nil {
			t.Skipf("HTTP group API not built yet: POST /v1/groups/{group}/members:join answers %d %q", status, strings.TrimSpace(string(raw)))
		}
	}
	if status != http.StatusOK {
		t.Fatalf("first join: status %d: %s", status, lastN(string(raw), 1000))
	}
	// That probe joined a member; it leaves so the flow starts from an empty group.
	var probe httpJoinResp
	if err := json.Unmarshal(raw, &probe); err != nil || probe.MemberID == "" {
		t.Fatalf("first join: answer %q lacks member_id (%v)", raw, err)
	}
	httpExpect(t, http.StatusOK, "POST", g.url("/members:leave"), map[string]any{"member_id": probe.MemberID}, nil)

	ts0 := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	var req publishReq
	for i := range total {
		req.Messages = append(req.Messages, publishMsg{MessageKey: ptr(fmt.Sprintf("key-%d", i)), MessageID: fmt.Sprintf("mid-%d", i),
			Payload: ptr(fmt.Sprintf("payload-%d", i)), Partition: ptr(int32(0)), TimestampMs: ptr(ts0 + int64(i)*1000)})
	}
	publish(t, b, topic, req)

	// Member A: nothing committed, so it starts at the earliest offset; it
	// commits after processing 20, reads on to 35 and crashes.
	a := g.join(sessionMs)
	checkMessages(t, g.fetchAll(a, nil, 20), 0, ts0)
	g.commit(a, 20)
	if st, raw := httpCall(t, "POST", g.url("/members:heartbeat"), map[string]any{"member_id": a.MemberID, "generation": a.Generation}); st != http.StatusOK && st != http.StatusConflict {
		t.Fatalf("heartbeat: status %d, want 200 or 409: %s", st, raw)
	}
	checkMessages(t, g.fetchAll(a, ptr(int64(20)), 15), 20, ts0)

	before := time.Now().UnixMilli()
	l := g.lag()
	after := time.Now().UnixMilli()
	if l.Committed != 20 || l.LogEnd != total || l.Lag != total-20 || l.LagBytes <= 0 {
		t.Errorf("lag after committing 20: %+v, want committed 20, log_end %d, lag %d, lag_bytes > 0", l, total, total-20)
	}
	if ts := ts0 + 20*1000; l.OldestUnconsumedAgeMs < before-ts-1000 || l.OldestUnconsumedAgeMs > after-ts+1000 {
		t.Errorf("oldest_unconsumed_age_ms %d, want now minus offset 20's timestamp (%d..%d)", l.OldestUnconsumedAgeMs, before-ts, after-ts)
	}
	expectAPIError(t, http.StatusConflict, "POST", g.url("/offsets:reset"), map[string]any{"topic": topic, "partition": 0, "to": "earliest"})

	// A stops heartbeating. B joins once A's session has expired and
	// resumes from A's last commit: 20 to 34 are read again.
	bm := g.join(sessionMs)
	if bm.MemberID == a.MemberID || bm.Generation <= a.Generation {
		t.Errorf("second member %q generation %d; want a new member in a generation after %d", bm.MemberID, bm.Generation, a.Generation)
	}
	checkMessages(t, g.fetchAll(bm, nil, 5), 20, ts0)
	code, msg := expectAPIError(t, http.StatusConflict, "POST", g.url("/offsets:commit"), map[string]any{"member_id": a.MemberID, "generation": a.Generation,
		"offsets": []map[string]any{{"topic": topic, "partition": 0, "offset": 35}}})
	t.Logf("commit by the expired member: 409 %s: %s", code, msg)
	g.commit(bm, 25)
	if l := g.lag(); l.Committed != 25 || l.Lag != total-25 {
		t.Errorf("lag after B committed 25: %+v", l)
	}
	httpExpect(t, http.StatusOK, "POST", g.url("/members:leave"), map[string]any{"member_id": bm.MemberID}, nil)

	// No member is active: reset to the 30th message's timestamp, and to
	// below the log start (refused).
	code, msg = expectResetBelowStart(t, g)
	t.Logf("reset below the log start: %s: %s", code, msg)
	httpExpect(t, http.StatusOK, "POST", g.url("/offsets:reset"), map[string]any{"topic": topic, "partition": 0, "timestamp_ms": ts0 + 29*1000}, nil)
	if l := g.lag(); l.Committed != 29 || l.Lag != total-29 {
		t.Errorf("lag after reset to offset 29's timestamp: %+v, want committed 29, lag %d", l, total-29)
	}
	c := g.join(sessionMs)
	checkMessages(t, g.fetchAll(c, nil, total-29), 29, ts0)
	g.commit(c, total)
	if l := g.lag(); l.Committed != total || l.Lag != 0 || l.LagBytes != 0 {
		t.Errorf("lag after committing everything: %+v, want committed %d, lag 0, lag_bytes 0", l, total)
	}
	httpExpect(t, http.StatusOK, "POST", g.url("/members:leave"), map[string]any{"member_id": c.MemberID}, nil)
}

// expectResetBelowStart asks for an offset below the log start: 410 or 400.
func expectResetBelowStart(t testing.TB, g httpGroup) (code, message string) {
	t.Helper()
	status, raw := httpCall(t, "POST", g.url("/offsets:reset"), map[string]any{"topic": g.topic, "partition": 0, "offset": -5})
	if status != http.StatusGone && status != http.StatusBadRequest {
		t.Fatalf("reset to offset -5: status %d, want 410 or 400: %s", status, raw)
	}
	var e apiErrorBody
	if err := json.Unmarshal(raw, &e); err != nil || e.Error == nil || e.Error.Message == "" {
		t.Fatalf("reset to offset -5: status %d without an error message: %s", status, raw)
	}
	return e.Error.Code, e.Error.Message
}
