package httpapi

// This file owns the public HTTP API's request pipeline, one chain around
// the public mux:
//
//	decode     the route: method and path matched to a pattern (404 and 405
//	           answered here, in JSON), then its path values
//	authenticate  Authorization: Bearer <API key>, Authorization: Basic
//	           (user and password, checked against the user's SCRAM keys),
//	           or a verified client certificate (User:<CN>); the identity
//	           goes into the request's context (auth.WithIdentity)
//	scope      the topic and group names of the path and the body become
//	           internal names of the caller's tenant (names.go; super users
//	           are unscoped), and the scope goes into the context, from
//	           which the handler shows names and messages back
//	authorise  the route's rule (routes.go): operations on the resources
//	           the path and, for a few routes, the JSON body name, decided
//	           by Security.Authorize in the caller's tenant
//	admit      Admitter (quota.go: a publish or fetch of a tenant over its
//	           rate is answered 429 with Retry-After; what is served is
//	           charged to the tenant's meters)
//	handle     the route's handler
//	respond    the handler's answer, or the stage's JSON error
//
// The first two stages run in pipeline.ServeHTTP, around the mux; the
// mux sets the path values, and every public route is registered through
// routeMux, which puts the last stages (guarded) in front of its handler.
//
// Invariant: no handler checks identity on its own. A handler runs only
// after its route's rule allowed the request; a listing handler filters
// what it lists with the function the authorise stage put in the context
// (visibleFrom), which lists nothing when there is none.
// Invariant: every public route has a rule (routeMux panics at start-up on
// one without, and on a rule whose route was never registered); a route
// marked open (health, metrics, the API description) skips every stage.
// Invariant: with security off, a request without credentials is the
// anonymous principal and every operation is allowed; credentials that are
// given are checked all the same (so the admin API works in development).
//
// The routes the other brokers call (forwarding, listings, replication)
// are on the inter-broker listener and not behind this pipeline.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/listener"
)

// Security is what the pipeline needs of the broker's security state;
// *security.Guard has it.
type Security interface {
	// Enabled reports whether requests must authenticate and are authorised.
	Enabled() bool
	// CheckAPIKey and CheckBasic check credentials and return their
	// user's identity.
	CheckAPIKey(key string) (auth.Identity, error)
	CheckBasic(user, password string) (auth.Identity, error)
	// Identity is the identity of a principal authenticated otherwise (a
	// client certificate).
	Identity(p auth.Principal) auth.Identity
	// Authorize decides one operation on one resource of the identity's
	// tenant.
	Authorize(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision
}

// Admitter is the admit stage: it may refuse a request an identity is
// allowed to make (a quota, fair scheduling). A nil error admits; an
// *APIError is answered as it is, a *Throttled as 429 with Retry-After,
// any other error as 429. Served is told, once the handler is done, how
// many body bytes the response had.
type Admitter interface {
	Admit(r *http.Request, id auth.Identity) error
	Served(r *http.Request, id auth.Identity, written int64)
}

// admitAll is the admit stage of a broker without quotas.
type admitAll struct{}

func (admitAll) Admit(*http.Request, auth.Identity) error   { return nil }
func (admitAll) Served(*http.Request, auth.Identity, int64) {}

// openSecurity is the Security of a Server built without one: security
// off, everything allowed, credentials refused (there is nothing to check
// them against).
type openSecurity struct{}

func (openSecurity) Enabled() bool { return false }
func (openSecurity) CheckAPIKey(string) (auth.Identity, error) {
	return auth.Identity{}, errors.New("no credentials are configured")
}
func (openSecurity) CheckBasic(string, string) (auth.Identity, error) {
	return auth.Identity{}, errors.New("no credentials are configured")
}
func (openSecurity) Identity(p auth.Principal) auth.Identity { return auth.Identity{Principal: p} }
func (openSecurity) Authorize(auth.Identity, string, acl.Operation, acl.ResourceType, string) acl.Decision {
	return acl.Decision{Allowed: true, Reason: "security is off"}
}

// authRealm names the API in WWW-Authenticate challenges.
const authRealm = `realm="sluice"`

// pipeline is the public listener's handler: decode and authenticate
// around the mux, whose routes run the rest (guarded).
type pipeline struct {
	b   *Server
	mux *http.ServeMux
}

func (p pipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := p.mux.Handler(r)
	if pattern == "" {
		p.noRoute(w, r, h)
		return
	}
	if rule, ok := publicRoutes[pattern]; ok && rule.open {
		p.mux.ServeHTTP(w, r)
		return
	}
	id, err := p.b.authenticate(r)
	if err != nil {
		w.Header().Add("WWW-Authenticate", "Bearer "+authRealm)
		w.Header().Add("WWW-Authenticate", "Basic "+authRealm+`, charset="UTF-8"`)
		p.b.writeError(w, r, &APIError{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: err.Error()})
		return
	}
	p.mux.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
}

// noRoute answers a request the mux has no pattern for: the mux's own 404
// or 405 (with its Allow header) in JSON, anything else (a redirect) as
// the mux decides.
func (p pipeline) noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	ae := &APIError{Status: http.StatusNotFound, Code: "not_found",
		Message: fmt.Sprintf("no such endpoint: %s %s; GET /v1/openapi.json lists them", r.Method, r.URL.Path)}
	if rec.status == http.StatusMethodNotAllowed {
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		ae = &APIError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, allow)}
	} else if rec.status != http.StatusNotFound && rec.status != 0 {
		p.mux.ServeHTTP(w, r)
		return
	}
	p.b.writeError(w, r, ae)
}

