package objapi

// objapi.go owns the routes, their decoding and their answers.
//
// Invariant: every handler reads the caller's tenant from the identity the
// pipeline set before anything else; without one it answers 401.
// Invariant: every failure reaches the client through writeError, logged
// once (DEBUG for 4xx, WARN for 5xx).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
)

// Routes are the patterns Register adds, for the pipeline's route table.
// POST /v1/uploads/{id} serves "{id}:complete" (a mux wildcard is a whole
// segment).
var Routes = []string{
	"POST /v1/uploads", "PUT /v1/uploads/{id}", "POST /v1/uploads/{id}", "DELETE /v1/uploads/{id}",
	"GET /v1/objects/{ref}",
}

// maxBeginBody bounds POST /v1/uploads's body.
const maxBeginBody = 16 << 10

// Service is what the API needs of broker/largeobj; *largeobj.Service has it.
type Service interface {
	Begin(ctx context.Context, req largeobj.BeginRequest) (largeobj.Session, error)
	PutPart(ctx context.Context, tenant, id string, off int64, body io.Reader, n int64) (int64, error)
	Complete(ctx context.Context, tenant, id string) (largeobj.Completed, error)
	Abort(ctx context.Context, tenant, id string) error
	Describe(ctx context.Context, tenant, id string) (ref.Ref, error)
	Open(ctx context.Context, tenant, id string, off, n int64) (io.ReadCloser, int64, error)
}

var _ Service = (*largeobj.Service)(nil)

// Deps is what the API runs with.
type Deps struct {
	Service Service
	// TopicExists reports whether a topic (its internal name, as the
	// pipeline rewrote it) exists; nil: every topic does.
	TopicExists func(ctx context.Context, topic string) bool
	Logger      zerolog.Logger
}

type api struct {
	svc    Service
	exists func(ctx context.Context, topic string) bool
	log    zerolog.Logger
}

// Register adds Routes to mux. It panics without a Service.
func Register(mux *http.ServeMux, d Deps) {
	if d.Service == nil {
		panic("objapi: Register without a Service")
	}
	a := &api{svc: d.Service, exists: d.TopicExists, log: d.Logger.With().Str("component", "objapi").Logger()}
	if a.exists == nil {
		a.exists = func(context.Context, string) bool { return true }
	}
	mux.HandleFunc("POST /v1/uploads", a.begin)
	mux.HandleFunc("PUT /v1/uploads/{id}", a.put)
	mux.HandleFunc("POST /v1/uploads/{id}", a.complete)
	mux.HandleFunc("DELETE /v1/uploads/{id}", a.abort)
	mux.HandleFunc("GET /v1/objects/{ref}", a.download)
}

// BeginRequest is the body of POST /v1/uploads. It is exported for the
// pipeline's authorise stage, which decodes it to read the topic.
type BeginRequest struct {
	Topic       string `json:"topic"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"content_type,omitempty"`
	KeyID       string `json:"enc_key_id,omitempty"`
	Algorithm   string `json:"enc_alg,omitempty"`
}

// DecodeBegin reads a BeginRequest: one JSON object, no unknown fields, no
// trailing data, a topic, size and sha256 present.
// A failure is an *apierr.Error (400, or 413 over maxBeginBody) in the
// words of the rest of the API (apierr.Decode).
func DecodeBegin(r io.Reader) (BeginRequest, error) {
	var req BeginRequest
	if err := apierr.Decode(r, &req, maxBeginBody); err != nil {
		return BeginRequest{}, err
	}
	switch {
	case req.Topic == "":
		return BeginRequest{}, apierr.BadRequest("topic is required")
	case req.Size <= 0:
		return BeginRequest{}, apierr.BadRequest("size must be a positive number of bytes")
	case req.SHA256 == "":
		return BeginRequest{}, apierr.BadRequest("sha256 is required: the payload's SHA-256, 64 lowercase hex digits")
	}
	return req, nil
}

// SessionResponse answers POST /v1/uploads.
type SessionResponse struct {
	ID             string                   `json:"id"`
	ExpiresAt      time.Time                `json:"expires_at"`
	PartSize       int64                    `json:"part_size"`
	PutURL         string                   `json:"put_url"`
	CompleteURL    string                   `json:"complete_url"`
	PresignedParts []largeobj.PresignedPart `json:"presigned_parts,omitempty"`
}

