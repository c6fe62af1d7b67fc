package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/httpapi/objapi"
	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/meta"
)

// TestParseAuthorization: the two schemes, case-insensitive, and the
// malformed headers refused.
func TestParseAuthorization(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		header string
		want   credentials
		ok     bool
	}{
		{"Bearer sk_abc", credentials{bearer: "sk_abc"}, true},
		{"bearer   sk_abc  ", credentials{bearer: "sk_abc"}, true},
		{"Basic " + b64("alice:pw"), credentials{user: "alice", password: "pw"}, true},
		{"BASIC " + b64("alice:p:w"), credentials{user: "alice", password: "p:w"}, true},
		{"Basic " + b64("alice:"), credentials{user: "alice"}, true},
		{"Basic " + b64(":pw"), credentials{}, false},
		{"Basic " + b64("alice"), credentials{}, false},
		{"Basic not-base64!", credentials{}, false},
		{"Bearer", credentials{}, false},
		{"Bearer ", credentials{}, false},
		{"Digest x", credentials{}, false},
		{"", credentials{}, false},
	} {
		got, err := parseAuthorization(tc.header)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseAuthorization(%q) = %+v, %v; want %+v, ok %v", tc.header, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParseAuthorization: any header parses without panicking, a parse
// names one scheme, and Basic credentials made from a parse read back the
// same.
func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer sk_x", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), "Basic ", "basic YTo=", "Digest", " Bearer  x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		c, err := parseAuthorization(h)
		if err != nil {
			return
		}
		if (c.bearer != "") == (c.user != "") {
			t.Fatalf("parseAuthorization(%q) = %+v: not exactly one scheme", h, c)
		}
		if c.user != "" {
			again, err := parseAuthorization("Basic " + base64.StdEncoding.EncodeToString([]byte(c.user+":"+c.password)))
			if err != nil || again != c {
				t.Fatalf("Basic round trip of %+v: %+v, %v", c, again, err)
			}
		}
	})
}

// TestSecAPIRoutesMounted: the routes the pipeline mounts for secapi are
// exactly those Register adds, and each has a rule.
func TestSecAPIRoutesMounted(t *testing.T) {
	mux := http.NewServeMux()
	secapi.Register(mux, secapi.Deps{Store: (*meta.Store)(nil)})
	for _, pattern := range secapiRoutes {
		method, path, _ := strings.Cut(pattern, " ")
		url := strings.NewReplacer("{name}", "x", "{id}", "x").Replace(path)
		if _, got := mux.Handler(httptest.NewRequest(method, url, nil)); got != pattern {
			t.Errorf("mounted %s is served by secapi's pattern %q", pattern, got)
		}
		if _, ok := publicRoutes[pattern]; !ok {
			t.Errorf("secapi route %s has no rule", pattern)
		}
	}
	if len(secapiRoutes) != 17 {
		t.Errorf("%d secapi routes mounted, Register adds 17", len(secapiRoutes))
	}
}

// TestObjAPIRoutesMounted: the routes mounted for objapi are exactly those
// its Register adds, each has a rule, and opening a session is authorised
// by WRITE on the body's topic and never by WRITE on the cluster.
func TestObjAPIRoutesMounted(t *testing.T) {
	mux := http.NewServeMux()
	objapi.Register(mux, objapi.Deps{Service: (*largeobj.Service)(nil)})
	for _, pattern := range objapi.Routes {
		method, path, _ := strings.Cut(pattern, " ")
		url := strings.NewReplacer("{id}", "x", "{ref}", "x").Replace(path)
		if _, got := mux.Handler(httptest.NewRequest(method, url, nil)); got != pattern {
			t.Errorf("mounted %s is served by objapi's pattern %q", pattern, got)
		}
		if _, ok := publicRoutes[pattern]; !ok {
			t.Errorf("objapi route %s has no rule", pattern)
		}
	}
	rule := publicRoutes["POST /v1/uploads"]
	if rule.op != acl.OpWrite || rule.rt != acl.ResourceTopic || !rule.bodyTopic || rule.body == nil {
		t.Errorf("POST /v1/uploads rule %+v", rule)
	}
	scoped, err := rule.body([]byte(`{"topic":"orders","size":5,"sha256":"x"}`), func(n *string) error { *n = "acme.orders"; return nil })
	if err != nil || !strings.Contains(string(scoped), `"topic":"acme.orders"`) {
		t.Errorf("topic not rewritten: %s, %v", scoped, err)
	}
}
