package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
)

// fakeAPI answers fixed JSON per path and remembers the Authorization
// headers it was asked with.
type fakeAPI struct {
	answers map[string]string
	authz   []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.authz = append(f.authz, r.Header.Get("Authorization"))
	body, ok := f.answers[r.URL.Path]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"not_found","message":"no such topic"}`)
		return
	}
	_, _ = io.WriteString(w, body)
}

func serveAs(t *testing.T, h http.Handler, id auth.Identity, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.Header.Set("Authorization", "Basic YW5uOmFubi1wdw==")
	r = r.WithContext(auth.WithIdentity(r.Context(), id))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The pages ask the API with the caller's own credentials, show what it
// answered, and turn its refusals into the page's status.
func TestConsoleAsksAPIAsCaller(t *testing.T) {
	c, err := New(Config{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{answers: map[string]string{
		"/v1/topics": `{"topics":[{"name":"orders","partitions":3,"replication_factor":1,"tiered":true}]}`}}
	h := c.Mount(api, &fakeAPI{})
	ann := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}}

	w := serveAs(t, h, ann, "/ui/topics")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `data-topic="orders"`) || !strings.Contains(w.Body.String(), "read-only") {
		t.Fatalf("topics page: %d %s", w.Code, w.Body)
	}
	if len(api.authz) != 1 || api.authz[0] != "Basic YW5uOmFubi1wdw==" {
		t.Fatalf("the API was asked with %q, want the caller's credentials", api.authz)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("CSP %q", csp)
	}
	w = serveAs(t, h, ann, "/ui/topics/other")
	if w.Code != 404 || !strings.Contains(w.Body.String(), "no such topic") {
		t.Fatalf("unknown topic: %d %s", w.Code, w.Body)
	}
	w = serveAs(t, h, ann, "/ui/assets/uplot/uPlot.iife.min.js")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "uPlot") {
		t.Fatalf("uPlot asset: %d", w.Code)
	}
	if w = serveAs(t, h, ann, "/ui/assets/templates/layout.html"); w.Code != 404 {
		t.Fatalf("a template served as an asset: %d", w.Code)
	}
	if w = serveAs(t, h, ann, "/ui/tier/orphans"); w.Code != http.StatusForbidden {
		t.Fatalf("orphans for a tenant's user: %d, want 403", w.Code)
	}
}

// The sampler records each group's lag as the lag listing answers it.
func TestSamplerRecordsLag(t *testing.T) {
	now := t0
	c, err := New(Config{Now: func() time.Time { return now }, History: HistoryConfig{Interval: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	sys := &fakeAPI{answers: map[string]string{
		"/v1/groups":                  `{"groups":[{"group":"acme~billing"},{"group":"gone"}]}`,
		"/v1/groups/acme~billing/lag": `{"group":"acme~billing","partitions":[{"topic":"acme~orders","partition":0,"lag":7,"lag_bytes":70,"oldest_unconsumed_age_ms":3000},{"topic":"acme~orders","partition":1,"error":"leader unreachable"}]}`,
	}}
	c.Mount(&fakeAPI{}, sys)
	c.SampleOnce(context.Background())
	now = now.Add(10 * time.Second)
	c.SampleOnce(context.Background())
	got := c.History().Series(Key{Group: "acme~billing", Topic: "acme~orders", Partition: 0}, now)
	if len(got) != 2 || got[1] != (Sample{AtMs: now.UnixMilli(), Lag: 7, LagBytes: 70, OldestAgeMs: 3000}) {
		t.Fatalf("series %+v", got)
	}
	if n, _ := c.History().Stats(); n != 1 {
		t.Fatalf("%d series, want 1 (no sample of a partition in error, none of a group whose lag failed)", n)
	}
	for _, a := range sys.authz {
		if a != "" {
			t.Fatalf("the sampler sent credentials %q", a)
		}
	}
}

// A dead-letter topic is named in the source topic's tenant, whether the
// contract names it or it is <topic>.dlq; the old code looked a named one
// up in the default tenant for a super user.
func TestDeadLetterOfKeepsTenant(t *testing.T) {
	for _, tc := range []struct {
		topic, dlt, want string
	}{
		{"acme~jobs", "", "acme~jobs.dlq"},
		{"acme~jobs", "failed", "acme~failed"},
		{"jobs", "failed", "failed"},
		{"jobs", "", "jobs.dlq"},
	} {
		var ta topicAnswer
		if tc.dlt != "" {
			ta.Configs = append(ta.Configs, struct {
				Name      string `json:"name"`
				Value     string `json:"value"`
				IsDefault bool   `json:"is_default"`
			}{Name: "dead.letter.topic", Value: tc.dlt})
		} else {
			ta.Configs = append(ta.Configs, struct {
				Name      string `json:"name"`
				Value     string `json:"value"`
				IsDefault bool   `json:"is_default"`
			}{Name: "retry.max.attempts", Value: "1"})
		}
		c, ok := contractOf(ta)
		if !ok {
			t.Fatalf("%+v: no contract", tc)
		}
		if got := deadLetterOf(c, tc.topic); got != tc.want {
			t.Errorf("deadLetterOf(%s, %q) = %s, want %s", tc.topic, tc.dlt, got, tc.want)
		}
	}
}
