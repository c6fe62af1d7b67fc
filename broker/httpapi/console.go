package httpapi

// This file owns the route hook of the operator console (broker/console):
// GET /ui, GET and POST (its redrive form) under /ui/ go to the handler the
// console's mount returns, behind the pipeline's authentication (a route
// that needs an identity and names nothing: the console asks the API as the
// caller, so each call is authorised and scoped as the caller's own).
//
// Invariant: the system handler, which acts as the broker itself (a super
// identity, unscoped), is given to the console's mount only; it is never
// reachable from a socket.

import (
	"net/http"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// ConsoleMount returns the console's handler given api, the public
// pipeline (a request is authenticated by its own credentials), and
// system, the routes behind the pipeline called as the broker itself.
type ConsoleMount func(api, system http.Handler) http.Handler

// consoleIdentity is who the system handler's requests are.
var consoleIdentity = auth.Identity{Principal: auth.Principal{Tenant: meta.DefaultTenant, User: "sluice-console"}, Role: auth.RoleSuper}

// SetConsole serves the console at /ui (before Handler); else /ui is 404.
func (b *Server) SetConsole(m ConsoleMount) { b.console = m }

// registerConsole adds /ui and /ui/ to mux, whose pipeline is p.
func (b *Server) registerConsole(mux routeMux, p pipeline) {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.writeError(w, r, &APIError{Status: http.StatusNotFound, Code: "not_found", Message: "this broker serves no console"})
	})
	if b.console != nil {
		system := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mux.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), consoleIdentity)))
		})
		h = b.console(p, system)
	}
	mux.Handle("GET /ui", h)
	mux.Handle("GET /ui/", h)
	mux.Handle("POST /ui/", h)
}
