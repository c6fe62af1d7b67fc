package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/httpapi"
	"github.com/sluice-mq/sluice/queue"
)

type queueMsg struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	MessageID string            `json:"message_id"`
	Key       *string           `json:"message_key"`
	Headers   map[string]string `json:"headers"`
	Attempt   int               `json:"attempt"`
	Source    string            `json:"source_topic"`
}

type queueResult struct {
	Status  string `json:"status"`
	Error   string `json:"error"`
	ToTopic string `json:"to_topic"`
	DueMs   int64  `json:"due_ms"`
	Attempt int    `json:"attempt"`
}

func postInto(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: status %d: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// TestQueuePoisonRecordRetriesThenDeadLetters is issue 22's first test
// over HTTP against a real broker: on a relaxed topic with tiers of 200 and
// 400 ms (jitter 0.1) and 3 attempts, a record that always fails is
// delivered 3 times, each retry no sooner than its tier's delay less the
// jitter after its nack, then lands in the DLQ with its whole history in
// headers (read back with franz-go); every other record is processed
// once; the group's lag on the topic returns to 0.
func TestQueuePoisonRecordRetriesThenDeadLetters(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen

	// A bad contract is refused with INVALID_CONFIG as a 400 that says why.
	code, body := postJSON(t, base+"/v1/topics", `{"name":"bad","partitions":1,"configs":{"retry.jitter":"2"}}`)
	if errObj, _ := body["error"].(map[string]any); code != 400 || errObj == nil || !strings.Contains(fmt.Sprint(errObj["message"]), "retry.jitter") {
		t.Fatalf("bad jitter: %d %v", code, body)
	}
	code, body = postJSON(t, base+"/v1/topics", `{"name":"jobs","partitions":2,"configs":{"retry.backoff.ms":"200,400","retry.jitter":"0.1","retry.max.attempts":"3"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	var msgs []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("m%d", i)
		if i == 7 {
			id = "poison"
		}
		msgs = append(msgs, fmt.Sprintf(`{"message_key":"k%d","message_id":%q,"headers":{"h":"v"},"payload":"p%d"}`, i, id, i))
	}
	if code, body := postJSON(t, base+"/v1/topics/jobs/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`); code != 200 {
		t.Fatalf("publish: %d %v", code, body)
	}
	code, joined := postJSON(t, base+"/v1/groups/workers/members:join", `{"topics":["jobs"]}`)
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	member, gen := joined["member_id"].(string), int(joined["generation"].(float64))
	ref := fmt.Sprintf(`"member_id":%q,"generation":%d`, member, gen)

	processed := map[string]int{}
	var poisonSeen []time.Time   // when each delivery of the poison record arrived
	var poisonNacked []time.Time // when each nack was sent
	var poisonAttempts []int
	var nackResults []queueResult
	var poisonSource queueMsg
	deadline := time.Now().Add(60 * time.Second)
	for len(nackResults) < 3 || len(processed) < 19 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: processed %d, poison nacks %+v", len(processed), nackResults)
		}
		var fetched struct {
			Messages []queueMsg `json:"messages"`
		}
		if code := postInto(t, base+"/v1/groups/workers/messages:fetch", `{`+ref+`,"wait_ms":500}`, &fetched); code != 200 {
			t.Fatalf("fetch: %d", code)
		}
		for _, m := range fetched.Messages {
			if m.MessageID != "poison" {
				processed[m.MessageID]++
				var ans struct{ Results []queueResult }
				body := fmt.Sprintf(`{%s,"acks":[{"topic":%q,"partition":%d,"offset":%d}]}`, ref, m.Topic, m.Partition, m.Offset)
				if code := postInto(t, base+"/v1/groups/workers/messages:ack", body, &ans); code != 200 || ans.Results[0].Status != "ok" {
					t.Fatalf("ack %+v: %d %+v", m, code, ans)
				}
				continue
			}
			poisonSeen = append(poisonSeen, time.Now())
			poisonAttempts = append(poisonAttempts, m.Attempt)
			if m.Attempt == 1 {
				poisonSource = m
			}
			nackSent := time.Now()
			var ans struct{ Results []queueResult }
			body := fmt.Sprintf(`{%s,"nacks":[{"topic":%q,"partition":%d,"offset":%d,"error_class":"transient","error":"boom %d"}]}`,
				ref, m.Topic, m.Partition, m.Offset, m.Attempt)
			if code := postInto(t, base+"/v1/groups/workers/messages:nack", body, &ans); code != 200 {
				t.Fatalf("nack: %d %+v", code, ans)
			}
			poisonNacked = append(poisonNacked, nackSent)
			nackResults = append(nackResults, ans.Results[0])
		}
	}
	// Delivered three times, attempts 1, 2, 3; from the source, tier 0, tier 1.
	if fmt.Sprint(poisonAttempts) != "[1 2 3]" {
		t.Fatalf("poison attempts %v, want [1 2 3]", poisonAttempts)
	}
	want := []struct{ status, to string }{{"retry", "__retry.workers.jobs.0"}, {"retry", "__retry.workers.jobs.1"}, {"dead_letter", "jobs.dlq"}}
	for i, w := range want {
		if r := nackResults[i]; r.Status != w.status || r.ToTopic != w.to || r.Attempt != i+1 {
			t.Fatalf("nack %d: %+v, want %s to %s", i+1, r, w.status, w.to)
		}
	}
	// Each retry came no sooner than its due time, and that no sooner
	// than its delay less the jitter after its nack was sent (the upper
	// bound is loose: the machine is shared).
	for i, d := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		gap := poisonSeen[i+1].Sub(poisonNacked[i])
		due := time.UnixMilli(nackResults[i].DueMs)
		if gap < d*9/10-time.Millisecond || gap > 20*time.Second || poisonSeen[i+1].Before(due) ||
			due.Sub(poisonNacked[i]) < d*9/10-time.Millisecond {
			t.Errorf("retry %d came %v after the nack; tier delay %v ±10%%; due %d, nacked %d, seen %d", i+1, gap, d, nackResults[i].DueMs, poisonNacked[i].UnixMilli(), poisonSeen[i+1].UnixMilli())
		}
	}
	for id, n := range processed {
		if n != 1 {
			t.Errorf("%s processed %d times", id, n)
		}
	}

	// The DLQ holds the record, message id kept, with its whole history.
	cl := testClient(t, b, kgo.ConsumeTopics("jobs.dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var dead *kgo.Record
	for dead == nil {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read the DLQ: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { dead = r })
	}
	var hs []queue.Header
	var msgID string
	for _, h := range dead.Headers {
		hs = append(hs, queue.Header{Key: h.Key, Value: h.Value})
		if h.Key == httpapi.MessageIDHeader {
			msgID = string(h.Value)
		}
	}
	m, ok, err := queue.Parse(hs)
	if err != nil || !ok {
		t.Fatalf("DLQ headers %v: %v", dead.Headers, err)
	}
	if msgID != "poison" || string(dead.Value) != "p7" || string(dead.Key) != "k7" || dead.Partition != poisonSource.Partition ||
		m.SourceTopic != "jobs" || m.SourcePartition != poisonSource.Partition || m.SourceOffset != poisonSource.Offset ||
		m.Group != "workers" || m.Attempt != 3 || m.DeadReason != "exhausted" || len(m.History) != 3 ||
		m.History[0].Error != "boom 1" || m.History[2].Error != "boom 3" || m.History[1].Class != "transient" ||
		m.FirstSeen.After(m.History[2].At) {
		t.Fatalf("dead letter %s/%s at %d: %+v", dead.Key, dead.Value, dead.Partition, m)
	}

	// kcat reads the DLQ and its headers too.
	if kcat, err := exec.LookPath("kcat"); err == nil {
		kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer kcancel()
		out, err := exec.CommandContext(kctx, kcat, "-C", "-b", b.KafkaAddr(), "-t", "jobs.dlq", "-o", "beginning", "-e", "-f", `%k %s %h\n`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "k7 p7 ") || !strings.Contains(string(out), "sluice.retry.attempt=3") ||
			!strings.Contains(string(out), "message_id=poison") || !strings.Contains(string(out), "sluice.retry.history.3=") {
			t.Errorf("kcat reads the DLQ as %q (%v)", out, err)
		}
	} else {
		t.Log("kcat is not installed: the DLQ was read with franz-go only")
	}

	// The DLQ's depth is a metric.
	mresp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(metrics), `sluice_dlq_depth{tenant="default",topic="jobs.dlq"} 1`) {
		t.Errorf("no DLQ depth of 1 for jobs.dlq in /metrics")
	}

	// The group's offsets reach the log end of the topic: lag 0.
	var lag struct{ Partitions []httpapi.PartitionLag }
	resp, err := http.Get(base + "/v1/groups/workers/lag")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&lag); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range lag.Partitions {
		if l.Topic == "jobs" {
			seen++
			if l.Lag != 0 || l.Committed != l.LogEnd {
				t.Errorf("lag of jobs-%d: %+v", l.Partition, l)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("lag lists %d partitions of jobs: %+v", seen, lag.Partitions)
	}
}

// TestQueueTenantScoped: two tenants run the same queue (topic jobs,
// group workers). Each sees its retry tier and DLQ under plain names
// (__retry.workers.jobs.0, jobs.dlq), each copy lands in its own tenant's
// topics, the records never cross, and the super user sees both qualified.
func TestQueueTenantScoped(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.Listeners = "SASL_PLAINTEXT://" + cfg.KafkaListen
	cfg.KafkaListen, cfg.KafkaAdvertise = "", ""
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = true // isolation here is by names, not ACLs
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-pw\n")
	b := startBroker(t, cfg)
	admin := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}.with(basic("admin", "admin-pw"))
	users := tenantHTTPSetup(t, admin, map[string]string{"ann": "acme", "gus": "globex"})
	for who, c := range users {
		awaitAuthenticated(t, c)
		c.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"jobs","partitions":1,"configs":{"retry.backoff.ms":"100","retry.max.attempts":"2"}}`)
		c.must(http.StatusOK, "POST", "/v1/topics/jobs/messages:publish", `{"messages":[{"message_id":"`+who+`","payload":"from `+who+`"}]}`)
		// The contract is shown with the topic's configs.
		if d := c.must(http.StatusOK, "GET", "/v1/topics/jobs", ""); !strings.Contains(fmt.Sprint(d["configs"]), "retry.max.attempts") {
			t.Fatalf("%s: configs of jobs %v lack the contract", who, d["configs"])
		}
	}
	for who, c := range users {
		m := c.must(http.StatusOK, "POST", "/v1/groups/workers/members:join", `{"topics":["jobs"]}`)
		ref := fmt.Sprintf(`"member_id":%q,"generation":%s`, m["member_id"], jsonNum(m["generation"]))
		wantTo := []string{"__retry.workers.jobs.0", "jobs.dlq"}
		for attempt := 1; attempt <= 2; attempt++ {
			var got map[string]any
			deadline := time.Now().Add(20 * time.Second)
			for got == nil {
				f := c.must(http.StatusOK, "POST", "/v1/groups/workers/messages:fetch", `{`+ref+`,"wait_ms":500}`)
				if ms := f["messages"].([]any); len(ms) > 0 {
					got = ms[0].(map[string]any)
				} else if time.Now().After(deadline) {
					t.Fatalf("%s: attempt %d never delivered", who, attempt)
				}
			}
			if got["message_id"] != who || got["attempt"].(float64) != float64(attempt) || strings.Contains(fmt.Sprint(got), "~") {
				t.Fatalf("%s: delivery %d is %v", who, attempt, got)
			}
			ans := c.must(http.StatusOK, "POST", "/v1/groups/workers/messages:nack", fmt.Sprintf(
				`{%s,"nacks":[{"topic":%q,"partition":0,"offset":%s,"error_class":"transient","error":"no"}]}`, ref, got["topic"], jsonNum(got["offset"])))
			res := ans["results"].([]any)[0].(map[string]any)
			if res["to_topic"] != wantTo[attempt-1] {
				t.Fatalf("%s: nack %d went to %v, want %s", who, attempt, res, wantTo[attempt-1])
			}
		}
		names := topicNames(t, c)
		if !slices.Contains(names, "jobs.dlq") || !slices.Contains(names, "__retry.workers.jobs.0") || strings.Contains(fmt.Sprint(names), "~") {
			t.Fatalf("%s lists %v", who, names)
		}
	}
	all := topicNames(t, admin)
	for _, want := range []string{"acme~jobs.dlq", "globex~jobs.dlq", "acme~__retry.workers.jobs.0", "globex~__retry.workers.jobs.0"} {
		if !slices.Contains(all, want) {
			t.Fatalf("the super user lists %v, without %s", all, want)
		}
	}
	// Each tenant's DLQ holds its own record only.
	for who, c := range users {
		var payloads []string
		m := c.must(http.StatusOK, "POST", "/v1/groups/dlq-reader/members:join", `{"topics":["jobs.dlq"]}`)
		ref := fmt.Sprintf(`"member_id":%q,"generation":%s`, m["member_id"], jsonNum(m["generation"]))
		f := c.must(http.StatusOK, "POST", "/v1/groups/dlq-reader/messages:fetch", `{`+ref+`,"topic":"jobs.dlq","partition":0}`)
		for _, msg := range f["messages"].([]any) {
			mm := msg.(map[string]any)
			payloads = append(payloads, mm["payload"].(string))
			if h := mm["headers"].(map[string]any); h["sluice.retry.source.topic"] != "jobs" || h["sluice.retry.attempt"] != "2" {
				t.Fatalf("%s: dead letter headers %v", who, h)
			}
		}
		if !slices.Equal(payloads, []string{"from " + who}) {
			t.Fatalf("%s's DLQ holds %v", who, payloads)
		}
	}
}

// TestQueueBadInput: malformed or stale queue calls get a 4xx JSON error
// with a message, and change nothing.
func TestQueueBadInput(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	postJSON(t, base+"/v1/topics", `{"name":"q","partitions":1}`)
	postJSON(t, base+"/v1/topics/q/messages:publish", `{"messages":[{"payload":"x"}]}`)
	code, joined := postJSON(t, base+"/v1/groups/g/members:join", `{"topics":["q"]}`)
	if code != 200 {
		t.Fatalf("join: %d %v", code, joined)
	}
	member, gen := joined["member_id"].(string), int(joined["generation"].(float64))
	ok := fmt.Sprintf(`"member_id":%q,"generation":%d`, member, gen)
	stale := fmt.Sprintf(`"member_id":%q,"generation":%d`, member, gen+3)
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"fetch offset without topic", "messages:fetch", `{` + ok + `,"offset":0}`, 400},
		{"fetch negative wait", "messages:fetch", `{` + ok + `,"wait_ms":-1}`, 400},
		{"fetch stale generation", "messages:fetch", `{` + stale + `}`, 409},
		{"ack without generation", "messages:ack", fmt.Sprintf(`{"member_id":%q,"acks":[{"topic":"q","partition":0,"offset":0}]}`, member), 400},
		{"ack nothing", "messages:ack", `{` + ok + `,"acks":[]}`, 400},
		{"ack unknown field", "messages:ack", `{` + ok + `,"acks":[{"topic":"q","partition":0,"offset":0,"x":1}]}`, 400},
		{"ack stale generation", "messages:ack", `{` + stale + `,"acks":[{"topic":"q","partition":0,"offset":0}]}`, 409},
		{"nack bad class", "messages:nack", `{` + ok + `,"nacks":[{"topic":"q","partition":0,"offset":0,"error_class":"Oops!"}]}`, 400},
		{"nack malformed", "messages:nack", `{` + ok + `,"nacks":[`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := postJSON(t, base+"/v1/groups/g/"+tt.path, tt.body)
			errObj, _ := body["error"].(map[string]any)
			if code != tt.status || errObj == nil || errObj["message"] == "" {
				t.Fatalf("status %d body %v, want %d with an error message", code, body, tt.status)
			}
		})
	}
	// A record never delivered cannot be acked: a per-record refusal.
	var ans struct{ Results []queueResult }
	if code := postInto(t, base+"/v1/groups/g/messages:ack", `{`+ok+`,"acks":[{"topic":"q","partition":0,"offset":0}]}`, &ans); code != 200 || ans.Results[0].Status != "not_delivered" {
		t.Fatalf("ack before delivery: %d %+v", code, ans)
	}
}