// CompletedResponse answers POST /v1/uploads/{id}:complete.
type CompletedResponse struct {
	Ref                  string    `json:"ref"`
	Size                 int64     `json:"size"`
	SHA256               string    `json:"sha256"`
	ContentType          string    `json:"content_type,omitempty"`
	KeyID                string    `json:"enc_key_id,omitempty"`
	Algorithm            string    `json:"enc_alg,omitempty"`
	ExpiresIfUnpublished time.Time `json:"expires_if_unpublished"`
}

// statusOf maps the service's errors onto answers.
func statusOf(err error) *apierr.Error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	switch {
	case errors.Is(err, largeobj.ErrInvalid):
		return apierr.Errorf(http.StatusBadRequest, "bad_request", "%s", msg)
	case errors.Is(err, node.ErrStorageQuota):
		return apierr.Errorf(http.StatusInsufficientStorage, "quota_exceeded", "%s", msg)
	case errors.Is(err, largeobj.ErrTooLarge):
		return apierr.Errorf(http.StatusRequestEntityTooLarge, "too_large", "%s", msg)
	case errors.Is(err, largeobj.ErrChecksum):
		return apierr.Errorf(http.StatusUnprocessableEntity, "checksum_mismatch", "%s", msg)
	case errors.Is(err, largeobj.ErrOutOfOrder):
		return apierr.Errorf(http.StatusConflict, "out_of_order", "%s", msg)
	case errors.Is(err, largeobj.ErrState):
		return apierr.Errorf(http.StatusConflict, "wrong_state", "%s", msg)
	case errors.Is(err, largeobj.ErrConflict), errors.Is(err, meta.ErrConflict):
		return apierr.Errorf(http.StatusConflict, "conflict", "%s; retry", msg)
	case errors.Is(err, ref.ErrExpired):
		return apierr.Errorf(http.StatusGone, "expired", "%s", msg)
	case errors.Is(err, ref.ErrUnknown):
		return apierr.Errorf(http.StatusNotFound, "not_found", "%s", msg)
	case errors.Is(err, context.Canceled):
		return apierr.Errorf(499, "cancelled", "%s", msg)
	}
	return apierr.Errorf(http.StatusServiceUnavailable, "unavailable", "%s; retry", msg)
}

// writeError logs err and answers with it (broker/httpapi/apierr: 4xx at
// DEBUG, 503 at WARN, 500 at ERROR).
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apierr.Respond(a.log, w, r, err, statusOf(err), "large-object request failed")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// tenantOf is the caller's tenant.
func tenantOf(r *http.Request) (string, error) {
	id, ok := auth.IdentityFrom(r.Context())
	if !ok || id.Principal.Tenant == "" {
		return "", apierr.Errorf(http.StatusUnauthorized, "unauthenticated", "the request was not authenticated")
	}
	return id.Principal.Tenant, nil
}

func (a *api) begin(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	req, err := DecodeBegin(http.MaxBytesReader(w, r.Body, maxBeginBody))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if !a.exists(r.Context(), req.Topic) {
		a.writeError(w, r, apierr.Errorf(http.StatusNotFound, "not_found", "no topic %q", req.Topic))
		return
	}
	s, err := a.svc.Begin(r.Context(), largeobj.BeginRequest{Tenant: tenant, Topic: req.Topic, Size: req.Size,
		SHA256: req.SHA256, ContentType: req.ContentType, KeyID: req.KeyID, Algorithm: req.Algorithm})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, SessionResponse{ID: s.ID, ExpiresAt: s.ExpiresAt.UTC(), PartSize: s.PartSize,
		PutURL: "/v1/uploads/" + s.ID, CompleteURL: "/v1/uploads/" + s.ID + ":complete", PresignedParts: s.Presigned})
}

// ParseContentRange reads "bytes a-b/total" (total may be "*").
func ParseContentRange(h string) (off, n, total int64, err error) {
	spec, ok := strings.CutPrefix(h, "bytes ")
	rng, tot, ok2 := strings.Cut(spec, "/")
	first, last, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, 0, fmt.Errorf("Content-Range %q is not \"bytes first-last/total\"", h)
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	total = -1
	var err3 error
	if tot != "*" {
		total, err3 = strconv.ParseInt(tot, 10, 64)
	}
	if err1 != nil || err2 != nil || err3 != nil || a < 0 || b < a || (total >= 0 && b >= total) {
		return 0, 0, 0, fmt.Errorf("Content-Range %q is not \"bytes first-last/total\" with first ≤ last < total", h)
	}
	return a, b - a + 1, total, nil
}

