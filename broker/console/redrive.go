package console

// This file owns the console's one write: dead-letter redrive (issue 23).
// The DLQ page carries a form per dead-letter topic (target topic, an
// optional scope: offset range, key, error class; a rate); its POST is
// turned into POST /v1/dlq/{dlq}/redrives asked in process as the caller,
// and answered with a redirect to the job's page, /ui/redrives/{id}, which
// shows GET /v1/redrives/{id} (console.js refreshes it while the job runs)
// and offers cancel (POST /v1/redrives/{id}/cancel).
//
//	POST /ui/dlq/{dlq}/redrives   form: csrf, target, from_offset?, to_offset?,
//	                              message_key?, error_class?, rate?
//	                              → 303 /ui/redrives/{id}
//	GET  /ui/redrives/{id}        the job's page
//	POST /ui/redrives/{id}/cancel form: csrf → 303 /ui/redrives/{id}
//
// Invariant: a console POST changes state only when all of these hold:
// the caller may write in the console (a super user, a tenant admin, or
// anyone when security is off; everyone else is read-only, as the frame
// says); the request is same-origin (an Origin, or without one a Referer,
// naming another host is refused; Sec-Fetch-Site, when sent, must be
// same-origin); and its csrf field is the token the console rendered for
// the same credentials (an HMAC of the Authorization header under a key
// made at start, so a page of another site can neither read nor forge
// it). Then the API authorises the call itself (READ on the DLQ, WRITE on
// the target; its tenant scope), exactly as when the caller asks it.
// Invariant: a refusal is a page with a 4xx status and a log line, never a
// write.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxForm bounds a console form's body.
const maxForm = 64 << 10

// redriveAnswer is a job as GET /v1/redrives/{id} answers it.
type redriveAnswer struct {
	ID     string `json:"id"`
	DLQ    string `json:"dlq"`
	Target string `json:"target"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Scope  struct {
		FromOffset int64   `json:"from_offset"`
		ToOffset   int64   `json:"to_offset"`
		Key        *string `json:"message_key"`
		KeyBase64  *string `json:"key_base64"`
		Class      string  `json:"error_class"`
	} `json:"scope"`
	Rate       int    `json:"rate"`
	CreatedMs  int64  `json:"created_ms"`
	FinishedMs int64  `json:"finished_ms"`
	Runner     *int32 `json:"runner"`
	Total      int64  `json:"total"`
	Decided    int64  `json:"decided"`
	Redriven   int64  `json:"redriven"`
	Deduped    int64  `json:"deduped"`
	Skipped    int64  `json:"skipped"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Start     int64 `json:"start"`
		End       int64 `json:"end"`
		Cursor    int64 `json:"cursor"`
		Redriven  int64 `json:"redriven"`
		Deduped   int64 `json:"deduped"`
		Skipped   int64 `json:"skipped"`
	} `json:"partitions"`
}

// Running reports whether the job is still running.
func (r redriveAnswer) Running() bool { return r.State == "running" }

// redriveStart is the body of POST /v1/dlq/{dlq}/redrives the form makes.
type redriveStart struct {
	Target     string  `json:"target"`
	FromOffset int64   `json:"from_offset,omitempty"`
	ToOffset   int64   `json:"to_offset,omitempty"`
	Key        *string `json:"message_key,omitempty"`
	Class      string  `json:"error_class,omitempty"`
	Rate       int     `json:"rate,omitempty"`
}

// canWrite reports whether the caller may use the console's forms.
func (q *request) canWrite() bool { return q.admin || q.id.IsTenantAdmin() }

