// Package secapitest runs the security admin API for tests: a metadata
// store on a real embedded etcd member, the routes of secapi, and in front
// of them a stand-in for the HTTP pipeline's authentication stage that
// checks real credentials against the store (a Bearer API key, or HTTP
// Basic against the user's SCRAM keys) and puts the identity in the
// request's context. It exists so that secapi's tests and sluicectl's
// end-to-end tests exercise the same server; production code must not
// import it (its authentication has no failure delay and no TLS).
package secapitest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/freeport"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/secapi"
	"github.com/sluice-mq/sluice/meta"
)

// Timeout bounds every blocking call of a test that uses this package.
const Timeout = 30 * time.Second

// AdminUser and AdminPassword are the super user Start creates in
// meta.SystemTenant.
const (
	AdminUser     = "admin"
	AdminPassword = "admin-secret"
)

// Server is a running API.
type Server struct {
	*httptest.Server
	Store *meta.Store
}

// Start opens a store on a fresh embedded etcd member, creates the
// reserved tenants and the super user AdminUser, and serves the API on
// 127.0.0.1. Everything is closed when the test ends.
func Start(t testing.TB, log zerolog.Logger) *Server {
	t.Helper()
	ctx := Context(t)
	st, err := meta.Open(ctx, meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeAddr(t), ListenPeer: freeAddr(t), StartTimeout: Timeout}, zerolog.Nop())
	if err != nil {
		t.Fatalf("meta.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	for _, tn := range []string{meta.SystemTenant, meta.DefaultTenant} {
		if _, err := st.EnsureTenant(ctx, tn); err != nil {
			t.Fatalf("EnsureTenant(%s): %v", tn, err)
		}
	}
	SeedUser(t, st, AdminUser, meta.SystemTenant, meta.RoleSuper, AdminPassword)
	mux := http.NewServeMux()
	secapi.Register(mux, secapi.Deps{Store: st, Logger: log})
	srv := httptest.NewServer(Authenticate(st, mux))
	t.Cleanup(srv.Close)
	return &Server{Server: srv, Store: st}
}

// Context is a context that ends with the test or after Timeout.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// SeedUser stores a user with both SCRAM credentials of password, straight
// into the store (how the first operator exists before any API call).
func SeedUser(t testing.TB, st *meta.Store, name, tenant, role, password string) {
	t.Helper()
	scram := map[string]meta.ScramKeys{}
	for _, m := range []string{meta.ScramSHA256, meta.ScramSHA512} {
		c, err := auth.NewScramCredential(m, password, auth.DefaultIterations)
		if err != nil {
			t.Fatalf("NewScramCredential: %v", err)
		}
		scram[m] = meta.ScramKeys{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	}
	if _, err := st.CreateUser(Context(t), meta.User{Name: name, Tenant: tenant, Role: role, Scram: scram}); err != nil {
		t.Fatalf("CreateUser(%s): %v", name, err)
	}
}

// Authenticate is the stand-in for the pipeline's authentication stage:
// without an Authorization header the request goes on without an
// identity; with one that checks out, with the user's identity (its
// tenant and stored role); with one that does not, it is answered 401.
func Authenticate(st *meta.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		u, err := check(r.Context(), st, r)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
				"code": "unauthenticated", "message": err.Error()}})
			return
		}
		id := auth.Identity{Principal: auth.Principal{Tenant: u.Tenant, User: u.Name}, Role: u.Role}
		next.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

var errBadCredentials = errors.New("invalid credentials")

func check(ctx context.Context, st *meta.Store, r *http.Request) (meta.User, error) {
	if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		id, err := auth.ParseAPIKey(key)
		if err != nil {
			return meta.User{}, err
		}
		k, err := st.GetAPIKey(ctx, id)
		if err != nil || !auth.CheckAPIKey(key, k.Hash) {
			return meta.User{}, errBadCredentials
		}
		return st.GetUser(ctx, k.User)
	}
	name, password, ok := r.BasicAuth()
	if !ok {
		return meta.User{}, errors.New("the Authorization header is neither Bearer nor Basic")
	}
	lookup := func(mechanism, user string) (auth.ScramCredential, string, bool) {
		u, err := st.GetUser(ctx, user)
		k, has := u.Scram[mechanism]
		if err != nil || !has {
			return auth.ScramCredential{}, "", false
		}
		return auth.ScramCredential{Mechanism: mechanism, Salt: k.Salt, Iterations: k.Iterations,
			StoredKey: k.StoredKey, ServerKey: k.ServerKey}, u.Tenant, true
	}
	if _, err := auth.CheckBasic(lookup, name, password); err != nil {
		return meta.User{}, err
	}
	return st.GetUser(ctx, name)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Must(t)
}
