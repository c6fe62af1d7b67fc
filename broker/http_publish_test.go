package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"

	"github.com/twmb/franz-go/pkg/kgo"
)

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: status %d, body %q is not JSON: %v", url, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out
}

func TestHTTPPublish(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"web","partitions":6}`); code != http.StatusCreated {
		t.Fatalf("create topic: %d %v", code, body)
	}
	var msgs []string
	for i := 0; i < 20; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"message_key":"key-%d","message_id":"id-%d","headers":{"h":"v%d"},"payload":"hello %d"}`, i, i, i, i))
	}
	code, body := postJSON(t, base+"/v1/topics/web/messages:publish", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	if code != http.StatusOK {
		t.Fatalf("publish: %d %v", code, body)
	}
	results := body["results"].([]any)
	if len(results) != 20 {
		t.Fatalf("%d results for 20 messages", len(results))
	}

	// Kafka clients must agree on the partition of each key.
	part := kgo.StickyKeyPartitioner(nil).ForTopic("web")
	type loc struct{ p, off int64 }
	want := map[string]loc{}
	for i, r := range results {
		res := r.(map[string]any)
		if res["status"] != "ok" {
			t.Fatalf("message %d: %v", i, res)
		}
		p := int64(res["partition"].(float64))
		if exp := part.Partition(&kgo.Record{Key: fmt.Appendf(nil, "key-%d", i)}, 6); int64(exp) != p {
			t.Fatalf("key-%d went to partition %d, murmur2 says %d", i, p, exp)
		}
		want[fmt.Sprintf("id-%d", i)] = loc{p, int64(res["offset"].(float64))}
	}

	cl := testClient(t, b, kgo.ConsumeTopics("web"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := 0
	for got < 20 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of 20: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var id, h string
			for _, hd := range r.Headers {
				switch hd.Key {
				case httpapi.MessageIDHeader:
					id = string(hd.Value)
				case "h":
					h = string(hd.Value)
				}
			}
			w, ok := want[id]
			if !ok || w.p != int64(r.Partition) || w.off != r.Offset {
				t.Errorf("record %s at %d/%d, want %+v", id, r.Partition, r.Offset, w)
			}
			n := strings.TrimPrefix(id, "id-")
			if string(r.Value) != "hello "+n || h != "v"+n || string(r.Key) != "key-"+n {
				t.Errorf("record %s: key %q value %q header %q", id, r.Key, r.Value, h)
			}
			got++
		})
	}
}

func TestHTTPPublishIdempotent(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	base := "http://" + b.Cfg.HTTPListen
	postJSON(t, base+"/v1/topics", `{"name":"idem","partitions":1}`)
	_, prod := postJSON(t, base+"/v1/producers", `{}`)
	pid := int64(prod["producer_id"].(float64))
	publish := func(seq int) (int, map[string]any) {
		return postJSON(t, base+"/v1/topics/idem/messages:publish",
			fmt.Sprintf(`{"producer_id":%d,"producer_epoch":0,"messages":[{"payload":"m%d","sequence":%d}]}`, pid, seq, seq))
	}
	status := func(body map[string]any) (string, float64) {
		r := body["results"].([]any)[0].(map[string]any)
		return r["status"].(string), r["offset"].(float64)
	}
	publish(0)
	_, first := publish(1)
	if s, off := status(first); s != "ok" || off != 1 {
		t.Fatalf("second message: %s at %v", s, off)
	}
	_, retry := publish(1)
	if s, off := status(retry); s != "duplicate" || off != 1 {
		t.Fatalf("retry: %s at %v, want duplicate at 1", s, off)
	}
	code, gap := publish(5)
	if s, _ := status(gap); code != http.StatusMultiStatus || s != "OUT_OF_ORDER_SEQUENCE_NUMBER" {
		t.Fatalf("gap: %d %v", code, gap)
	}
}

func TestHTTPPublishBadInput(t *testing.T) {
	cfg := testBrokerConfig(t)
	b := startBroker(t, cfg)
	base := "http://" + b.Cfg.HTTPListen
	postJSON(t, base+"/v1/topics", `{"name":"small","partitions":1,"configs":{"max.message.bytes":"2048"}}`)
	big := strings.Repeat("x", 4096)
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"malformed json", "/v1/topics/small/messages:publish", `{"messages":[`, 400},
		{"unknown field", "/v1/topics/small/messages:publish", `{"mesages":[]}`, 400},
		{"empty", "/v1/topics/small/messages:publish", `{"messages":[]}`, 400},
		{"bad base64", "/v1/topics/small/messages:publish", `{"messages":[{"payload_base64":"***"}]}`, 400},
		{"both payloads", "/v1/topics/small/messages:publish", `{"messages":[{"payload":"a","payload_base64":"YQ=="}]}`, 400},
		{"unknown topic", "/v1/topics/nope/messages:publish", `{"messages":[{"payload":"a"}]}`, 404},
		{"bad partition", "/v1/topics/small/messages:publish", `{"messages":[{"payload":"a","partition":3}]}`, 404},
		{"oversize", "/v1/topics/small/messages:publish", `{"messages":[{"payload":"` + big + `"}]}`, 413},
		{"sequence missing", "/v1/topics/small/messages:publish", `{"producer_id":1,"producer_epoch":0,"messages":[{"payload":"a"}]}`, 400},
		{"invalid topic name", "/v1/topics", `{"name":"bad/name"}`, 400},
		{"duplicate topic", "/v1/topics", `{"name":"small"}`, 409},
		{"bad config", "/v1/topics", `{"name":"x","configs":{"retention.ms":"soon"}}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(base+tt.path, "application/json", bytes.NewBufferString(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || out.Error.Message == "" {
				t.Fatalf("status %d error %+v, want %d with a message", resp.StatusCode, out.Error, tt.status)
			}
		})
	}
}