// csrfToken is the form token of a request's credentials.
func (c *Console) csrfToken(r *http.Request) string {
	m := hmac.New(sha256.New, c.csrfKey[:])
	m.Write([]byte("sluice-console-form\x00"))
	m.Write([]byte(r.Header.Get("Authorization")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// crossSite is why a POST is not same-origin, "" when it is.
func crossSite(r *http.Request) string {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return "Sec-Fetch-Site is " + s
	}
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return "" // not a browser's cross-site request: the token decides
	}
	u, err := url.Parse(from)
	if err != nil || u.Host != r.Host {
		return fmt.Sprintf("the form came from %q, not %q", from, r.Host)
	}
	return ""
}

// post serves a console POST: the checks of the file's invariant, then
// the form's action.
func (q *request) post(parts []string) {
	refuse := func(status int, why string) {
		q.c.log.Info().Str("path", q.r.URL.Path).Str("principal", q.id.Principal.String()).Str("reason", why).Msg("console form refused")
		q.render(status, "error", page{Title: "Refused", Error: why})
	}
	if !q.canWrite() {
		refuse(http.StatusForbidden, "The console is read-only for you: only super users and tenant admins may use its forms.")
		return
	}
	if why := crossSite(q.r); why != "" {
		refuse(http.StatusForbidden, "Cross-site form refused: "+why+".")
		return
	}
	q.r.Body = http.MaxBytesReader(q.w, q.r.Body, maxForm)
	if err := q.r.ParseForm(); err != nil {
		refuse(http.StatusBadRequest, "The form could not be read: "+err.Error())
		return
	}
	if !hmac.Equal([]byte(q.r.PostForm.Get("csrf")), []byte(q.c.csrfToken(q.r))) {
		refuse(http.StatusForbidden, "The form's token is missing or stale: reload the page and submit it again.")
		return
	}
	switch {
	case len(parts) == 3 && parts[0] == "dlq" && parts[2] == "redrives":
		q.startRedrive(parts[1])
	case len(parts) == 3 && parts[0] == "redrives" && parts[2] == "cancel":
		q.cancelRedrive(parts[1])
	default:
		refuse(http.StatusNotFound, "No console form at "+q.r.URL.Path+".")
	}
}

// redriveForm is the API's start request of a submitted form.
func redriveForm(f url.Values) (redriveStart, error) {
	req := redriveStart{Target: strings.TrimSpace(f.Get("target")), Class: strings.TrimSpace(f.Get("error_class"))}
	num := func(field string, into *int64) error {
		v := strings.TrimSpace(f.Get(field))
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s %q: want a whole number, 0 or more", field, v)
		}
		*into = n
		return nil
	}
	var rate int64
	for field, into := range map[string]*int64{"from_offset": &req.FromOffset, "to_offset": &req.ToOffset, "rate": &rate} {
		if err := num(field, into); err != nil {
			return req, err
		}
	}
	if rate > 1<<30 {
		return req, fmt.Errorf("rate %d is too large", rate)
	}
	req.Rate = int(rate)
	if f.Get("message_key") != "" { // an empty key cannot be asked for here (the API can)
		k := f.Get("message_key")
		req.Key = &k
	}
	return req, nil
}

func (q *request) startRedrive(dlq string) {
	req, err := redriveForm(q.r.PostForm)
	if err != nil {
		q.render(http.StatusBadRequest, "error", page{Title: "Redrive " + dlq, Error: err.Error()})
		return
	}
	var job redriveAnswer
	if err := q.api.post(q.ctx(), "/v1/dlq/"+escape(dlq)+"/redrives", req, http.StatusAccepted, &job); err != nil {
		q.fail("Redrive "+dlq, err)
		return
	}
	q.c.log.Info().Str("redrive", job.ID).Str("dlq", dlq).Str("target", req.Target).Str("principal", q.id.Principal.String()).Msg("redrive started from the console")
	http.Redirect(q.w, q.r, "/ui/redrives/"+escape(job.ID), http.StatusSeeOther)
}

func (q *request) cancelRedrive(id string) {
	var job redriveAnswer
	if err := q.api.post(q.ctx(), "/v1/redrives/"+escape(id)+"/cancel", nil, http.StatusOK, &job); err != nil {
		q.fail("Redrive "+id, err)
		return
	}
	q.c.log.Info().Str("redrive", id).Str("principal", q.id.Principal.String()).Msg("redrive cancelled from the console")
	http.Redirect(q.w, q.r, "/ui/redrives/"+escape(id), http.StatusSeeOther)
}

// redrivePage is a job page's content.
type redrivePage struct {
	Job      redriveAnswer
	CanWrite bool
	CSRF     string
}

func (q *request) redrive(id string) {
	var job redriveAnswer
	if err := q.api.get(q.ctx(), "/v1/redrives/"+escape(id), nil, &job); err != nil {
		q.fail("Redrive "+id, err)
		return
	}
	q.render(http.StatusOK, "redrive", page{Title: "Redrive " + id, Nav: "dlq",
		Content: redrivePage{Job: job, CanWrite: q.canWrite(), CSRF: q.c.csrfToken(q.r)}})
}
