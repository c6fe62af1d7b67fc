package broker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/quota"
)

// startQuotaBroker runs a broker with SetQuotas(src) until the test ends.
func startQuotaBroker(t *testing.T, src quota.Source) *Broker {
	t.Helper()
	return startQuotaBrokerWith(t, testBrokerConfig(t), src)
}

// startQuotaBrokerWith is startQuotaBroker of the configuration cfg.
func startQuotaBrokerWith(t *testing.T, cfg Config, src quota.Source) *Broker {
	t.Helper()
	b, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b.SetQuotas(src)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			awaitStop(t, errc, "broker")
		})
	})
	select {
	case <-b.Ready():
	case err := <-errc:
		t.Fatalf("broker stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("broker not ready after 60s")
	}
	return b
}

// TestHTTPPublishThrottled: a tenant over its producer_byte_rate on the
// HTTP API is answered 429 with Retry-After and the JSON code "throttled";
// every publish answered 200 was stored; the throttle is counted per tenant;
// the broker publishes its demand for the split under its registration.
func TestHTTPPublishThrottled(t *testing.T) {
	const rate = 32 << 10
	b := startQuotaBroker(t, quota.Static{auth.DefaultTenant: {quota.ProducerByteRate: rate}})
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"web","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create topic: %d %v", code, body)
	}
	msg := `{"payload":"` + strings.Repeat("x", 8<<10) + `"}`
	body := `{"messages":[` + strings.Repeat(msg+",", 3) + msg + `]}` // 32 KiB: one second of the quota

	var ok, throttled int
	for i := 0; i < 4 && throttled == 0; i++ {
		resp, err := http.Post(base+"/v1/topics/web/messages:publish", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			throttled++
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != "throttled" || e.Error.Message == "" {
				t.Fatalf("429 body %s, want the JSON error code throttled with a message", raw)
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 2 {
				t.Fatalf("Retry-After %q, want 1 or 2 seconds", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("publish %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	if ok < 1 || throttled != 1 {
		t.Fatalf("%d publishes answered 200 before a 429 (%d), want at least one and then a 429", ok, throttled)
	}
	ends, err := kadm.NewClient(testClient(t, b)).ListEndOffsets(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if end, _ := ends.Lookup("web", 0); end.Err != nil || end.Offset != int64(ok*4) {
		t.Fatalf("end offset %d (%v) after %d accepted publishes of 4", end.Offset, end.Err, ok)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sluice_tenant_throttle_seconds_total{reason="producer_byte_rate",tenant="default"}`,
		`sluice_tenant_bytes_in_total{tenant="default"}`,
		`sluice_tenant_records_in_total{tenant="default"} ` + strconv.Itoa(ok*4),
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	brokertest.Eventually(t, 10*time.Second, "this broker's demand published", func() bool {
		all, err := b.Store.QuotaUsages(context.Background())
		return err == nil && all[b.Cfg.NodeID] != nil
	})
}