func (a *api) put(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	var off, n int64
	if h := r.Header.Get("Content-Range"); h != "" {
		if off, n, _, err = ParseContentRange(h); err != nil {
			a.writeError(w, r, apierr.Errorf(http.StatusBadRequest, "bad_request", "%s", err.Error()))
			return
		}
		if r.ContentLength >= 0 && r.ContentLength != n {
			a.writeError(w, r, apierr.Errorf(http.StatusBadRequest, "bad_request", "Content-Length %d differs from the %d bytes of Content-Range", r.ContentLength, n))
			return
		}
	} else {
		if r.ContentLength <= 0 {
			a.writeError(w, r, apierr.Errorf(http.StatusBadRequest, "bad_request", "a PUT needs Content-Range (bytes first-last/total) or, for the whole payload, Content-Length"))
			return
		}
		n = r.ContentLength
	}
	received, err := a.svc.PutPart(r.Context(), tenant, id, off, http.MaxBytesReader(w, r.Body, n), n)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "received": received})
}

func (a *api) complete(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	id, ok := strings.CutSuffix(r.PathValue("id"), ":complete")
	if !ok {
		a.writeError(w, r, apierr.Errorf(http.StatusNotFound, "not_found", "no such endpoint: POST %s; did you mean POST %s:complete?", r.URL.Path, r.URL.Path))
		return
	}
	c, err := a.svc.Complete(r.Context(), tenant, id)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, CompletedResponse{Ref: c.Ref.ID, Size: c.Ref.Size, SHA256: c.Ref.SHA256,
		ContentType: c.Ref.ContentType, KeyID: c.Ref.KeyID, Algorithm: c.Ref.Algorithm,
		ExpiresIfUnpublished: c.ExpiresIfUnpublished.UTC()})
}

func (a *api) abort(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.svc.Abort(r.Context(), tenant, r.PathValue("id")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ParseRange reads a single-range Range header against an object of size
// bytes: "bytes=a-b", "bytes=a-" or "bytes=-n". ok is false for a header
// that is not one range of bytes (then the whole object is served, as RFC
// 9110 allows); err is set when the range cannot be satisfied.
func ParseRange(h string, size int64) (off, n int64, ok bool, err error) {
	spec, isBytes := strings.CutPrefix(h, "bytes=")
	first, last, dash := strings.Cut(spec, "-")
	if !isBytes || !dash || strings.Contains(spec, ",") {
		return 0, 0, false, nil
	}
	if first == "" {
		k, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || k <= 0 {
			return 0, 0, false, nil
		}
		k = min(k, size)
		return size - k, k, true, nil
	}
	a, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || a < 0 {
		return 0, 0, false, nil
	}
	b := size - 1
	if last != "" {
		if b, perr = strconv.ParseInt(last, 10, 64); perr != nil || b < a {
			return 0, 0, false, nil
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, true, fmt.Errorf("range starts at %d, beyond the %d bytes of the object", a, size)
	}
	return a, b - a + 1, true, nil
}

func (a *api) download(w http.ResponseWriter, r *http.Request) {
	tenant, err := tenantOf(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	id := r.PathValue("ref")
	rf, err := a.svc.Describe(r.Context(), tenant, id)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	off, n, partial, err := ParseRange(r.Header.Get("Range"), rf.Size)
	if err != nil {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", rf.Size))
		a.writeError(w, r, apierr.Errorf(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "%s", err.Error()))
		return
	}
	if !partial {
		off, n = 0, rf.Size
	}
	body, _, err := a.svc.Open(r.Context(), tenant, id, off, n)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer func() { _ = body.Close() }()
	h := w.Header()
	ct := rf.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", `"`+rf.SHA256+`"`)
	h.Set("X-Sluice-Sha256", rf.SHA256)
	h.Set("X-Sluice-Size", strconv.FormatInt(rf.Size, 10))
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, rf.Size))
	}
	w.WriteHeader(status)
	if copied, err := io.Copy(w, body); err != nil {
		// The status is sent; the client sees a short body.
		a.log.Warn().Err(err).Str("ref", id).Int64("sent", copied).Int64("want", n).Msg("object download cut off")
	}
}
