package secapi

// This file owns the API's answers: JSON bodies, the error shape
// {"error":{"code","message"}}, the mapping of the store's error markers to
// statuses and codes, the logging of failures, and request decoding with a
// size limit and messages for a person.
//
// Invariant: every failure reaches the client through writeError, so every
// failure is logged once, at DEBUG for 4xx and WARN/ERROR for 5xx; the
// error's type, body and levels are broker/httpapi/apierr's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/meta"
)

// maxBody bounds one request body: the largest legitimate one is a list of
// maxBindings ACL bindings.
const maxBody = 1 << 20

func badRequest(format string, args ...any) *apierr.Error { return apierr.BadRequest(format, args...) }

func forbidden(format string, args ...any) *apierr.Error {
	return apierr.Errorf(http.StatusForbidden, "forbidden", format, args...)
}

// storeError maps an error of the metadata store to an answer. what names
// the object of the call ("tenant", "user", "API key") for the not-found
// and exists codes; the message is the store's, whose text names the
// object and why.
func storeError(err error, what string) *apierr.Error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	code := strings.ToLower(strings.ReplaceAll(what, " ", "_"))
	msg := strings.NewReplacer("meta: ", "", "auth: ", "").Replace(err.Error())
	switch {
	case errors.Is(err, meta.ErrReserved) && !errors.Is(err, meta.ErrExists):
		return apierr.Errorf(http.StatusConflict, "tenant_reserved", "%s", msg)
	case errors.Is(err, meta.ErrExists):
		return apierr.Errorf(http.StatusConflict, code+"_exists", "%s", msg)
	case errors.Is(err, meta.ErrNotEmpty):
		return apierr.Errorf(http.StatusConflict, "tenant_not_empty", "%s", msg)
	case errors.Is(err, meta.ErrLimit):
		return apierr.Errorf(http.StatusConflict, "api_key_limit", "%s", msg)
	case errors.Is(err, meta.ErrConflict):
		return apierr.Errorf(http.StatusConflict, "conflict", "%s; retry", msg)
	case errors.Is(err, meta.ErrNotFound):
		return apierr.Errorf(http.StatusNotFound, notFoundCode(msg, code), "%s", msg)
	case errors.Is(err, meta.ErrInvalidQuota):
		return apierr.Errorf(http.StatusBadRequest, "invalid_quota", "%s", msg)
	case errors.Is(err, meta.ErrInvalidName), errors.Is(err, meta.ErrInvalidCredential),
		errors.Is(err, meta.ErrInvalidACL):
		return badRequest("%s", msg)
	case errors.Is(err, auth.ErrInvalidCredential):
		return badRequest("%s", msg)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return apierr.Errorf(http.StatusServiceUnavailable, "metadata_unavailable", "the metadata store did not answer in time: %s; retry", msg)
	}
	return apierr.Errorf(http.StatusInternalServerError, "internal", "%s", msg)
}

// notFoundCode names what was missing: the store says "tenant ..." when a
// call about a user or binding finds no tenant, "user ..." when a key's
// user is gone.
func notFoundCode(msg, fallback string) string {
	switch {
	case strings.Contains(msg, ": tenant "):
		return "tenant_not_found"
	case strings.Contains(msg, ": user "):
		return "user_not_found"
	}
	return fallback + "_not_found"
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError logs err and answers with it (apierr: a client's mistake, 4xx,
// at DEBUG; the store unavailable, 503, at WARN; a failure of our own at
// ERROR), with the caller's principal and tenant in the log line.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error, what string) {
	ae := storeError(err, what)
	ev := apierr.Log(a.log, r, err, ae)
	if id, ok := auth.IdentityFrom(r.Context()); ok {
		ev = ev.Str("principal", id.Principal.String()).Str("tenant", id.Principal.Tenant)
	}
	ev.Msg("security API request failed")
	apierr.Write(w, ae)
}

// decodeJSON reads one JSON object into v, refusing unknown fields,
// trailing data and bodies over maxBody.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeBody(http.MaxBytesReader(w, r.Body, maxBody), v)
}

// decodeOptionalJSON is decodeJSON for a body that may be left out: an
// empty body (chunked or not) leaves v as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return jsonError(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return decodeBody(bytes.NewReader(raw), v)
}

// decodeBody is decodeJSON over any reader (the fuzz test's entry).
func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON: data after the request object")
	}
	return nil
}

// jsonError turns a decoding failure into a 4xx written for a person, in
// JSON's terms rather than Go's.
func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return apierr.Errorf(http.StatusRequestEntityTooLarge, "too_large", "request body exceeds %d bytes", maxBody)
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return badRequest("the body must be a JSON object, not a JSON %s", typeErr.Value)
		}
		return badRequest("field %s: expected %s, got a JSON %s", field, jsonKind(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.Is(err, io.EOF):
		return badRequest("the request body is empty; this call takes a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: the body ends inside a value")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("malformed JSON: %v", err)
}

// jsonKind names the JSON a field of these requests is decoded from: they
// hold only strings, lists of strings, and lists of objects.
func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}
