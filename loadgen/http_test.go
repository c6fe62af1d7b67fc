package loadgen_test

// The HTTP System: against a stand-in HTTP API that refuses some messages
// (each message is acknowledged from its own result), and short runs
// against the real sluiced of smoke_test.go (one message per request,
// batches read back over Kafka, an existing topic, a refused request).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/loadgen"
)

// fakeHTTPAPI answers like the HTTP API: topic creation, a description
// with a leader per partition, and publishes whose every third message is
// refused and every third other a duplicate.
type fakeHTTPAPI struct {
	mu          sync.Mutex
	n           int   // messages seen; guarded by mu
	ok, refused int64 // guarded by mu
	sizes       []int // messages per request; guarded by mu
	bad         []string
}

func (f *fakeHTTPAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("GET /v1/topics/{topic}", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"partitions":[{"partition":0,"leader":1},{"partition":1,"leader":2},{"partition":2,"leader":3}]}`))
	})
	mux.HandleFunc("POST /v1/topics/{topic}/messages:publish", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				MessageKey    *string           `json:"message_key"`
				PayloadBase64 string            `json:"payload_base64"`
				Headers       map[string]string `json:"headers"`
				TimestampMs   int64             `json:"timestamp_ms"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type result struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Status    string `json:"status"`
			Error     string `json:"error,omitempty"`
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sizes = append(f.sizes, len(req.Messages))
		var out []result
		for _, m := range req.Messages {
			v, err := base64.StdEncoding.DecodeString(m.PayloadBase64)
			ts, tsErr := strconv.ParseInt(m.Headers[loadgen.HeaderTimestamp], 10, 64)
			if err != nil || len(v) != 100 || m.MessageKey == nil || !strings.HasPrefix(*m.MessageKey, "key-") ||
				tsErr != nil || ts/1e6 != m.TimestampMs {
				f.bad = append(f.bad, fmt.Sprintf("%+v", m))
			}
			f.n++
			switch f.n % 3 {
			case 0:
				f.refused++
				out = append(out, result{Offset: -1, Status: "NOT_LEADER_FOR_PARTITION", Error: "leader moved"})
			case 1:
				f.ok++
				out = append(out, result{Offset: int64(f.n), Status: "duplicate"})
			default:
				f.ok++
				out = append(out, result{Offset: int64(f.n), Status: "ok"})
			}
		}
		w.WriteHeader(http.StatusMultiStatus)
		_ = json.NewEncoder(w).Encode(map[string]any{"results": out})
	})
	return mux
}

func httpConfig(url string) loadgen.Config {
	cfg := smokeConfig(loadgen.ScenarioSteady)
	cfg.System, cfg.HTTPURL, cfg.Brokers = loadgen.SystemHTTP, url, nil
	cfg.Consumers, cfg.Producers, cfg.Duration = 0, 1, time.Second
	return cfg
}

// Each message is acknowledged or failed from its own result: "ok" and
// "duplicate" are acknowledgments, any other status an error counted by
// its code; batches carry HTTPBatch messages, the last one flushed.
func TestHTTPSystemPerMessageResults(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch-%d", batch), func(t *testing.T) {
			f := &fakeHTTPAPI{}
			srv := httptest.NewServer(f.handler())
			defer srv.Close()
			cfg := httpConfig(srv.URL)
			cfg.Partitions, cfg.Sizes, cfg.HTTPBatch, cfg.Rate, cfg.Duration = 3, "fixed:100", batch, 1000, 500*time.Millisecond
			res := execute(t, cfg)
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.bad) > 0 {
				t.Fatalf("%d malformed messages, the first: %s", len(f.bad), f.bad[0])
			}
			if res.Produced.Records != f.ok || res.Produced.Failed != f.refused || f.ok == 0 || f.refused == 0 {
				t.Errorf("acknowledged %d and failed %d; the API answered %d ok or duplicate and %d refused",
					res.Produced.Records, res.Produced.Failed, f.ok, f.refused)
			}
			if got := res.Errors["produce: NOT_LEADER_FOR_PARTITION"]; got != f.refused {
				t.Errorf("errors %v, want %d NOT_LEADER_FOR_PARTITION", res.Errors, f.refused)
			}
			for i, n := range f.sizes {
				if n != batch && i != len(f.sizes)-1 || n > batch {
					t.Fatalf("request %d of %d carried %d messages, want %d", i, len(f.sizes), n, batch)
				}
			}
		})
	}
}

func TestSmokeHTTP(t *testing.T) {
	addr := broker(t)
	base := brokerHTTP

	t.Run("one-message-per-request", func(t *testing.T) {
		cfg := httpConfig(base)
		res := execute(t, cfg)
		if res.Produced.Records == 0 || res.Produced.Failed != 0 || len(res.Errors) != 0 {
			t.Errorf("produced %+v, errors %v", res.Produced, res.Errors)
		}
		if a := res.AckLatency; a.Count != res.Produced.Records || a.P50Ms <= 0 || a.P99Ms < a.P50Ms {
			t.Errorf("ack latency %+v for %d records", a, res.Produced.Records)
		}
	})

	t.Run("batches-read-over-kafka", func(t *testing.T) {
		cfg := httpConfig(base)
		cfg.Brokers, cfg.Consumers, cfg.ConsumerMode = []string{addr}, 2, loadgen.ConsumerAssign
		cfg.HTTPBatch, cfg.Linger = 8, 2*time.Millisecond
		res := execute(t, cfg)
		checkSane(t, res, true) // end-to-end latency needs the text lg-ts header read back
	})

	t.Run("existing-topic", func(t *testing.T) {
		cfg := httpConfig(base)
		cfg.Topic, cfg.Duration = fmt.Sprintf("loadgen-http-again-%d", time.Now().UnixNano()), 300*time.Millisecond
		for i := 0; i < 2; i++ {
			if res := execute(t, cfg); res.Produced.Records == 0 || res.Produced.Failed != 0 {
				t.Fatalf("run %d: produced %+v, errors %v", i, res.Produced, res.Errors)
			}
		}
		cfg.Partitions = 5
		r, err := loadgen.New(cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		if _, err := r.Execute(ctx); err == nil || !strings.Contains(err.Error(), "exists with 3 partitions") {
			t.Fatalf("a run on the topic with another partition count: %v", err)
		}
	})

	t.Run("refused-request", func(t *testing.T) {
		topic := fmt.Sprintf("loadgen-http-small-%d", time.Now().UnixNano())
		body := fmt.Sprintf(`{"name":%q,"partitions":3,"configs":{"max.message.bytes":"2048"}}`, topic)
		resp, err := http.Post(base+"/v1/topics", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: HTTP %d", topic, resp.StatusCode)
		}
		cfg := httpConfig(base)
		cfg.Topic, cfg.Sizes, cfg.Rate, cfg.Duration = topic, "fixed:4KiB", 200, 300*time.Millisecond
		res := execute(t, cfg)
		if res.Produced.Records != 0 || res.Produced.Failed == 0 {
			t.Errorf("produced %+v: every request should be refused as too large", res.Produced)
		}
		if got := res.Errors["produce: HTTP 413 MESSAGE_TOO_LARGE"]; got != res.Produced.Failed {
			t.Errorf("errors %v, want %d of HTTP 413 MESSAGE_TOO_LARGE", res.Errors, res.Produced.Failed)
		}
	})
}