// credentials is what an Authorization header carries.
type credentials struct {
	bearer         string // an API key
	user, password string // HTTP Basic
}

// parseAuthorization reads one Authorization header: "Bearer <token>" or
// "Basic <base64(user:password)>" (RFC 6750, RFC 7617; the scheme is
// case-insensitive). The password is everything after the first colon.
func parseAuthorization(h string) (credentials, error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(h), " ")
	rest = strings.TrimSpace(rest)
	if !ok || rest == "" {
		return credentials{}, errors.New("the Authorization header is not \"Bearer <API key>\" or \"Basic <credentials>\"")
	}
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return credentials{bearer: rest}, nil
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return credentials{}, errors.New("the Basic credentials are not base64")
		}
		user, password, ok := strings.Cut(string(raw), ":")
		if !ok || user == "" {
			return credentials{}, errors.New("the Basic credentials are not user:password")
		}
		return credentials{user: user, password: password}, nil
	}
	return credentials{}, fmt.Errorf("the Authorization scheme %.20q is neither Bearer nor Basic", scheme)
}

// authenticate finds who sent r: the Authorization header if there is
// one, else a verified client certificate, else (security off only) the
// anonymous principal. Its errors are told to the client as they are, so
// they never say whether a user or key exists.
func (b *Server) authenticate(r *http.Request) (auth.Identity, error) {
	switch hs := r.Header.Values("Authorization"); len(hs) {
	case 0:
	case 1:
		c, err := parseAuthorization(hs[0])
		if err != nil {
			return auth.Identity{}, err
		}
		var id auth.Identity
		if c.bearer != "" {
			id, err = b.sec.CheckAPIKey(c.bearer)
		} else {
			id, err = b.sec.CheckBasic(c.user, c.password)
		}
		if err != nil {
			return auth.Identity{}, errors.New("invalid credentials")
		}
		return id, nil
	default:
		return auth.Identity{}, errors.New("more than one Authorization header")
	}
	if r.TLS != nil {
		if user, ok := listener.PeerPrincipal(*r.TLS); ok {
			return b.sec.Identity(auth.Principal{User: user}), nil
		}
	}
	if !b.sec.Enabled() {
		return auth.Identity{Principal: auth.Anonymous}, nil
	}
	return auth.Identity{}, errors.New("this call needs credentials: an API key (Authorization: Bearer), a user and password (Authorization: Basic), or a client certificate")
}

// routeMux registers the public routes, each behind its rule's stages.
type routeMux struct {
	b    *Server
	mux  *http.ServeMux
	seen map[string]bool // patterns registered
}

func (m routeMux) HandleFunc(pattern string, h http.HandlerFunc) { m.Handle(pattern, h) }

// Handle registers h for pattern behind the stages of its rule; a pattern
// without a rule is a wiring mistake, found at start-up.
func (m routeMux) Handle(pattern string, h http.Handler) {
	rule, ok := publicRoutes[pattern]
	if !ok {
		panic("httpapi: public route " + pattern + " has no rule in publicRoutes")
	}
	m.seen[pattern] = true
	m.mux.Handle(pattern, m.b.guarded(rule, h))
}

// checkAllRegistered panics if a rule names a route nobody registered (a
// renamed route would otherwise lose its rule silently).
func (m routeMux) checkAllRegistered() {
	for pattern := range publicRoutes {
		if !m.seen[pattern] {
			panic("httpapi: publicRoutes has a rule for " + pattern + ", which is not registered")
		}
	}
}

// guarded runs the authorise and admit stages of rule, then h.
func (b *Server) guarded(rule routeRule, h http.Handler) http.Handler {
	if rule.open {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := auth.IdentityFrom(r.Context())
		if !ok {
			// Only the pipeline reaches a guarded route, and it always
			// sets an identity; refuse rather than guess.
			b.writeError(w, r, &APIError{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the request was not authenticated"})
			return
		}
		r, err := b.scopeRequest(w, r, rule, id)
		if err != nil {
			b.writeError(w, r, err)
			return
		}
		r, err = b.authorise(w, r, rule, id)
		if err != nil {
			b.writeError(w, r, err)
			return
		}
		if err := b.admit.Admit(r, id); err != nil {
			var ae *APIError
			if !errors.As(err, &ae) {
				setRetryAfter(w, err)
				err = &APIError{Status: http.StatusTooManyRequests, Code: "throttled", Message: err.Error()}
			}
			b.writeError(w, r, err)
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		b.admit.Served(r, id, cw.n)
	})
}

// visibleKey is the context key of a listing's filter.
type visibleKey struct{}

// visibleFrom is the filter of the names a listing may show, set by the
// authorise stage; without one it shows nothing.
func visibleFrom(ctx context.Context) func(name string) bool {
	if f, ok := ctx.Value(visibleKey{}).(func(string) bool); ok {
		return f
	}
	return func(string) bool { return false }
}

// clientHost is the IP address a request came from, for host-scoped ACLs.
func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bufferBody reads r's body (bounded as the handlers bound it) and gives r
// a new reader over the same bytes, so that the stage and the handler
// decode the same request.
func bufferBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBody))
	if err != nil {
		return nil, apierr.DecodeError(err, maxHTTPBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return raw, nil
}
