package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
)

// TestQuotaAdmitterHTTP: a publish is charged its body bytes and its
// messages; a fetch its response bytes; once in debt the next of either
// is refused with the delay, rounded up to whole seconds for Retry-After.
func TestQuotaAdmitterHTTP(t *testing.T) {
	m := quota.NewMeters(quota.Static{"acme": {quota.ProducerRecordRate: 2, quota.ConsumerByteRate: 100}}, 0, nil)
	q := NewQuotaAdmitter(m)
	id := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}
	req := func(pattern, body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
		r.Pattern = pattern
		return r
	}
	publish := `{"messages":[{"payload":"a"},{"payload":"b"},{"payload":"c"}]}`
	if err := q.Admit(req(publishRoute, publish), id); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	err := q.Admit(req(publishRoute, publish), id)
	var th *Throttled
	if !errors.As(err, &th) || th.Key != quota.ProducerRecordRate || th.Delay <= 0 || th.Delay > 500*time.Millisecond {
		t.Fatalf("publish after 3 records at 2/s: %v, want throttled for about 0.5s", err)
	}
	if s := retryAfterSeconds(th.Delay); s != 1 {
		t.Fatalf("Retry-After %d for %v, want 1", s, th.Delay)
	}
	w := httptest.NewRecorder()
	setRetryAfter(w, err)
	if w.Header().Get("Retry-After") != "1" {
		t.Fatalf("Retry-After header %q", w.Header().Get("Retry-After"))
	}

	f := req(fetchRoute, `{}`)
	if err := q.Admit(f, id); err != nil {
		t.Fatalf("first fetch: %v", err)
	}
	q.Served(f, id, 350)
	if err := q.Admit(req(fetchRoute, `{}`), id); !errors.As(err, &th) || th.Key != quota.ConsumerByteRate {
		t.Fatalf("fetch after 350 bytes at 100/s: %v, want throttled", err)
	}
	if err := q.Admit(req("GET /v1/topics", ""), id); err != nil {
		t.Fatalf("a listing is never throttled: %v", err)
	}

	// A large payload's download is consumption too: its bytes are
	// charged to consumer_byte_rate, and a tenant in debt is refused the
	// next one. (The old code charged downloads nothing.)
	m = quota.NewMeters(quota.Static{"acme": {quota.ConsumerByteRate: 100}}, 0, nil)
	q = NewQuotaAdmitter(m)
	d := req(objectRoute, "")
	if err := q.Admit(d, id); err != nil {
		t.Fatalf("first download: %v", err)
	}
	q.Served(d, id, 10<<20)
	if err := q.Admit(req(objectRoute, ""), id); !errors.As(err, &th) || th.Key != quota.ConsumerByteRate {
		t.Fatalf("download after 10 MiB at 100 B/s: %v, want throttled on consumer_byte_rate", err)
	}
}

// TestPublishChargedItsRecords: an HTTP publish is charged the bytes of the
// records it writes, not its JSON: a base64 payload of N bytes costs N
// (its body is over 1.4 N), a key, headers and a message_id cost their
// bytes as the record carries them, and the charge is taken before the
// handler, so the next publish of a tenant it took into debt is refused.
func TestPublishChargedItsRecords(t *testing.T) {
	const n = 3000
	m := quota.NewMeters(quota.Static{"acme": {quota.ProducerByteRate: 2 * n}}, 0, nil)
	q := NewQuotaAdmitter(m)
	now := time.Unix(1_000_000, 0)
	q.now = func() time.Time { return now }
	id := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}
	publish := func(body string) error {
		r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
		r.Pattern = publishRoute
		return q.Admit(r, id)
	}
	// TakeUsage publishes what was let through raised by quota.Headroom
	// for a key that held no client (its demand for the split); a publish
	// within the burst holds none.
	charged := func() float64 { return m.TakeUsage(time.Second)["acme"][quota.ProducerByteRate] / quota.Headroom }

	payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, n))
	body := `{"messages":[{"payload_base64":"` + payload + `"}]}`
	if err := publish(body); err != nil {
		t.Fatal(err)
	}
	if got := charged(); got != n {
		t.Fatalf("a base64 payload of %d bytes in a body of %d charged %v, want %d", n, len(body), got, n)
	}
	// key 1 + value 2 + header h=v 2 + message_id header 10+2
	if err := publish(`{"messages":[{"message_key":"k","payload":"vv","headers":{"h":"v"},"message_id":"id"}]}`); err != nil {
		t.Fatal(err)
	}
	if got := charged(); got != 17 {
		t.Fatalf("key, value, headers and message_id charged %v, want 17", got)
	}
	if err := publish(`{"messages":[{"payload":"` + strings.Repeat("x", 2*n) + `"}]}`); err != nil {
		t.Fatalf("a publish into debt is served: %v", err)
	}
	var th *Throttled
	if err := publish(`{"messages":[{"payload":"x"}]}`); !errors.As(err, &th) || th.Key != quota.ProducerByteRate {
		t.Fatalf("a publish of a tenant in debt: %v, want throttled", err)
	}
}

// FuzzPublishCharge: no body (outside bytes) panics the charge or makes
// it negative.
func FuzzPublishCharge(f *testing.F) {
	f.Add([]byte(`{"messages":[{"payload_base64":"AAEC","message_key":"k","headers":{"a":"b"},"message_id":"m"}]}`))
	f.Add([]byte(`{"messages":[{"payload":"x","payload_base64":"eA=="},{"payload_base64":"!!"},7]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if b, r := publishCharge(raw); b < 0 || r < 0 {
			t.Fatalf("charged %d bytes, %d records", b, r)
		}
	})
}

// TestHTTPFetchCappedAtTheTenantsSlice: an HTTP fetch (by partition or the
// queue fetch) of a tenant with a consumer_byte_rate reads at most
// quota.FetchSlice of that rate, as a Kafka fetch's max_bytes is capped;
// a smaller max_bytes stands, and a tenant without the quota, a request
// without an identity or a broker without quotas keep the default. (The
// old code read the default 1 MiB whatever the quota.)
func TestHTTPFetchCappedAtTheTenantsSlice(t *testing.T) {
	const rate = 50000
	m := quota.NewMeters(quota.Static{"acme": {quota.ConsumerByteRate: rate}}, 0, nil)
	b := &Server{Node: node.New(node.DefaultConfig(), zerolog.Nop()), admit: NewQuotaAdmitter(m)}
	as := func(tenant string) context.Context {
		return auth.WithIdentity(context.Background(), auth.Identity{Principal: auth.Principal{Tenant: tenant, User: "u"}})
	}
	slice := int(rate * quota.FetchSlice.Seconds())
	if got := b.fetchBytes(as("acme"), 0); got != slice {
		t.Fatalf("acme's fetch reads %d bytes, want its slice %d", got, slice)
	}
	if got := b.fetchBytes(as("acme"), 100); got != 100 {
		t.Fatalf("acme's fetch of max_bytes 100 reads %d bytes", got)
	}
	for name, ctx := range map[string]context.Context{"a tenant without the quota": as("globex"), "no identity": context.Background()} {
		if got := b.fetchBytes(ctx, 0); got != httpDefaultFetchBytes {
			t.Fatalf("%s: a fetch reads %d bytes, want the default %d", name, got, httpDefaultFetchBytes)
		}
	}
	b.admit = admitAll{}
	if got := b.fetchBytes(as("acme"), 0); got != httpDefaultFetchBytes {
		t.Fatalf("without quotas: a fetch reads %d bytes, want the default %d", got, httpDefaultFetchBytes)
	}
}
