package secapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
	"github.com/sluice-mq/sluice/broker/httpapi/secapi/secapitest"
	"github.com/sluice-mq/sluice/meta"
)

// as is who a request is sent as.
type as func(*http.Request)

func basic(user, password string) as { return func(r *http.Request) { r.SetBasicAuth(user, password) } }
func bearer(key string) as {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key) }
}
func nobody(*http.Request) {}

var admin = basic(secapitest.AdminUser, secapitest.AdminPassword)

// env is one test's server and a log of what it wrote.
type env struct {
	t   *testing.T
	srv *secapitest.Server
	log *syncBuffer
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	log := &syncBuffer{}
	srv := secapitest.Start(t, zerolog.New(log).Level(zerolog.DebugLevel))
	return &env{t: t, srv: srv, log: log}
}

// reply is an answer: its status and body.
type reply struct {
	status int
	body   []byte
}

// errorBody is the API's error shape.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do sends body (JSON-encoded unless a string) as who.
func (e *env) do(who as, method, path string, body any) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(secapitest.Context(e.t), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	who(req)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{resp.StatusCode, raw}
}

// ok checks the status and decodes the body into out (if not nil).
func (e *env) ok(r reply, status int, out any) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			e.t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// fails checks a refusal: its status, its code, and that the message
// holds each of msgs.
func (e *env) fails(r reply, status int, code string, msgs ...string) {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	var eb errorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		e.t.Fatalf("error body %s is not {\"error\":{\"code\",\"message\"}}: %v", r.body, err)
	}
	if eb.Error.Code != code {
		e.t.Fatalf("code %q, want %q; message %q", eb.Error.Code, code, eb.Error.Message)
	}
	for _, m := range msgs {
		if !strings.Contains(eb.Error.Message, m) {
			e.t.Fatalf("message %q does not say %q", eb.Error.Message, m)
		}
	}
}

// tenantWithAdmin creates tenant and a tenant admin "<tenant>-admin" with
// password "pw-<tenant>", and returns how to speak as that admin.
func (e *env) tenantWithAdmin(tenant string) as {
	e.t.Helper()
	e.ok(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: tenant}), http.StatusCreated, nil)
	e.ok(e.do(admin, "POST", "/v1/users", secapi.CreateUserRequest{Name: tenant + "-admin", Tenant: tenant,
		Password: "pw-" + tenant, Role: "tenant-admin"}), http.StatusCreated, nil)
	return basic(tenant+"-admin", "pw-"+tenant)
}

// user creates an ordinary user of tenant with password "pw-<name>".
func (e *env) user(by as, name, tenant string) as {
	e.t.Helper()
	e.ok(e.do(by, "POST", "/v1/users", secapi.CreateUserRequest{Name: name, Tenant: tenant, Password: "pw-" + name}),
		http.StatusCreated, nil)
	return basic(name, "pw-"+name)
}

func TestRoleNamesAgree(t *testing.T) {
	if auth.RoleUser != meta.RoleUser || auth.RoleTenantAdmin != meta.RoleTenantAdmin || auth.RoleSuper != meta.RoleSuper {
		t.Fatal("auth's role names differ from meta's: the pipeline copies a stored role into an Identity unchanged")
	}
}

