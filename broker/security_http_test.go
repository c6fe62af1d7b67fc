package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/listener/certgen"
)

// httpCaller makes JSON calls to one broker's HTTP API with one set of
// credentials.
type httpCaller struct {
	t      *testing.T
	client *http.Client
	base   string
	auth   func(*http.Request) // sets the credentials; nil: none
}

func (c httpCaller) with(auth func(*http.Request)) httpCaller {
	c.auth = auth
	return c
}

func bearer(key string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
}

func basic(user, password string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, password) }
}

// call sends method path with body and returns the status, the decoded
// JSON answer (nil if not JSON) and the headers.
func (c httpCaller) call(method, path, body string) (int, map[string]any, http.Header) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != nil {
		c.auth(req)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, resp.Header
}

// must is call that fails the test unless the status is want.
func (c httpCaller) must(want int, method, path, body string) map[string]any {
	c.t.Helper()
	code, out, _ := c.call(method, path, body)
	if code != want {
		c.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func errorCode(out map[string]any) (code, message string) {
	e, _ := out["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const onePublish = `{"messages":[{"payload":"hello"}]}`

// TestHTTPSecurity runs a broker with security on: the admin from the
// password file creates a tenant, a user and an API key through the API;
// Bearer and Basic authenticate; missing or wrong credentials get 401; the
// user is refused (403) on a topic until an ACL allows it, which applies
// within a second; listings show only what the user may describe.
func TestHTTPSecurity(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = false
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "admin-secret\n")
	b := startBroker(t, cfg)
	anon := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}
	admin := anon.with(basic("admin", "admin-secret"))

	// Open routes need nothing.
	for _, p := range []string{"/healthz", "/readyz", "/v1/openapi.json", "/metrics"} {
		if code, _, _ := anon.call("GET", p, ""); code != http.StatusOK {
			t.Errorf("GET %s without credentials: %d, want 200", p, code)
		}
	}
	// No credentials, wrong password, unknown key, garbage: 401 in JSON with
	// a challenge.
	for name, c := range map[string]httpCaller{
		"none":           anon,
		"wrong password": anon.with(basic("admin", "wrong")),
		"unknown user":   anon.with(basic("mallory", "admin-secret")),
		"unknown key":    anon.with(bearer("sk_aaaaaaaaaaaaaaaa_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")),
		"bad scheme":     anon.with(func(r *http.Request) { r.Header.Set("Authorization", "Digest x") }),
	} {
		code, out, h := c.call("POST", "/v1/topics/orders/messages:publish", onePublish)
		if ec, _ := errorCode(out); code != http.StatusUnauthorized || ec != "unauthenticated" {
			t.Errorf("%s: status %d %v, want 401 unauthenticated", name, code, out)
		}
		if ch := h.Values("WWW-Authenticate"); !slices.ContainsFunc(ch, func(v string) bool { return strings.HasPrefix(v, "Basic ") }) {
			t.Errorf("%s: WWW-Authenticate %q has no Basic challenge", name, ch)
		}
	}

	admin.must(http.StatusCreated, "POST", "/v1/tenants", `{"name":"team-a"}`)
	// alice is in the default tenant, whose topics are unqualified; erin
	// is in team-a.
	admin.must(http.StatusCreated, "POST", "/v1/users", `{"name":"alice","tenant":"default","password":"alice-pw"}`)
	admin.must(http.StatusCreated, "POST", "/v1/users", `{"name":"erin","tenant":"team-a","password":"erin-pw"}`)
	key, _ := admin.must(http.StatusCreated, "POST", "/v1/users/alice/api-keys", `{}`)["key"].(string)
	if key == "" {
		t.Fatal("no key in the answer that created it")
	}
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"orders"}`)
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"secret"}`)
	admin.must(http.StatusOK, "POST", "/v1/topics/secret/messages:publish", onePublish)

	aliceKey, alicePw := anon.with(bearer(key)), anon.with(basic("alice", "alice-pw"))
	for name, c := range map[string]httpCaller{"bearer": aliceKey, "basic": alicePw} {
		code, out, _ := c.call("POST", "/v1/topics/orders/messages:publish", onePublish)
		ec, msg := errorCode(out)
		if code != http.StatusForbidden || ec != "forbidden" || !strings.Contains(msg, `TOPIC "orders"`) || !strings.Contains(msg, "User:alice") {
			t.Errorf("%s: publish without an ACL: %d %v, want 403 naming User:alice and the topic", name, code, out)
		}
	}
	// A broker's health is any authenticated caller's, as the broker
	// listing is.
	health := fmt.Sprintf("/v1/brokers/%d/health", b.Cfg.NodeID)
	if code, _, _ := anon.call("GET", health, ""); code != http.StatusUnauthorized {
		t.Errorf("GET %s without credentials: %d, want 401", health, code)
	}
	if code, out, _ := alicePw.call("GET", health, ""); code != http.StatusOK || out["node"] != float64(b.Cfg.NodeID) {
		t.Errorf("GET %s as alice: %d %v, want 200 with this broker's health", health, code, out)
	}
	// A tenant admin's business is not alice's.
	if code, _, _ := aliceKey.call("POST", "/v1/tenants", `{"name":"team-x"}`); code != http.StatusForbidden {
		t.Errorf("alice created a tenant: %d", code)
	}

	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"default","bindings":[
		{"resource_type":"topic","resource_name":"orders","principal":"User:alice","operation":"write","permission":"allow"}]}`)
	// Another tenant's user never reaches the default tenant's names over
	// HTTP, even with an ACL of its own tenant that allows every name: its
	// names are its tenant's.
	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"team-a","bindings":[
		{"resource_type":"topic","resource_name":"*","principal":"User:erin","operation":"all","permission":"allow"}]}`)
	erin := anon.with(basic("erin", "erin-pw"))
	// The brokers learn ACLs from their etcd watch: until this one has the
	// new binding, erin is refused everything (403); alice waits likewise below.
	for aclAdded := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		code, out, _ := erin.call("GET", "/v1/topics/orders", "")
		if code != http.StatusForbidden {
			break
		}
		if time.Since(aclAdded) > time.Second {
			t.Fatalf("team-a's erin a second after her ACL was added: %d %v", code, out)
		}
	}
	for _, route := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/v1/topics/orders/messages:publish", onePublish, http.StatusNotFound},
		{"GET", "/v1/topics/orders", "", http.StatusNotFound},
	} {
		code, out, _ := erin.call(route.method, route.path, route.body)
		if code != route.want {
			t.Errorf("team-a's erin: %s %s: %d %v, want %d", route.method, route.path, code, out, route.want)
		}
	}
	if topics := erin.must(http.StatusOK, "GET", "/v1/topics", "")["topics"].([]any); len(topics) != 0 {
		t.Errorf("team-a's erin lists %v, want nothing", topics)
	}
	if out := erin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"mine"}`); out["name"] != "mine" {
		t.Errorf("team-a's erin created %v, want the name mine", out["name"])
	}
	added := time.Now()
	for {
		code, out, _ := aliceKey.call("POST", "/v1/topics/orders/messages:publish", onePublish)
		if code == http.StatusOK {
			break
		}
		if time.Since(added) > time.Second {
			t.Fatalf("publish a second after the ACL was added: %d %v", code, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	alicePw.must(http.StatusOK, "POST", "/v1/topics/orders/messages:publish", onePublish)
	// The internal form of another tenant's name is refused to all but
	// super users.
	for _, route := range []struct{ method, path, body string }{
		{"POST", "/v1/topics/team-a~orders/messages:publish", onePublish},
		{"POST", "/v1/topics", `{"name":"team-a~orders"}`},
	} {
		code, out, _ := aliceKey.call(route.method, route.path, route.body)
		if ec, _ := errorCode(out); code != http.StatusBadRequest || ec != "invalid_name" {
			t.Errorf("alice: %s %s: %d %v, want 400 invalid_name", route.method, route.path, code, out)
		}
	}
	// The ACL is for orders only.
	if code, _, _ := aliceKey.call("POST", "/v1/topics/secret/messages:publish", onePublish); code != http.StatusForbidden {
		t.Errorf("alice published to secret: %d", code)
	}
	// WRITE implies DESCRIBE: alice sees orders, and only orders.
	topics := aliceKey.must(http.StatusOK, "GET", "/v1/topics", "")["topics"].([]any)
	if len(topics) != 1 || topics[0].(map[string]any)["name"] != "orders" {
		t.Errorf("alice lists %v, want orders alone", topics)
	}
	if code, _, _ := aliceKey.call("GET", "/v1/topics/secret", ""); code != http.StatusForbidden {
		t.Errorf("alice described secret: %d", code)
	}
	if all := admin.must(http.StatusOK, "GET", "/v1/topics", "")["topics"].([]any); len(all) != 3 || all[2].(map[string]any)["name"] != "team-a~mine" {
		t.Errorf("the super user lists %v, want orders, secret and team-a~mine", all)
	}
	// Group routes check the group and the topics of the body.
	code, out, _ := aliceKey.call("POST", "/v1/groups/g1/members:join", `{"topics":["orders"]}`)
	if ec, msg := errorCode(out); code != http.StatusForbidden || ec != "forbidden" || !strings.Contains(msg, `GROUP "g1"`) {
		t.Errorf("join without a group ACL: %d %v", code, out)
	}
	// Only super users force elections.
	if code, _, _ := aliceKey.call("POST", "/v1/admin/partitions/orders/0/elections:unclean", ""); code != http.StatusForbidden {
		t.Errorf("alice forced an election: %d", code)
	}
}

// TestHTTPSecurityGroupBodyTopics: a group fetch or commit names its topic
// in the body; with READ on the group but not on the topic it is refused
// before the handler runs.
func TestHTTPSecurityGroupBodyTopics(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = false
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "pw")
	b := startBroker(t, cfg)
	anon := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}
	admin := anon.with(basic("admin", "pw"))
	admin.must(http.StatusCreated, "POST", "/v1/users", `{"name":"bob","tenant":"default","password":"bob-pw"}`)
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"t1"}`)
	admin.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"t2"}`)
	admin.must(http.StatusCreated, "POST", "/v1/acls", `{"tenant":"default","bindings":[
		{"resource_type":"group","resource_name":"g","principal":"User:bob","operation":"read","permission":"allow"},
		{"resource_type":"topic","resource_name":"t1","principal":"User:bob","operation":"read","permission":"allow"}]}`)
	bob := anon.with(basic("bob", "bob-pw"))
	deadline := time.Now().Add(5 * time.Second)
	var m map[string]any
	for {
		code, out, _ := bob.call("POST", "/v1/groups/g/members:join", `{"topics":["t1"],"session_timeout_ms":10000}`)
		if code == http.StatusOK {
			m = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("join with READ on g and t1: %d %v", code, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	member, _ := m["member_id"].(string)
	gen := m["generation"]
	for _, tc := range []struct{ path, body string }{
		{"/v1/groups/g/messages:fetch", `{"member_id":"` + member + `","generation":` + jsonNum(gen) + `,"topic":"t2","partition":0}`},
		{"/v1/groups/g/offsets:commit", `{"member_id":"` + member + `","generation":` + jsonNum(gen) + `,"offsets":[{"topic":"t1","partition":0,"offset":0},{"topic":"t2","partition":0,"offset":0}]}`},
		{"/v1/groups/g/offsets:reset", `{"topic":"t2","to":"earliest"}`},
		{"/v1/groups/g/members:join", `{"topics":["t1","t2"]}`},
	} {
		code, out, _ := bob.call("POST", tc.path, tc.body)
		if ec, msg := errorCode(out); code != http.StatusForbidden || ec != "forbidden" || !strings.Contains(msg, `TOPIC "t2"`) {
			t.Errorf("POST %s naming t2: %d %v, want 403 naming t2", tc.path, code, out)
		}
	}
	bob.must(http.StatusOK, "POST", "/v1/groups/g/messages:fetch",
		`{"member_id":"`+member+`","generation":`+jsonNum(gen)+`,"topic":"t1","partition":0}`)
	// A body the pipeline cannot decode is the handler's 400, not a 403.
	if code, _, _ := bob.call("POST", "/v1/groups/g/messages:fetch", `{"topic":`); code != http.StatusBadRequest {
		t.Errorf("malformed body: %d, want 400", code)
	}
}

func jsonNum(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// TestHTTPSecurityTLS serves the API over HTTPS with a certgen certificate:
// a client certificate authenticates as User:<CN> (a super user by
// --super-users, or an ordinary principal), Basic works over TLS, and a
// client with neither is refused.
func TestHTTPSecurityTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certgen.NewCA("sluice test CA", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(cn string, usage certgen.Usage) tls.Certificate {
		certPEM, keyPEM, err := ca.Issue(cn, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, usage, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := certgen.WriteFiles(dir, cn, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	issue("broker", certgen.Server)
	caFile := writeFile(t, "ca.pem", string(ca.CertPEM()))
	certFile, keyFile := filepath.Join(dir, "broker.crt"), filepath.Join(dir, "broker.key")

	cfg := testBrokerConfig(t)
	cfg.SecurityEnabled = true
	cfg.AllowEveryoneIfNoACLFound = false
	cfg.SuperUsers = []string{"User:carol"}
	cfg.AdminPasswordFile = writeFile(t, "admin-password", "pw")
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = certFile, keyFile, caFile
	b := startBroker(t, cfg)

	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	base := "https://" + b.Cfg.HTTPListen
	carol := httpCaller{t: t, client: client(issue("carol", certgen.Client)), base: base}
	dave := httpCaller{t: t, client: client(issue("dave", certgen.Client)), base: base}
	nobody := httpCaller{t: t, client: client(), base: base}

	carol.must(http.StatusCreated, "POST", "/v1/tenants", `{"name":"team-c"}`)
	code, out, _ := dave.call("POST", "/v1/tenants", `{"name":"team-d"}`)
	if _, msg := errorCode(out); code != http.StatusForbidden || !strings.Contains(msg, "User:dave") {
		t.Errorf("dave's certificate: %d %v, want 403 naming User:dave", code, out)
	}
	if code, _, _ := nobody.call("GET", "/v1/topics", ""); code != http.StatusUnauthorized {
		t.Errorf("no certificate, no credentials: %d, want 401", code)
	}
	nobody.with(basic("admin", "pw")).must(http.StatusOK, "GET", "/v1/tenants", "")
	// Plain HTTP is not served on the TLS port.
	if resp, err := http.Get("http://" + b.Cfg.HTTPListen + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered on the TLS listener")
		}
	}
}

// TestHTTPSecurityOff: without --security (make run) anonymous clients
// publish and list as before.
func TestHTTPSecurityOff(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	anon := httpCaller{t: t, client: http.DefaultClient, base: "http://" + b.Cfg.HTTPListen}
	anon.must(http.StatusCreated, "POST", "/v1/topics", `{"name":"dev"}`)
	anon.must(http.StatusOK, "POST", "/v1/topics/dev/messages:publish", onePublish)
	if topics := anon.must(http.StatusOK, "GET", "/v1/topics", "")["topics"].([]any); len(topics) != 1 {
		t.Errorf("anonymous lists %v, want dev", topics)
	}
	// Wrong credentials are still refused: they are checked when given.
	if code, _, _ := anon.with(basic("admin", "x")).call("GET", "/v1/topics", ""); code != http.StatusUnauthorized {
		t.Errorf("wrong credentials with security off: %d, want 401", code)
	}
}
