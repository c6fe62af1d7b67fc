package console

// This file owns the Console: its configuration, how it is mounted on the
// public HTTP listener (Mount, through httpapi.SetConsole), the routing of
// /ui, the embedded assets and templates, and the page frame every page
// shares (who is signed in, whether they are an admin, the navigation).
//
// Invariant: every /ui request reached the handler through the API's
// pipeline, which authenticated it (a 401 with WWW-Authenticate Basic, so a
// browser asks for a user and password, when security is on and none was
// given); the console reads the identity from the request's context and
// asks the API with the request's own credentials.
// Invariant: a GET changes nothing; the one write, a redrive of dead
// letters, is a POST checked as redrive.go says.
//
// The Console's fields are set by New and Mount before the listener
// serves; History is safe from any goroutine.

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
)

//go:embed assets
var assets embed.FS

// Config configures a Console.
type Config struct {
	Node    *node.Node     // this broker's state: tier pages, tenants' metrics
	Logger  zerolog.Logger // the console's logger
	History HistoryConfig  // the lag charts' history
	// Now is the clock of the sampler and the pages; time.Now when nil.
	Now func() time.Time
	// TierGrace is the brokers' grace for objects not yet named (the
	// orphan listing's age rule); 0 lists every unnamed object.
	TierGrace time.Duration
	// HealthTimeout bounds asking the brokers for their health on the
	// cluster page (health.go); 0 is one second.
	HealthTimeout time.Duration
}

// Console serves /ui.
type Console struct {
	cfg     Config
	log     zerolog.Logger
	history *History
	pages   map[string]*template.Template
	static  fs.FS
	api     http.Handler // the API's pipeline (the caller's credentials)
	system  http.Handler // the API as the broker itself (the sampler)
	csrfKey [32]byte     // the forms' token key (redrive.go)
}

// New returns a console; Mount gives it the API.
func New(cfg Config) (*Console, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = defaultHealthTimeout
	}
	c := &Console{cfg: cfg, log: cfg.Logger.With().Str("component", "console").Logger(),
		history: NewHistory(cfg.History), pages: map[string]*template.Template{}}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("console: assets: %w", err)
	}
	c.static = static
	if _, err := rand.Read(c.csrfKey[:]); err != nil {
		return nil, fmt.Errorf("console: form key: %w", err)
	}
	pages, err := fs.Glob(assets, "assets/templates/page_*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", p)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[strings.TrimSuffix(strings.TrimPrefix(path.Base(p), "page_"), ".html")] = t
	}
	return c, nil
}

// History is the console's lag history.
func (c *Console) History() *History { return c.history }

// Mount is the handler of /ui and /ui/ (httpapi.SetConsole calls it): api
// is the API's pipeline, system the API as the broker itself.
func (c *Console) Mount(api, system http.Handler) http.Handler {
	c.api, c.system = api, system
	return http.HandlerFunc(c.serve)
}

// page is what every page template gets.
type page struct {
	Title    string
	Nav      string // which navigation entry is current
	User     string // "User:alice (tenant acme)"
	Admin    bool   // a super user (or security off): every tenant, admin links
	CanWrite bool   // the caller may use the forms (redrive.go); read-only otherwise
	NodeID   int32
	Error    string // a failure of the page's main answer, shown at the top
	Notes    []string
	NowMs    int64
	Content  any
}

// request is one console request being served.
type request struct {
	c     *Console
	w     http.ResponseWriter
	r     *http.Request
	id    auth.Identity
	admin bool
	api   api
}

// internal is the internal name of a name the caller gave (a super user
// names things by their internal names already).
func (q *request) internal(name string) string {
	if q.id.IsSuper() {
		return name
	}
	return node.QualifyName(q.id.Principal.Tenant, name)
}

func (c *Console) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusFound)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/ui/")
	if strings.HasPrefix(rest, "assets/") {
		c.serveAsset(w, r, strings.TrimPrefix(rest, "assets/"))
		return
	}
	id, ok := auth.IdentityFrom(r.Context())
	if !ok {
		http.Error(w, "not authenticated", http.StatusUnauthorized)
		return
	}
	q := &request{c: c, w: w, r: r, id: id, api: api{h: c.api, orig: r},
		admin: id.IsSuper() || id.Principal == auth.Anonymous}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if r.Method == http.MethodPost {
		q.post(parts)
		return
	}
	switch {
	case rest == "":
		q.cluster()
	case parts[0] == "topics" && len(parts) == 1:
		q.topics()
	case parts[0] == "topics" && len(parts) == 2:
		q.topic(parts[1])
	case parts[0] == "groups" && len(parts) == 1:
		q.groups()
	case parts[0] == "groups" && len(parts) == 2:
		q.group(parts[1])
	case parts[0] == "tier" && len(parts) == 2 && parts[1] == "orphans":
		q.orphans()
	case parts[0] == "tier" && len(parts) == 3:
		q.tier(parts[1], parts[2])
	case parts[0] == "tenants" && len(parts) == 1:
		q.tenants()
	case parts[0] == "dlq" && len(parts) == 1:
		q.dlq()
	case parts[0] == "redrives" && len(parts) == 2:
		q.redrive(parts[1])
	case parts[0] == "messages" && len(parts) == 2:
		q.messages(parts[1])
	default:
		q.render(http.StatusNotFound, "error", page{Title: "Not found", Error: "No console page at " + r.URL.Path + "."})
	}
}

// serveAsset serves an embedded file; never a template.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || strings.HasPrefix(name, "templates/") || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	http.ServeFileFS(w, r, c.static, name)
}

// render writes a page, status first; a template failure is logged and
// answered 500 (nothing of the page was written yet: it is rendered into
// a buffer).
func (q *request) render(status int, name string, p page) {
	p.User = fmt.Sprintf("%s (tenant %s)", q.id.Principal, q.id.Principal.Tenant)
	if q.id.IsSuper() {
		p.User = fmt.Sprintf("%s (super user)", q.id.Principal)
	}
	p.Admin, p.CanWrite = q.admin, q.canWrite()
	if q.c.cfg.Node != nil {
		p.NodeID = q.c.cfg.Node.Cfg.NodeID
	}
	p.NowMs = q.c.cfg.Now().UnixMilli()
	if p.Nav == "" {
		p.Nav = name
	}
	t, ok := q.c.pages[name]
	if !ok {
		t = q.c.pages["error"]
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		q.c.log.Error().Err(err).Str("page", name).Msg("console page failed to render")
		http.Error(q.w, "the page failed to render", http.StatusInternalServerError)
		return
	}
	h := q.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	q.w.WriteHeader(status)
	_, _ = q.w.Write(buf.Bytes())
}

// fail renders the error page for err: the API's status when it is one.
func (q *request) fail(title string, err error) {
	status := http.StatusBadGateway
	var ae *apiError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	if status >= 500 {
		q.c.log.Warn().Err(err).Str("path", q.r.URL.Path).Msg("console page failed")
	}
	q.render(status, "error", page{Title: title, Error: err.Error()})
}

// ctx is the request's context.
func (q *request) ctx() context.Context { return q.r.Context() }
