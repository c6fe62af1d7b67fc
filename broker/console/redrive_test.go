package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
)

// writeAPI answers the redrive routes as the real API does (202 for a
// start, errors as {"error":{"code","message"}}) and records each call.
type writeAPI struct {
	calls []apiCall
}

type apiCall struct {
	method, path, authz, body string
}

func (f *writeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.calls = append(f.calls, apiCall{r.Method, r.URL.Path, r.Header.Get("Authorization"), string(body)})
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/dlq/jobs.dlq/redrives":
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		if req["target"] == "nope" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"unknown_topic","message":"unknown topic: nope"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"0123456789abcdef","dlq":"jobs.dlq","target":"jobs","state":"running","total":3}`)
	case r.Method == "POST" && r.URL.Path == "/v1/redrives/0123456789abcdef/cancel":
		_, _ = io.WriteString(w, `{"id":"0123456789abcdef","state":"cancelled"}`)
	case r.Method == "GET" && r.URL.Path == "/v1/redrives/0123456789abcdef":
		_, _ = io.WriteString(w, `{"id":"0123456789abcdef","dlq":"jobs.dlq","target":"jobs","state":"running","total":3,"decided":1,"redriven":1,
			"partitions":[{"partition":0,"start":0,"end":3,"cursor":1,"redriven":1}]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such route"}}`)
	}
}

const annAuthz = "Basic YW5uOmFubi1wdw=="

