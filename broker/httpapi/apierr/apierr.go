package apierr

// This file owns the error answer: its shape (doc.go), its encoding and the
// level it is logged at.
//
// Invariant: an error body is always {"error":{"code","message"}}, never
// anything else, and the status line carries Error.Status.

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"
)

// Error is an HTTP API failure with its status and stable code.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Errorf is an Error whose message is formatted.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 "bad_request".
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "bad_request", format, args...)
}

// Write answers e: {"error": e} with e.Status.
func Write(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]*Error{"error": e})
}

// Log starts the log line of a failed request at the level e.Status calls
// for, with err, the method, path, status and code; the caller adds its
// fields and names the line with Msg.
func Log(logger zerolog.Logger, r *http.Request, err error, e *Error) *zerolog.Event {
	return Event(logger, e.Status).Err(err).Str("method", r.Method).Str("path", r.URL.Path).
		Int("status", e.Status).Str("code", e.Code)
}

// Event is an event of logger at the level of a failure with status.
func Event(logger zerolog.Logger, status int) *zerolog.Event {
	switch {
	case status == http.StatusInternalServerError:
		return logger.Error()
	case status >= 500:
		return logger.Warn()
	}
	return logger.Debug()
}

// Respond logs err (Log, named msg) and answers e (Write).
func Respond(logger zerolog.Logger, w http.ResponseWriter, r *http.Request, err error, e *Error, msg string) {
	Log(logger, r, err, e).Msg(msg)
	Write(w, e)
}