func TestTenants(t *testing.T) {
	e := newEnv(t)
	var tn secapi.Tenant
	e.ok(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "acme"}), http.StatusCreated, &tn)
	if tn.Name != "acme" || tn.CreatedMs == 0 {
		t.Fatalf("created %+v", tn)
	}
	e.fails(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "acme"}), http.StatusConflict, "tenant_exists", `"acme"`)
	e.fails(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "system"}), http.StatusConflict, "tenant_exists", "implicitly")
	e.fails(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "Acme"}), http.StatusBadRequest, "bad_request", `tenant "Acme"`, "starting with a letter")
	e.fails(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{}), http.StatusBadRequest, "bad_request", "field name is required")
	e.fails(e.do(admin, "POST", "/v1/tenants", `{"name":"x","colour":"y"}`), http.StatusBadRequest, "bad_request", `unknown field "colour"`)
	e.fails(e.do(admin, "POST", "/v1/tenants", `{"name":7}`), http.StatusBadRequest, "bad_request", "field name: expected a string, got a JSON number")
	e.fails(e.do(admin, "POST", "/v1/tenants", `{"name":"x"} {}`), http.StatusBadRequest, "bad_request", "data after the request object")
	e.fails(e.do(admin, "POST", "/v1/tenants", ""), http.StatusBadRequest, "bad_request", "body is empty")
	e.fails(e.do(nobody, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "x"}), http.StatusUnauthorized, "unauthenticated", "credentials")

	var list secapi.TenantList
	e.ok(e.do(admin, "GET", "/v1/tenants", nil), http.StatusOK, &list)
	var names []string
	for _, t := range list.Tenants {
		names = append(names, t.Name)
	}
	if strings.Join(names, ",") != "acme,default,system" {
		t.Fatalf("tenants %v", names)
	}

	// Only super users manage tenants: not a tenant admin, not a user.
	acme := e.tenantWithAdmin("globex")
	e.fails(e.do(acme, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "other"}), http.StatusForbidden, "forbidden", "only a super user", "User:globex-admin")
	e.fails(e.do(acme, "GET", "/v1/tenants", nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(acme, "DELETE", "/v1/tenants/acme", nil), http.StatusForbidden, "forbidden")

	// Deleting: not while users remain; never a reserved tenant; 404 for none.
	e.fails(e.do(admin, "DELETE", "/v1/tenants/globex", nil), http.StatusConflict, "tenant_not_empty", "globex-admin", "delete them first")
	e.fails(e.do(admin, "DELETE", "/v1/tenants/system", nil), http.StatusConflict, "tenant_reserved", "cannot be deleted")
	e.fails(e.do(admin, "DELETE", "/v1/tenants/nope", nil), http.StatusNotFound, "tenant_not_found", `"nope"`)
	e.fails(e.do(admin, "DELETE", "/v1/tenants/No", nil), http.StatusBadRequest, "bad_request", `tenant "No"`)
	e.ok(e.do(admin, "DELETE", "/v1/tenants/acme", nil), http.StatusNoContent, nil)
	e.fails(e.do(admin, "DELETE", "/v1/tenants/acme", nil), http.StatusNotFound, "tenant_not_found")

	// A client's mistakes are logged at DEBUG, never above.
	logged := e.log.String()
	if !strings.Contains(logged, `"level":"debug"`) || !strings.Contains(logged, `"status":409`) {
		t.Fatalf("4xx not logged at debug: %s", logged)
	}
	if strings.Contains(logged, `"level":"warn"`) || strings.Contains(logged, `"level":"error"`) {
		t.Fatalf("a 4xx logged above debug: %s", logged)
	}
}

func TestDeleteTenantWithTopics(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	secapi.Register(mux, secapi.Deps{Store: e.srv.Store, TenantTopics: func(_ context.Context, tenant string) ([]string, error) {
		if tenant == "busy" {
			return []string{"orders", "payments"}, nil
		}
		return nil, nil
	}})
	srv := httptest.NewServer(secapitest.Authenticate(e.srv.Store, mux))
	t.Cleanup(srv.Close)
	e.srv = &secapitest.Server{Server: srv, Store: e.srv.Store}
	e.ok(e.do(admin, "POST", "/v1/tenants", secapi.CreateTenantRequest{Name: "busy"}), http.StatusCreated, nil)
	e.fails(e.do(admin, "DELETE", "/v1/tenants/busy", nil), http.StatusConflict, "tenant_not_empty", "2 topics (orders, payments)")
}