func postAs(h http.Handler, id auth.Identity, path string, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	r.Host = "console.example:8080"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Authorization", annAuthz)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	r = r.WithContext(auth.WithIdentity(r.Context(), id))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The redrive form writes only for a caller who may, from the console's own
// origin, with the token rendered for the same credentials; then it asks
// the API as the caller and redirects to the job's page.
func TestRedriveFormChecksThenAsksAPIAsCaller(t *testing.T) {
	c, err := New(Config{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	api := &writeAPI{}
	h := c.Mount(api, &fakeAPI{})
	admin := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "ann"}, Role: auth.RoleTenantAdmin}
	user := auth.Identity{Principal: auth.Principal{Tenant: "acme", User: "bob"}, Role: auth.RoleUser}
	tok := c.csrfToken(httptest.NewRequest("GET", "/", nil)) // no credentials: another token
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", annAuthz)
	good := c.csrfToken(r)
	if tok == good {
		t.Fatal("the token does not depend on the credentials")
	}
	form := url.Values{"csrf": {good}, "target": {"jobs"}, "from_offset": {"1"}, "to_offset": {"3"}, "message_key": {"k1"},
		"error_class": {"permanent"}, "rate": {"5"}}
	same := map[string]string{"Origin": "http://console.example:8080", "Sec-Fetch-Site": "same-origin"}

	for _, tc := range []struct {
		name string
		id   auth.Identity
		form url.Values
		hdr  map[string]string
		want int
		says string
	}{
		{"a tenant's user is read-only", user, form, same, http.StatusForbidden, "read-only"},
		{"another origin", admin, form, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "Cross-site"},
		{"a null origin", admin, form, map[string]string{"Origin": "null"}, http.StatusForbidden, "Cross-site"},
		{"another site's referer", admin, form, map[string]string{"Referer": "http://evil.example/x"}, http.StatusForbidden, "Cross-site"},
		{"cross-site fetch metadata", admin, form, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "Cross-site"},
		{"no token", admin, url.Values{"target": {"jobs"}}, same, http.StatusForbidden, "token"},
		{"another credential's token", admin, url.Values{"csrf": {tok}, "target": {"jobs"}}, same, http.StatusForbidden, "token"},
		{"a bad offset", admin, url.Values{"csrf": {good}, "target": {"jobs"}, "from_offset": {"-2"}}, same, http.StatusBadRequest, "from_offset"},
		{"the API's refusal, with its message", admin, url.Values{"csrf": {good}, "target": {"nope"}}, same, http.StatusNotFound, "unknown topic: nope"},
	} {
		before := len(api.calls)
		w := postAs(h, tc.id, "/ui/dlq/jobs.dlq/redrives", tc.form, tc.hdr)
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.says) {
			t.Errorf("%s: %d, want %d saying %q: %s", tc.name, w.Code, tc.want, tc.says, w.Body)
		}
		if tc.want == http.StatusForbidden && len(api.calls) != before {
			t.Errorf("%s: refused but the API was asked: %+v", tc.name, api.calls[before:])
		}
	}

	api.calls = nil
	w := postAs(h, admin, "/ui/dlq/jobs.dlq/redrives", form, same)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/redrives/0123456789abcdef" {
		t.Fatalf("start: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if len(api.calls) != 1 || api.calls[0].authz != annAuthz || api.calls[0].method != "POST" {
		t.Fatalf("the API was asked %+v, want one POST with the caller's credentials", api.calls)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(api.calls[0].body), &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"target": "jobs", "from_offset": 1.0, "to_offset": 3.0, "message_key": "k1", "error_class": "permanent", "rate": 5.0}
	for k, v := range want {
		if sent[k] != v {
			t.Errorf("the start request's %s = %v, want %v (%s)", k, sent[k], v, api.calls[0].body)
		}
	}

	// No Origin nor Referer (not a browser): the token decides.
	if w := postAs(h, admin, "/ui/redrives/0123456789abcdef/cancel", url.Values{"csrf": {good}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", w.Code, w.Body)
	}

	// The job's page: its progress and, for a writer, the cancel form with the token.
	page := serveAs(t, h, admin, "/ui/redrives/0123456789abcdef")
	body := page.Body.String()
	if page.Code != 200 || !strings.Contains(body, `data-state="running"`) || !strings.Contains(body, "1 of 3 decided") ||
		!regexp.MustCompile(`name="csrf" value="`+regexp.QuoteMeta(good)+`"`).MatchString(body) {
		t.Fatalf("job page: %d %s", page.Code, body)
	}
	if page := serveAs(t, h, user, "/ui/redrives/0123456789abcdef"); strings.Contains(page.Body.String(), "redrive-cancel") ||
		!strings.Contains(page.Body.String(), "read-only") {
		t.Fatalf("a read-only caller's job page offers cancel: %s", page.Body)
	}
}

// The API answers errors as {"error":{"code","message"}}; the old code
// read only a flat {"error","message"} and showed "HTTP 404" alone.
func TestAPIErrorShowsNestedMessage(t *testing.T) {
	e := decodeAPIError(404, []byte(`{"error":{"code":"unknown_topic","message":"unknown topic: nope"}}`))
	if e.Code != "unknown_topic" || e.Message != "unknown topic: nope" {
		t.Fatalf("nested: %+v", e)
	}
	if e := decodeAPIError(404, []byte(`{"error":"not_found","message":"no such topic"}`)); e.Code != "not_found" || e.Message != "no such topic" {
		t.Fatalf("flat: %+v", e)
	}
}

// A form's body is outside bytes: any body decodes to a start request with
// no negative number, or to an error; crossSite takes any header.
func FuzzRedriveForm(f *testing.F) {
	f.Add("target=jobs&from_offset=1&to_offset=3&message_key=k1&error_class=permanent&rate=5", "http://h:1")
	f.Add("target=&rate=-1", "null")
	f.Add("from_offset=99999999999999999999&rate=1073741825", "http://[::1")
	f.Add("%zz&message_key=%00", "")
	f.Fuzz(func(t *testing.T, body, origin string) {
		v, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		req, err := redriveForm(v)
		if err == nil && (req.FromOffset < 0 || req.ToOffset < 0 || req.Rate < 0) {
			t.Fatalf("%q decoded to %+v", body, req)
		}
		r := httptest.NewRequest("POST", "/ui/dlq/x/redrives", nil)
		r.Header.Set("Origin", origin)
		_ = crossSite(r)
	})
}
