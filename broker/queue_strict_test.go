package broker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// strictConsumer is an HTTP queue consumer that processes each key's
// records in order: a record of the poison offset fails (nack) until it is
// repaired; after a nack it drops the key's later records of that fetch.
type strictConsumer struct {
	t         *testing.T
	base      string // the broker it talks to
	group     string
	member    string
	gen       int
	poison    int64
	repaired  bool
	processed map[string][]int64 // key → offsets acked, in order
}

func (s *strictConsumer) join() {
	s.t.Helper()
	eventuallyTrue(s.t, "a member joins", func() (bool, string) {
		code, m := postJSON(s.t, s.base+"/v1/groups/"+s.group+"/members:join",
			`{"topics":["orders"],"session_timeout_ms":6000,"rebalance_timeout_ms":6000}`)
		if code != http.StatusOK {
			return false, fmt.Sprintf("join: %d %v", code, m)
		}
		s.member, s.gen = m["member_id"].(string), int(m["generation"].(float64))
		return true, ""
	})
}

func (s *strictConsumer) ref() string {
	return fmt.Sprintf(`"member_id":%q,"generation":%d`, s.member, s.gen)
}

// round fetches once and processes what came; it returns the records
// delivered, or -1 when the member must join again.
func (s *strictConsumer) round() int {
	s.t.Helper()
	var fetched struct {
		Messages []queueMsg `json:"messages"`
	}
	resp, err := http.Post(s.base+"/v1/groups/"+s.group+"/messages:fetch", "application/json", strings.NewReader(`{`+s.ref()+`,"wait_ms":200}`))
	if err != nil {
		s.t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Logf("fetch: %d %s", resp.StatusCode, raw)
		return -1
	}
	if err := json.Unmarshal(raw, &fetched); err != nil {
		s.t.Fatal(err)
	}
	blocked := map[string]bool{}
	for _, m := range fetched.Messages {
		key := "<none>"
		if m.Key != nil {
			key = *m.Key
		}
		if !strings.Contains("KABCD", key) || len(key) != 1 {
			s.t.Logf("a record not published by the test: %+v", m)
		}
		if blocked[key] {
			continue
		}
		if m.Offset == s.poison && !s.repaired {
			var ans struct{ Results []queueResult }
			body := fmt.Sprintf(`{%s,"nacks":[{"topic":"orders","partition":0,"offset":%d,"error_class":"bad-input","error":"cannot parse"}]}`, s.ref(), m.Offset)
			if code := postInto(s.t, s.base+"/v1/groups/"+s.group+"/messages:nack", body, &ans); code != 200 || ans.Results[0].Status != "paused" {
				s.t.Fatalf("nack of the poison record: %d %+v", code, ans)
			}
			blocked[key] = true
			continue
		}
		var ans struct{ Results []queueResult }
		body := fmt.Sprintf(`{%s,"acks":[{"topic":"orders","partition":0,"offset":%d}]}`, s.ref(), m.Offset)
		if code := postInto(s.t, s.base+"/v1/groups/"+s.group+"/messages:ack", body, &ans); code != 200 {
			return -1
		} else if ans.Results[0].Status != "ok" {
			s.t.Fatalf("ack %d: %+v", m.Offset, ans.Results[0])
		}
		s.processed[key] = append(s.processed[key], m.Offset)
	}
	return len(fetched.Messages)
}

// until runs rounds until cond holds, joining again when needed.
func (s *strictConsumer) until(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: timed out; processed %v", what, s.processed)
		}
		if s.round() < 0 {
			s.join()
		}
	}
}

