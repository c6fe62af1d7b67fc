package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
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
}
