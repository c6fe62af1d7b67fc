package e2e

// HTTP on a cluster: any broker takes any publish, and what it
// acknowledges reads back with kcat in order, once, on each key's murmur2
// partition, also while a partition's leader is killed.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type httpResult struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Status    string `json:"status"`
	Error     string `json:"error"`
}

// publishHTTP publishes keyed messages through one broker's HTTP API and
// returns the per-message results (nil and the error when the request
// itself failed).
func publishHTTP(addr, topic string, keys, values []string) ([]httpResult, error) {
	type msg struct {
		Key     string `json:"message_key"`
		Payload string `json:"payload"`
	}
	var req struct {
		Messages []msg `json:"messages"`
	}
	for i := range keys {
		req.Messages = append(req.Messages, msg{keys[i], values[i]})
	}
	body, _ := json.Marshal(req)
	cl := &http.Client{Timeout: 60 * time.Second}
	resp, err := cl.Post("http://"+addr+"/v1/topics/"+topic+"/messages:publish", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Results []httpResult `json:"results"`
		Error   any          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	if out.Results == nil {
		return nil, fmt.Errorf("status %d: %v", resp.StatusCode, out.Error)
	}
	return out.Results, nil
}

// kcatRecord is one record as kcat printed it.
type kcatRecord struct {
	partition int32
	offset    int64
	key, val  string
}

// readWithKcat reads the whole topic with kcat through the given brokers.
func readWithKcat(t *testing.T, kcat string, brokers []string, topic string) []kcatRecord {
	t.Helper()
	out := runTool(t, 2*time.Minute, "", kcat, "-C", "-b", strings.Join(brokers, ","), "-t", topic,
		"-o", "beginning", "-e", "-q", "-f", `%p %o %k %s\n`)
	var recs []kcatRecord
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 {
			t.Fatalf("kcat line %q", line)
		}
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		recs = append(recs, kcatRecord{int32(p), o, f[2], f[3]})
	}
	return recs
}

// retriable is whether an HTTP publish status tells the client to retry.
func retriable(status string) bool {
	switch status {
	case "NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "LEADER_NOT_AVAILABLE",
		"peer_unreachable", "KAFKA_STORAGE_ERROR", "NOT_ENOUGH_REPLICAS_AFTER_APPEND":
		return true
	}
	return false
}

func TestHTTPClusterPublishThroughEveryBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	kcat := requireTool(t, "kcat")
	c := startCluster(t)
	const topic, parts = "http-any", 6
	c.createTopic(topic, parts)
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	sent := map[int32][]string{} // values by partition, in acknowledged order
	for _, b := range c.nodes {
		for batch := range 10 {
			var keys, values []string
			for i := range 100 {
				n := batch*100 + i
				keys = append(keys, fmt.Sprintf("customer-%d", n%97))
				values = append(values, fmt.Sprintf("n%d-%d", b.opts.nodeID, n))
			}
			res, err := publishHTTP(b.httpAddr, topic, keys, values)
			if err != nil {
				t.Fatalf("publish through broker %d: %v", b.opts.nodeID, err)
			}
			for i, r := range res {
				want := int32(part.Partition(&kgo.Record{Key: []byte(keys[i])}, parts))
				if r.Status != "ok" || r.Partition != want {
					t.Fatalf("broker %d message %s: %+v, want ok on partition %d", b.opts.nodeID, values[i], r, want)
				}
				sent[want] = append(sent[want], keys[i]+"="+values[i])
			}
		}
	}
	got := map[int32][]string{}
	for _, r := range readWithKcat(t, kcat, c.seeds(), topic) {
		got[r.partition] = append(got[r.partition], r.key+"="+r.val)
	}
	for p := range int32(parts) {
		if strings.Join(got[p], " ") != strings.Join(sent[p], " ") {
			t.Fatalf("partition %d: kcat reads %d records, want the %d acknowledged in order", p, len(got[p]), len(sent[p]))
		}
	}
}

func TestHTTPClusterPublishWhileLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	kcat := requireTool(t, "kcat")
	c := startCluster(t)
	const topic, parts = "http-kill", 3
	c.createTopic(topic, parts)
	_, victim, err := c.partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	via := c.node(c.ids(victim)[0])
	acked := map[string]bool{}
	statuses := map[string]int{}
	for batch := range 40 {
		if batch == 10 {
			c.kill(victim)
		}
		var keys, values []string
		for i := range 25 {
			keys = append(keys, fmt.Sprintf("k%d", i))
			values = append(values, fmt.Sprintf("v%d-%d", batch, i))
		}
		res, err := publishHTTP(via.httpAddr, topic, keys, values)
		if err != nil {
			t.Fatalf("publish batch %d through broker %d: %v", batch, via.opts.nodeID, err)
		}
		for i, r := range res {
			statuses[r.Status]++
			switch {
			case r.Status == "ok":
				acked[values[i]] = true
			case !retriable(r.Status):
				t.Fatalf("batch %d message %d: %+v is neither ok nor retriable", batch, i, r)
			}
		}
	}
	t.Logf("statuses while broker %d was killed: %v", victim, statuses)
	var alive []string
	for _, id := range c.ids(victim) {
		alive = append(alive, c.node(id).kafkaAddr)
	}
	seen := map[string]int{}
	for _, r := range readWithKcat(t, kcat, alive, topic) {
		seen[r.val]++
		if seen[r.val] > 1 {
			t.Fatalf("%s is in the log twice (partition %d offset %d)", r.val, r.partition, r.offset)
		}
	}
	for v := range acked {
		if seen[v] == 0 {
			t.Fatalf("acknowledged %s is not in the log", v)
		}
	}
	if len(acked) < 40*25/2 {
		t.Fatalf("only %d of %d messages acknowledged: %v", len(acked), 40*25, statuses)
	}
}