func publishKeys(t *testing.T, base string, from int, keys ...string) {
	t.Helper()
	var msgs []string
	for i, k := range keys {
		msgs = append(msgs, fmt.Sprintf(`{"message_key":%q,"payload":"p%d"}`, k, from+i))
	}
	eventuallyTrue(t, "publish", func() (bool, string) {
		code, body := postJSON(t, base+"/v1/topics/orders/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
		return code == http.StatusOK, fmt.Sprintf("%d %v", code, body)
	})
}

// TestQueueStrictKeyPauseSurvivesCrashAndFailover is issue 22's strict
// test over HTTP against a real three-broker cluster: on a per-key-strict
// topic a poison record of key K pauses K for the group: every other key's
// records are processed while K's later records are not delivered; a
// consumer crash (its member expires, another joins) and the kill of the
// broker that leads the partition and coordinates the group change
// nothing; keys:resume then delivers K's records from the poison one, in
// their order. The lag output and the metrics show the pause meanwhile.
func TestQueueStrictKeyPauseSurvivesCrashAndFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createTopicWith(t, testClient(t, c.brokers[0]), "orders", 1, 3, map[string]string{"delivery.order": "per-key-strict"})
	leader := hostOf(t, c, "orders", 0)
	var groupID string
	for i := 0; groupID == ""; i++ {
		if id := fmt.Sprintf("strict-%d", i); leader.GroupCoordinator(id).NodeID == leader.Cfg.NodeID {
			groupID = id
		}
	}
	var via *Broker
	for _, b := range c.brokers {
		if b != leader {
			via = b
		}
	}
	base := httpBase(via)
	var keys []string
	for i := range 30 {
		keys = append(keys, []string{"K", "A", "B", "C", "D"}[i%5])
	}
	publishKeys(t, base, 0, keys...)
	cons := &strictConsumer{t: t, base: base, group: groupID, poison: 0, processed: map[string][]int64{}}
	cons.join()
	othersDone := func() bool {
		n := 0
		for k, offs := range cons.processed {
			if k != "K" && len(k) == 1 {
				n += len(uniq(offs))
			}
		}
		return n == len(keys)-len(kOffsets(keys))
	}
	cons.until("the other keys flow", othersDone)
	if got := cons.processed["K"]; len(got) != 0 {
		t.Fatalf("K's records %v processed while K is paused", got)
	}
	// A few more rounds: still nothing of K.
	for range 3 {
		cons.round()
	}
	if got := cons.processed["K"]; len(got) != 0 {
		t.Fatalf("K's records %v processed while K is paused", got)
	}
	checkPaused(t, base, groupID, 0)
	eventuallyTrue(t, "the pause in the coordinator's metrics", func() (bool, string) {
		m := scrape(t, httpBase(leader))
		want := fmt.Sprintf(`sluice_queue_paused_keys{group=%q,topic="orders"} 1`, groupID)
		return strings.Contains(m, want) && strings.Contains(m, "sluice_queue_paused_oldest_age_seconds{"), want
	})

	// A consumer crash: the member stops (no leave); records of K and of
	// the others arrive; a new member takes over once the old one expired.
	more := []string{"K", "A", "K", "B", "K"}
	publishKeys(t, base, len(keys), more...)
	keys = append(keys, more...)
	cons = &strictConsumer{t: t, base: base, group: groupID, poison: 0, processed: cons.processed}
	cons.join()
	cons.until("the other keys flow after the crash", othersDone)
	if got := cons.processed["K"]; len(got) != 0 {
		t.Fatalf("after the crash: K's records %v processed while K is paused", got)
	}
	checkPaused(t, base, groupID, 0)

	// The partition's leader, also the group's coordinator, is killed.
	c.stops[leader.Cfg.NodeID-1]()
	more = []string{"A", "K", "C"}
	publishKeys(t, base, len(keys), more...)
	keys = append(keys, more...)
	cons.until("the other keys flow after the failover", othersDone)
	for range 3 {
		cons.round()
	}
	if got := cons.processed["K"]; len(got) != 0 {
		t.Fatalf("after the failover: K's records %v processed while K is paused", got)
	}
	checkPaused(t, base, groupID, 0)

	// The repair: K resumes from its failed record, in order.
	cons.repaired = true
	code, ans := postJSON(t, base+"/v1/groups/"+groupID+"/keys:resume", `{"topic":"orders","partition":0,"message_key":"K"}`)
	if code != http.StatusOK || ans["status"] != "resumed" || ans["first_held_offset"].(float64) != 0 {
		t.Fatalf("resume: %d %v", code, ans)
	}
	want := kOffsets(keys)
	cons.until("K's records after the resume", func() bool { return len(uniq(cons.processed["K"])) == len(want) })
	if got := uniq(cons.processed["K"]); !slices.Equal(got, want) {
		t.Fatalf("K's records processed in the order %v, want %v", got, want)
	}
	if got := cons.processed["K"]; !slices.IsSorted(got) {
		t.Fatalf("K's records processed out of order: %v", got)
	}
	code, lag := getMap(t, base+"/v1/groups/"+groupID+"/lag")
	if p := lag["partitions"].([]any)[0].(map[string]any); code != 200 || p["paused"] != nil {
		t.Fatalf("lag after the resume: %d %v", code, lag)
	}
	code, ans = postJSON(t, base+"/v1/groups/"+groupID+"/keys:resume", `{"topic":"orders","partition":0,"message_key":"K"}`)
	if code != http.StatusNotFound {
		t.Fatalf("a second resume: %d %v, want 404", code, ans)
	}
}

func kOffsets(keys []string) []int64 {
	var out []int64
	for i, k := range keys {
		if k == "K" {
			out = append(out, int64(i))
		}
	}
	return out
}

// uniq drops repeated offsets (a redelivery after a crash), keeping the
// first of each.
func uniq(offs []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, o := range offs {
		if !seen[o] {
			out = append(out, o)
		}
		seen[o] = true
	}
	return out
}

// checkPaused asserts that the lag output shows K paused at first.
func checkPaused(t *testing.T, base, groupID string, first int64) {
	t.Helper()
	eventuallyTrue(t, "the lag output shows K paused", func() (bool, string) {
		code, lag := getMap(t, base+"/v1/groups/"+groupID+"/lag")
		parts, _ := lag["partitions"].([]any)
		if code != 200 || len(parts) != 1 {
			return false, fmt.Sprintf("%d %v", code, lag)
		}
		p := parts[0].(map[string]any)
		paused, _ := p["paused"].([]any)
		if len(paused) != 1 || p["committed"].(float64) != float64(first) {
			return false, fmt.Sprint(p)
		}
		k := paused[0].(map[string]any)
		return k["message_key"] == "K" && k["first_held_offset"].(float64) == float64(first) && k["error_class"] == "bad-input", fmt.Sprint(k)
	})
}