func TestUsers(t *testing.T) {
	e := newEnv(t)
	acme := e.tenantWithAdmin("acme")
	globex := e.tenantWithAdmin("globex")

	// A tenant admin creates a user of its own tenant (the default).
	var u secapi.User
	e.ok(e.do(acme, "POST", "/v1/users", secapi.CreateUserRequest{Name: "alice", Password: "alice-pw"}), http.StatusCreated, &u)
	if u.Name != "alice" || u.Tenant != "acme" || u.Role != "user" || strings.Join(u.Mechanisms, ",") != "SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("created %+v", u)
	}
	// Stored as SCRAM keys that verify the password, never the password.
	stored, err := e.srv.Store.GetUser(secapitest.Context(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	for mech, k := range stored.Scram {
		c := auth.ScramCredential{Mechanism: mech, Salt: k.Salt, Iterations: k.Iterations, StoredKey: k.StoredKey, ServerKey: k.ServerKey}
		if !c.VerifyPassword("alice-pw") || c.VerifyPassword("wrong") {
			t.Fatalf("%s credential does not verify the password", mech)
		}
		if bytes.Contains(k.Salt, []byte("alice-pw")) || bytes.Contains(k.StoredKey, []byte("alice-pw")) {
			t.Fatal("password stored")
		}
	}
	if strings.Contains(e.log.String(), "alice-pw") {
		t.Fatal("password logged")
	}
	alice := basic("alice", "alice-pw")
	var one secapi.User
	e.ok(e.do(acme, "POST", "/v1/users", secapi.CreateUserRequest{Name: "bob", Password: "bob-pw", Mechanisms: []string{"scram-sha-512"}}),
		http.StatusCreated, &one)
	if strings.Join(one.Mechanisms, ",") != "SCRAM-SHA-512" {
		t.Fatalf("bob has %v", one.Mechanisms)
	}

	// Refusals.
	e.fails(e.do(acme, "POST", "/v1/users", secapi.CreateUserRequest{Name: "x", Tenant: "globex", Password: "p"}),
		http.StatusForbidden, "forbidden", `tenant admin of tenant "acme"`, `not "globex"`)
	e.fails(e.do(acme, "POST", "/v1/users", secapi.CreateUserRequest{Name: "x", Password: "p", Role: "super"}),
		http.StatusForbidden, "forbidden", "only a super user may create a super user")
	e.fails(e.do(alice, "POST", "/v1/users", secapi.CreateUserRequest{Name: "x", Password: "p"}),
		http.StatusForbidden, "forbidden", "needs the tenant-admin or super role", "User:alice")
	e.fails(e.do(globex, "POST", "/v1/users", secapi.CreateUserRequest{Name: "alice", Password: "p"}),
		http.StatusConflict, "user_exists", `"alice"`)
	e.fails(e.do(admin, "POST", "/v1/users", secapi.CreateUserRequest{Name: "x", Tenant: "nope", Password: "p"}),
		http.StatusNotFound, "tenant_not_found", `"nope"`)
	for _, tc := range []struct {
		body string
		msg  string
	}{
		{`{"name":"x","password":"p","role":"root"}`, `field role: "root" is not a role`},
		{`{"name":"x","password":"p","mechanisms":["SCRAM-SHA-1"]}`, `field mechanisms[0]: "SCRAM-SHA-1" is not a SCRAM mechanism`},
		{`{"name":"x","password":"p","mechanisms":["SCRAM-SHA-256","scram-sha-256"]}`, "field mechanisms[1]: SCRAM-SHA-256 named twice"},
		{`{"name":"x","password":"p","mechanisms":[]}`, "field mechanisms: empty"},
		{`{"name":"x"}`, "field password is required"},
		{`{"password":"p"}`, "field name is required"},
		{`{"name":"a\u0001b","password":"p"}`, "control character"},
		{`{"name":"x","password":"p","tenant":"Bad"}`, `tenant "Bad"`},
		{`{"name":"x","password":"p","mechanisms":"SCRAM-SHA-256"}`, "field mechanisms: expected an array, got a JSON string"},
		{`{"name":"x","password":"` + strings.Repeat("p", 1025) + `"}`, "field password: 1025 bytes, at most 1024"},
	} {
		e.fails(e.do(acme, "POST", "/v1/users", tc.body), http.StatusBadRequest, "bad_request", tc.msg)
	}

	// Listing: a tenant admin its own tenant, a super user any or all.
	names := func(r reply) string {
		var l secapi.UserList
		e.ok(r, http.StatusOK, &l)
		var out []string
		for _, u := range l.Users {
			out = append(out, u.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(e.do(acme, "GET", "/v1/users", nil)); got != "acme-admin,alice,bob" {
		t.Fatalf("acme lists %s", got)
	}
	if got := names(e.do(admin, "GET", "/v1/users?tenant=globex", nil)); got != "globex-admin" {
		t.Fatalf("admin lists globex: %s", got)
	}
	if got := names(e.do(admin, "GET", "/v1/users", nil)); got != "acme-admin,admin,alice,bob,globex-admin" {
		t.Fatalf("admin lists %s", got)
	}
	e.fails(e.do(acme, "GET", "/v1/users?tenant=globex", nil), http.StatusForbidden, "forbidden", `not "globex"`)
	e.fails(e.do(alice, "GET", "/v1/users", nil), http.StatusForbidden, "forbidden")
	if strings.Contains(string(e.do(admin, "GET", "/v1/users", nil).body), "stored_key") {
		t.Fatal("a listing shows keys")
	}

	// Passwords: the user itself, its tenant admin; not another tenant's.
	e.ok(e.do(alice, "PUT", "/v1/users/alice/password", secapi.SetPasswordRequest{Password: "alice-pw2"}), http.StatusNoContent, nil)
	e.fails(e.do(alice, "GET", "/v1/users/alice/api-keys", nil), http.StatusUnauthorized, "unauthenticated")
	alice = basic("alice", "alice-pw2")
	e.ok(e.do(alice, "GET", "/v1/users/alice/api-keys", nil), http.StatusOK, nil)
	e.ok(e.do(acme, "PUT", "/v1/users/bob/password", secapi.SetPasswordRequest{Password: "bob-pw2"}), http.StatusNoContent, nil)
	stored, _ = e.srv.Store.GetUser(secapitest.Context(t), "bob")
	if len(stored.Scram) != 1 {
		t.Fatalf("bob's new password added mechanisms: %v", stored.Scram)
	}
	e.fails(e.do(globex, "PUT", "/v1/users/bob/password", secapi.SetPasswordRequest{Password: "x"}), http.StatusForbidden, "forbidden", `not "acme"`)
	e.fails(e.do(basic("bob", "bob-pw2"), "PUT", "/v1/users/alice/password", secapi.SetPasswordRequest{Password: "x"}), http.StatusForbidden, "forbidden")
	e.fails(e.do(acme, "PUT", "/v1/users/bob/password", secapi.SetPasswordRequest{}), http.StatusBadRequest, "bad_request", "field password is required")
	e.fails(e.do(acme, "PUT", "/v1/users/nobody/password", secapi.SetPasswordRequest{Password: "x"}), http.StatusNotFound, "user_not_found", `"nobody"`)

	// A super user in a tenant is out of its tenant admin's reach.
	e.ok(e.do(admin, "POST", "/v1/users", secapi.CreateUserRequest{Name: "root2", Tenant: "acme", Password: "p", Role: "super"}), http.StatusCreated, nil)
	e.fails(e.do(acme, "PUT", "/v1/users/root2/password", secapi.SetPasswordRequest{Password: "mine"}), http.StatusForbidden, "forbidden", "is a super user")
	e.fails(e.do(acme, "DELETE", "/v1/users/root2", nil), http.StatusForbidden, "forbidden", "is a super user")

	// Deleting.
	e.fails(e.do(globex, "DELETE", "/v1/users/alice", nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(alice, "DELETE", "/v1/users/bob", nil), http.StatusForbidden, "forbidden")
	e.ok(e.do(acme, "DELETE", "/v1/users/alice", nil), http.StatusNoContent, nil)
	e.fails(e.do(acme, "DELETE", "/v1/users/alice", nil), http.StatusNotFound, "user_not_found", `"alice"`)
	e.fails(e.do(alice, "GET", "/v1/users/alice/api-keys", nil), http.StatusUnauthorized, "unauthenticated")
}

func TestAPIKeys(t *testing.T) {
	e := newEnv(t)
	acme := e.tenantWithAdmin("acme")
	globex := e.tenantWithAdmin("globex")
	alice := e.user(acme, "alice", "acme")
	bob := e.user(acme, "bob", "acme")

	var k secapi.NewAPIKey
	e.ok(e.do(alice, "POST", "/v1/users/alice/api-keys", secapi.CreateAPIKeyRequest{Description: "ci"}), http.StatusCreated, &k)
	if !strings.HasPrefix(k.Key, "sk_"+k.ID+"_") || k.User != "alice" || k.Description != "ci" || k.CreatedMs == 0 {
		t.Fatalf("created %+v", k)
	}
	if strings.Contains(e.log.String(), k.Key) {
		t.Fatal("key logged")
	}
	// The key authenticates as alice, and is never shown again.
	var list secapi.APIKeyList
	r := e.do(bearer(k.Key), "GET", "/v1/users/alice/api-keys", nil)
	e.ok(r, http.StatusOK, &list)
	if len(list.APIKeys) != 1 || list.APIKeys[0].ID != k.ID || list.APIKeys[0].Description != "ci" {
		t.Fatalf("listed %+v", list)
	}
	if strings.Contains(string(r.body), k.Key) || strings.Contains(string(r.body), "hash") {
		t.Fatalf("listing shows the key or its hash: %s", r.body)
	}
	// With no body at all.
	var k2 secapi.NewAPIKey
	e.ok(e.do(acme, "POST", "/v1/users/alice/api-keys", nil), http.StatusCreated, &k2)
	chunked, err := http.NewRequestWithContext(secapitest.Context(t), "POST", e.srv.URL+"/v1/users/bob/api-keys", io.MultiReader())
	if err != nil {
		t.Fatal(err)
	}
	bob(chunked)
	resp, err := e.srv.Client().Do(chunked) // no Content-Length: an empty chunked body
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("an empty chunked body: status %d", resp.StatusCode)
	}

	e.fails(e.do(bob, "GET", "/v1/users/alice/api-keys", nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(bob, "POST", "/v1/users/alice/api-keys", nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(globex, "GET", "/v1/users/alice/api-keys", nil), http.StatusForbidden, "forbidden", `not "acme"`)
	e.fails(e.do(globex, "DELETE", "/v1/api-keys/"+k.ID, nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(bob, "DELETE", "/v1/api-keys/"+k.ID, nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(acme, "POST", "/v1/users/nobody/api-keys", nil), http.StatusNotFound, "user_not_found", `"nobody"`)
	e.fails(e.do(acme, "POST", "/v1/users/alice/api-keys", `{"description":"`+strings.Repeat("d", 1025)+`"}`),
		http.StatusBadRequest, "bad_request", "field description: 1025 bytes")
	e.fails(e.do(acme, "DELETE", "/v1/api-keys/aaaaaaaaaaaaaaaa", nil), http.StatusNotFound, "api_key_not_found")
	e.fails(e.do(acme, "DELETE", "/v1/api-keys/bad%20id", nil), http.StatusBadRequest, "bad_request", "API key id")

	// alice revokes her key: it stops working. Her admin revokes the other.
	e.ok(e.do(bearer(k.Key), "DELETE", "/v1/api-keys/"+k.ID, nil), http.StatusNoContent, nil)
	e.fails(e.do(bearer(k.Key), "GET", "/v1/users/alice/api-keys", nil), http.StatusUnauthorized, "unauthenticated")
	e.ok(e.do(acme, "DELETE", "/v1/api-keys/"+k2.ID, nil), http.StatusNoContent, nil)
	e.ok(e.do(alice, "GET", "/v1/users/alice/api-keys", nil), http.StatusOK, &list)
	if len(list.APIKeys) != 0 {
		t.Fatalf("keys left: %+v", list)
	}
}

func TestACLs(t *testing.T) {
	e := newEnv(t)
	acme := e.tenantWithAdmin("acme")
	globex := e.tenantWithAdmin("globex")
	alice := e.user(acme, "alice", "acme")

	var got secapi.BindingList
	e.ok(e.do(acme, "POST", "/v1/acls", secapi.CreateACLsRequest{Bindings: []secapi.Binding{
		{ResourceType: "topic", ResourceName: "orders", Principal: "User:alice", Operation: "read", Permission: "allow"},
		{ResourceType: "group", ResourceName: "app-", PatternType: "prefixed", Principal: "User:alice", Host: "::ffff:10.0.0.1",
			Operation: "describe", Permission: "deny"},
		{ResourceType: "cluster", Principal: "User:*", Operation: "idempotent-write", Permission: "allow"},
	}}), http.StatusCreated, &got)
	want := []secapi.Binding{
		{Tenant: "acme", ResourceType: "TOPIC", ResourceName: "orders", PatternType: "LITERAL", Principal: "User:alice", Host: "*", Operation: "READ", Permission: "ALLOW"},
		{Tenant: "acme", ResourceType: "GROUP", ResourceName: "app-", PatternType: "PREFIXED", Principal: "User:alice", Host: "10.0.0.1", Operation: "DESCRIBE", Permission: "DENY"},
		{Tenant: "acme", ResourceType: "CLUSTER", ResourceName: "kafka-cluster", PatternType: "LITERAL", Principal: "User:*", Host: "*", Operation: "IDEMPOTENT_WRITE", Permission: "ALLOW"},
	}
	if len(got.Bindings) != len(want) {
		t.Fatalf("created %+v", got)
	}
	for i := range want {
		if got.Bindings[i] != want[i] {
			t.Fatalf("binding %d: %+v, want %+v", i, got.Bindings[i], want[i])
		}
	}
	e.ok(e.do(admin, "POST", "/v1/acls", secapi.CreateACLsRequest{Tenant: "globex", Bindings: []secapi.Binding{
		{ResourceType: "topic", ResourceName: "orders", Principal: "User:carol", Operation: "write", Permission: "allow"},
	}}), http.StatusCreated, nil)

	// Refusals.
	one := func(b secapi.Binding) secapi.CreateACLsRequest {
		return secapi.CreateACLsRequest{Bindings: []secapi.Binding{b}}
	}
	orders := secapi.Binding{ResourceType: "topic", ResourceName: "orders", Principal: "User:alice", Operation: "read", Permission: "allow"}
	e.fails(e.do(acme, "POST", "/v1/acls", secapi.CreateACLsRequest{Tenant: "globex", Bindings: []secapi.Binding{orders}}),
		http.StatusForbidden, "forbidden", `not "globex"`)
	cross := orders
	cross.Tenant = "globex"
	e.fails(e.do(acme, "POST", "/v1/acls", one(cross)), http.StatusForbidden, "forbidden", `not "globex"`)
	e.fails(e.do(alice, "POST", "/v1/acls", one(orders)), http.StatusForbidden, "forbidden", "User:alice")
	e.fails(e.do(admin, "POST", "/v1/acls", secapi.CreateACLsRequest{Tenant: "nope", Bindings: []secapi.Binding{orders}}),
		http.StatusNotFound, "tenant_not_found", "nope")
	for _, tc := range []struct {
		mutate func(*secapi.Binding)
		msg    string
	}{
		{func(b *secapi.Binding) { b.ResourceType = "" }, "bindings[0].resource_type: required"},
		{func(b *secapi.Binding) { b.ResourceType = "queue" }, `bindings[0].resource_type: "queue" is not topic`},
		{func(b *secapi.Binding) { b.ResourceName = "" }, "bindings[0].resource_name: required"},
		{func(b *secapi.Binding) { b.PatternType = "match" }, "pattern type MATCH cannot be stored"},
		{func(b *secapi.Binding) { b.Principal = "alice" }, `bindings[0].principal: "alice" is not of the form User:<name>`},
		{func(b *secapi.Binding) { b.Host = "example.com" }, `bindings[0].host: "example.com" is neither`},
		{func(b *secapi.Binding) { b.Operation = "reed" }, `bindings[0].operation: "reed" is not an operation`},
		{func(b *secapi.Binding) { b.Operation = "cluster-action" }, "resource type TOPIC does not support operation CLUSTER_ACTION"},
		{func(b *secapi.Binding) { b.Permission = "" }, "bindings[0].permission: required"},
		{func(b *secapi.Binding) { b.Permission = "any" }, "permission ANY cannot be stored"},
	} {
		b := orders
		tc.mutate(&b)
		e.fails(e.do(acme, "POST", "/v1/acls", one(b)), http.StatusBadRequest, "bad_request", tc.msg)
	}
	e.fails(e.do(acme, "POST", "/v1/acls", secapi.CreateACLsRequest{}), http.StatusBadRequest, "bad_request", "field bindings is required")

	// Listing.
	list := func(who as, query string) []secapi.Binding {
		t.Helper()
		var l secapi.BindingList
		e.ok(e.do(who, "GET", "/v1/acls"+query, nil), http.StatusOK, &l)
		return l.Bindings
	}
	if n := len(list(acme, "")); n != 3 {
		t.Fatalf("acme lists %d bindings", n)
	}
	if bs := list(acme, "?resource_type=topic&resource_name=orders"); len(bs) != 1 || bs[0].Principal != "User:alice" {
		t.Fatalf("acme topic orders: %+v", bs)
	}
	if bs := list(acme, "?resource_type=group&resource_name=app-orders&pattern_type=match"); len(bs) != 1 || bs[0].ResourceName != "app-" {
		t.Fatalf("match app-orders: %+v", bs)
	}
	if bs := list(admin, ""); len(bs) != 4 {
		t.Fatalf("admin lists %d bindings over every tenant", len(bs))
	}
	if bs := list(admin, "?tenant=globex"); len(bs) != 1 || bs[0].Tenant != "globex" {
		t.Fatalf("admin lists globex: %+v", bs)
	}
	if bs := list(globex, "?principal=User:alice"); len(bs) != 0 {
		t.Fatalf("globex sees acme's bindings: %+v", bs)
	}
	e.fails(e.do(acme, "GET", "/v1/acls?tenant=globex", nil), http.StatusForbidden, "forbidden", `not "globex"`)
	e.fails(e.do(alice, "GET", "/v1/acls", nil), http.StatusForbidden, "forbidden")
	e.fails(e.do(acme, "GET", "/v1/acls?resource-type=topic", nil), http.StatusBadRequest, "bad_request", `unknown query parameter "resource-type"`)
	e.fails(e.do(acme, "GET", "/v1/acls?operation=fly", nil), http.StatusBadRequest, "bad_request", `query parameter operation: "fly"`)

	// Deleting through a filter returns what went.
	e.fails(e.do(acme, "POST", "/v1/acls:delete", `{}`), http.StatusBadRequest, "bad_request", "field filter is required")
	e.fails(e.do(acme, "POST", "/v1/acls:delete", secapi.DeleteACLsRequest{Tenant: "globex", Filter: &secapi.Filter{}}),
		http.StatusForbidden, "forbidden")
	var del secapi.DeletedBindings
	e.ok(e.do(acme, "POST", "/v1/acls:delete", secapi.DeleteACLsRequest{Filter: &secapi.Filter{Principal: "User:alice"}}), http.StatusOK, &del)
	if len(del.Deleted) != 2 {
		t.Fatalf("deleted %+v", del)
	}
	if bs := list(acme, ""); len(bs) != 1 || bs[0].ResourceType != "CLUSTER" {
		t.Fatalf("left in acme: %+v", bs)
	}
	if bs := list(admin, "?tenant=globex"); len(bs) != 1 {
		t.Fatalf("globex lost bindings: %+v", bs)
	}
	e.ok(e.do(acme, "POST", "/v1/acls:delete", secapi.DeleteACLsRequest{Filter: &secapi.Filter{ResourceType: "topic"}}), http.StatusOK, &del)
	if len(del.Deleted) != 0 || del.Deleted == nil {
		t.Fatalf("deleted %+v, want an empty list", del)
	}
}

// TestOpenAPIFragment checks that the fragment the lead merges into the
// API's document describes exactly the routes Register adds.
func TestOpenAPIFragment(t *testing.T) {
	raw, err := os.ReadFile("openapi_fragment.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	secapi.Register(mux, secapi.Deps{Store: (*meta.Store)(nil)})
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			pattern := strings.ToUpper(method) + " " + path
			documented = append(documented, pattern)
			url := strings.NewReplacer("{name}", "x", "{id}", "x").Replace(path)
			_, got := mux.Handler(httptest.NewRequest(strings.ToUpper(method), url, nil))
			if got != pattern {
				t.Errorf("documented %s is served by pattern %q", pattern, got)
			}
		}
	}
	if len(documented) != 18 {
		t.Errorf("the fragment documents %d routes, Register adds 18: %v", len(documented), documented)
	}
}
