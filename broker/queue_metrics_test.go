package broker

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// queueMember joins group over HTTP to topic and returns the member's
// reference ("member_id":…,"generation":…).
func queueMember(t *testing.T, base, group, topic string) string {
	t.Helper()
	code, joined := postJSON(t, base+"/v1/groups/"+group+"/members:join", fmt.Sprintf(`{"topics":[%q]}`, topic))
	if code != http.StatusOK {
		t.Fatalf("join %s: %d %v", group, code, joined)
	}
	return fmt.Sprintf(`"member_id":%q,"generation":%d`, joined["member_id"].(string), int(joined["generation"].(float64)))
}

// queueFetchOne fetches until one record comes and returns it.
func queueFetchOne(t *testing.T, base, group, ref string) queueMsg {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var fetched struct {
			Messages []queueMsg `json:"messages"`
		}
		if code := postInto(t, base+"/v1/groups/"+group+"/messages:fetch", `{`+ref+`,"wait_ms":300}`, &fetched); code != http.StatusOK {
			t.Fatalf("fetch: %d", code)
		}
		if len(fetched.Messages) == 1 {
			return fetched.Messages[0]
		}
		if len(fetched.Messages) > 1 {
			t.Fatalf("fetched %d records, want 1: %+v", len(fetched.Messages), fetched.Messages)
		}
	}
	t.Fatalf("no record for %s within 20s", group)
	return queueMsg{}
}

// TestQueueCopyMetrics: each nack of the HTTP queue that writes a
// retry-tier copy counts in sluice_queue_retries_total, and each that
// writes a dead letter (the last attempt's nack, or keys:skip of a
// strict topic's pause) in sluice_queue_dead_letters_total, under the
// source topic; a nack that pauses a strict key writes no copy and counts
// in neither.
func TestQueueCopyMetrics(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	counts := func(topic string) (float64, float64) {
		return metricValue(t, b, "sluice_queue_retries_total", "topic", topic),
			metricValue(t, b, "sluice_queue_dead_letters_total", "topic", topic)
	}
	expect := func(when, topic string, retries, dead float64) {
		t.Helper()
		if r, d := counts(topic); r != retries || d != dead {
			t.Errorf("%s: %s retries %v, dead letters %v; want %v and %v", when, topic, r, d, retries, dead)
		}
	}
	nack := func(group, ref string, m queueMsg, status string) {
		t.Helper()
		var ans struct{ Results []queueResult }
		body := fmt.Sprintf(`{%s,"nacks":[{"topic":%q,"partition":%d,"offset":%d,"error_class":"transient","error":"boom"}]}`,
			ref, m.Topic, m.Partition, m.Offset)
		if code := postInto(t, base+"/v1/groups/"+group+"/messages:nack", body, &ans); code != http.StatusOK || ans.Results[0].Status != status {
			t.Fatalf("nack %+v: %d %+v, want %s", m, code, ans, status)
		}
	}

	// Relaxed: attempt 1 goes to tier 0, attempt 2 (the last) to the DLQ.
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"metered","partitions":1,"configs":{"retry.backoff.ms":"100","retry.max.attempts":"2"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	if code, body := postJSON(t, base+"/v1/topics/metered/messages:publish", `{"messages":[{"message_key":"k","payload":"p"}]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	ref := queueMember(t, base, "meters", "metered")
	expect("before any nack", "metered", 0, 0)
	nack("meters", ref, queueFetchOne(t, base, "meters", ref), "retry")
	expect("after the first nack", "metered", 1, 0)
	second := queueFetchOne(t, base, "meters", ref)
	if second.Attempt != 2 {
		t.Fatalf("the retry: %+v", second)
	}
	nack("meters", ref, second, "dead_letter")
	expect("after the last nack", "metered", 1, 1)

	// Strict: a nack pauses (no copy); keys:skip writes the dead letter.
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"strictly","partitions":1,"configs":{"delivery.order":"per-key-strict"}}`); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, body)
	}
	if code, body := postJSON(t, base+"/v1/topics/strictly/messages:publish", `{"messages":[{"message_key":"A","payload":"p"}]}`); code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	ref = queueMember(t, base, "stricts", "strictly")
	nack("stricts", ref, queueFetchOne(t, base, "stricts", ref), "paused")
	expect("after a pausing nack", "strictly", 0, 0)
	code, body := postJSON(t, base+"/v1/groups/stricts/keys:skip", `{"topic":"strictly","partition":0,"message_key":"A"}`)
	if code != http.StatusOK || body["status"] != "skipped" {
		t.Fatalf("keys:skip: %d %v", code, body)
	}
	expect("after keys:skip", "strictly", 0, 1)
	expect("in the end", "metered", 1, 1)
}
