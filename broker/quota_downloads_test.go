package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// downloadGate is an in-memory store whose reads of large objects, once
// armed, wait until released: a download held mid-stream.
type downloadGate struct {
	*mem.Store
	armed   atomic.Bool
	held    chan struct{} // one value each time a read is held
	release chan struct{} // closed to let held reads through
}

func (g *downloadGate) wait(ctx context.Context, key string) error {
	if !g.armed.Load() || !strings.HasPrefix(key, "large/") {
		return nil
	}
	select {
	case g.held <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *downloadGate) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := g.wait(ctx, key); err != nil {
		return nil, err
	}
	return g.Store.Get(ctx, key, off, n)
}

func (g *downloadGate) GetInto(ctx context.Context, key string, off int64, p []byte) (int, error) {
	if err := g.wait(ctx, key); err != nil {
		return 0, err
	}
	return g.Store.GetInto(ctx, key, off, p)
}

// TestObjectDownloadsQuota: with object_downloads at 1, a second download
// of the tenant while one streams is refused 429 "throttled" with
// Retry-After 1 (the httpapi quota stage's documented answer), counted as
// a throttle of the tenant; once the first download finished, its slot is
// free and the next download is served whole.
func TestObjectDownloadsQuota(t *testing.T) {
	store := &downloadGate{Store: mem.New(), held: make(chan struct{}, 1), release: make(chan struct{})}
	letGo := sync.OnceFunc(func() { close(store.release) })
	t.Cleanup(letGo)
	cfg := testBrokerConfig(t)
	cfg.Objects = store
	b, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	b.SetQuotas(quota.Static{auth.DefaultTenant: {quota.ObjectDownloads: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); awaitStop(t, errc, "broker") })
	select {
	case <-b.Ready():
	case err := <-errc:
		t.Fatalf("broker stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("broker not ready after 60s")
	}
	base := "http://" + b.Cfg.HTTPListen
	if code, body := postJSON(t, base+"/v1/topics", `{"name":"big","partitions":1}`); code != http.StatusCreated {
		t.Fatalf("create topic: %d %v", code, body)
	}
	const size = 3000
	sum := genSHA(7, size)
	u := beginOn(t, base, "big", size, sum)
	if err := putAll(t, base, u, 7, size, 1); err != nil {
		t.Fatal(err)
	}
	if code, out := completeUpload(t, base, u.ID); code != http.StatusOK {
		t.Fatalf("complete: %d %v", code, out)
	}

	store.armed.Store(true)
	type result struct {
		code int
		body []byte
	}
	first := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/v1/objects/" + u.ID)
		if err != nil {
			first <- result{code: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		first <- result{resp.StatusCode, raw}
	}()
	select {
	case <-store.held:
	case r := <-first:
		t.Fatalf("the first download finished without reading the store: %d %s", r.code, r.body)
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the first download to read the store")
	}

	// The tenant's one slot is taken: the next download is refused.
	resp, err := http.Get(base + "/v1/objects/" + u.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(raw, &e) != nil || e.Error.Code != "throttled" ||
		!strings.Contains(e.Error.Message, quota.ObjectDownloads) {
		t.Fatalf("a second download at object_downloads 1: %d %s, want 429 throttled naming object_downloads", resp.StatusCode, raw)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s != 1 {
		t.Fatalf("Retry-After %q, want 1", resp.Header.Get("Retry-After"))
	}

	// The first download finishes whole; its slot is free again.
	letGo()
	select {
	case r := <-first:
		if r.code != http.StatusOK || len(r.body) != size {
			t.Fatalf("the first download: %d, %d bytes, want 200 and %d", r.code, len(r.body), size)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the first download")
	}
	for i := range 2 { // one after the other: each frees its slot
		code, body, _ := doHTTP(t, "GET", base+"/v1/objects/"+u.ID, nil, 0, nil)
		if code != http.StatusOK || len(body) != size {
			t.Fatalf("download %d after the first finished: %d, %d bytes", i+2, code, len(body))
		}
	}
	_, metrics := httpGet(t, base+"/metrics")
	want := fmt.Sprintf(`sluice_tenant_throttle_seconds_total{reason=%q,tenant="default"}`, quota.ObjectDownloads)
	if !strings.Contains(string(metrics), want) {
		t.Fatalf("metrics lack %s", want)
	}
}
