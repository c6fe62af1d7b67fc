package broker

// A broker whose object store cannot be used is not ready: /readyz answers
// 503 with the store's own answer in a JSON error (code not_ready), the
// failure is logged at ERROR once and the recovery at INFO once, however
// many probes fail in between.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// logLines collects a broker's JSON log lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns how many lines have level and a message containing msg.
func (l *logLines) count(t *testing.T, level, msg string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var e struct{ Level, Message string }
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.Level == level && strings.Contains(e.Message, msg) {
			n++
		}
	}
	return n
}

// startBrokerLogLines runs a broker whose debug log goes to the returned
// lines.
func startBrokerLogLines(t *testing.T, cfg Config) (*Broker, *logLines) {
	t.Helper()
	logs := &logLines{}
	return startLoggedBroker(t, cfg, logs), logs
}

// readyz returns /readyz's status and what it says: "ready" on 200, and
// otherwise the message of its JSON error, which must have code not_ready.
func readyz(t *testing.T, b *Broker) (int, string) {
	t.Helper()
	code, body := httpGet(t, "http://"+b.httpLn.Addr().String()+"/readyz")
	if code == http.StatusOK {
		return code, strings.TrimSpace(string(body))
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "not_ready" || e.Error.Message == "" {
		t.Fatalf("/readyz answers %d %q, want a JSON error with code not_ready and a message: %v", code, body, err)
	}
	return code, e.Error.Message
}

// stillFailing is the DEBUG message of each probe that fails after the first.
const stillFailing = "object store still not usable"

func TestReadyzRefusesAnUnusableObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := s3test.Start(t)
	cases := []struct {
		name      string
		store     string
		secret    string
		storeSays string
	}{
		{"wrong secret", srv.URL("probe"), "not-" + srv.SecretKey, "SignatureDoesNotMatch"},
		{"no such bucket", strings.Replace(srv.URL("probe"), "s3://"+srv.Bucket, "s3://no-such-bucket", 1), srv.SecretKey, "NoSuchBucket"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testBrokerConfig(t)
			cfg.ObjectStore = tc.store
			cfg.ObjectStoreOptions = srv.Options()
			cfg.ObjectStoreOptions.SecretKey = tc.secret
			b, logs := startBrokerLogLines(t, cfg)
			// Several probes fail: each keeps the broker not ready, only
			// the first is an ERROR line.
			eventuallyTrue(t, "three probes failed", func() (bool, string) {
				code, body := readyz(t, b)
				if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: object store s3://") || !strings.Contains(body, tc.storeSays) {
					t.Fatalf("/readyz answers %d %q, want 503 naming the store and %s", code, body, tc.storeSays)
				}
				n := logs.count(t, "debug", stillFailing)
				return n >= 2, fmt.Sprintf("%d later probes failed", n)
			})
			if n := logs.count(t, "error", "object store not usable"); n != 1 {
				t.Fatalf("%d ERROR lines for the unusable store, want 1", n)
			}
			if n := logs.count(t, "info", "tiering ready"); n != 0 {
				t.Fatalf("logged tiering ready %d times with an unusable store", n)
			}
		})
	}
}

func TestReadyzFollowsTheObjectStoreBack(t *testing.T) {
	store := fault.New(mem.New(), fault.Config{Seed: 1})
	store.SetDown(true)
	cfg := testBrokerConfig(t)
	cfg.Objects = store
	b, logs := startBrokerLogLines(t, cfg)
	eventuallyTrue(t, "two probes failed", func() (bool, string) {
		code, body := readyz(t, b)
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: object store") || !strings.Contains(body, "injected down") {
			t.Fatalf("/readyz answers %d %q with the store down, want 503 with the store's error", code, body)
		}
		n := logs.count(t, "debug", stillFailing)
		return n >= 1, fmt.Sprintf("%d later probes failed", n)
	})

	store.SetDown(false)
	eventuallyTrue(t, "ready once the store is back", func() (bool, string) {
		code, body := readyz(t, b)
		return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
	})
	if e, i := logs.count(t, "error", "object store not usable"), logs.count(t, "info", "object store usable again"); e != 1 || i != 1 {
		t.Fatalf("%d ERROR lines for the failure and %d INFO lines for the recovery, want 1 and 1", e, i)
	}
	if _, err := store.Inner().Head(context.Background(), "sluice-probe/broker-1"); err == nil {
		t.Fatal("the probe object is left in the store")
	}
}

func TestReadyzWithAWorkingStore(t *testing.T) {
	b, logs := startBrokerLogLines(t, testBrokerConfig(t))
	eventuallyTrue(t, "ready", func() (bool, string) {
		code, body := readyz(t, b)
		return code == http.StatusOK && body == "ready", fmt.Sprintf("%d %q", code, body)
	})
	if e, i := logs.count(t, "error", "object store"), logs.count(t, "info", "tiering ready"); e != 0 || i != 1 {
		t.Fatalf("%d ERROR lines and %d tiering ready lines, want 0 and 1", e, i)
	}
}
