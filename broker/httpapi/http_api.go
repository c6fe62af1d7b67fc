package httpapi

// This file owns the JSON HTTP API's plumbing: routing, request decoding
// with size limits, and errors as {"error": {"code", "message"}} with the
// HTTP status that fits the failure.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxHTTPBody bounds one JSON request body.
const maxHTTPBody = 64 << 20

// APIError is an HTTP API failure with its status: the one error answer of
// the HTTP API and its sub-packages (broker/httpapi/apierr).
type APIError = apierr.Error

// BadRequest is a 400 "bad_request".
func BadRequest(format string, args ...any) *APIError { return apierr.BadRequest(format, args...) }

// httpStatusFor maps an internal error to an API error.
func httpStatusFor(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	if qe := quotaStatus(err); qe != nil {
		return qe
	}
	code := node.ErrorCode(err)
	status := http.StatusInternalServerError
	switch code {
	case kerr.UnknownTopicOrPartition.Code, kerr.GroupIDNotFound.Code:
		status = http.StatusNotFound
	case kerr.TopicAlreadyExists.Code:
		status = http.StatusConflict
	case kerr.InvalidTopicException.Code, kerr.InvalidPartitions.Code, kerr.InvalidConfig.Code,
		kerr.InvalidReplicationFactor.Code, kerr.InvalidRecord.Code, kerr.CorruptMessage.Code,
		kerr.InvalidRequest.Code, kerr.InvalidTimestamp.Code, kerr.InvalidSessionTimeout.Code,
		kerr.InvalidGroupID.Code, kerr.OffsetMetadataTooLarge.Code:
		status = http.StatusBadRequest
	case kerr.MessageTooLarge.Code:
		status = http.StatusRequestEntityTooLarge
	case kerr.OffsetOutOfRange.Code:
		status = http.StatusGone
	case kerr.OutOfOrderSequenceNumber.Code, kerr.InvalidProducerEpoch.Code,
		kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code,
		kerr.RebalanceInProgress.Code, kerr.NonEmptyGroup.Code, kerr.InconsistentGroupProtocol.Code,
		kerr.MemberIDRequired.Code:
		status = http.StatusConflict
	case kerr.RequestTimedOut.Code, kerr.NotLeaderForPartition.Code, kerr.CoordinatorNotAvailable.Code, kerr.KafkaStorageError.Code:
		status = http.StatusServiceUnavailable
	}
	name := "internal"
	if ke := kerr.ErrorForCode(code); ke != nil {
		var k *kerr.Error
		if errors.As(ke, &k) {
			name = k.Message
		}
	}
	return &APIError{Status: status, Code: name, Message: err.Error()}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError logs and writes an error response. A client's mistake (4xx)
// is logged at DEBUG: the client is told, and an operator's log is not the
// place for it; a failure of the broker's own is an ERROR.
// The message is shown in the request's tenant scope (names.go); the log
// keeps the internal names.
func (b *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := *httpStatusFor(err)
	ae.Message = scopeFrom(r.Context()).message(ae.Message)
	writeAPIError(b.Logger, w, r, err, &ae)
}

// WriteError answers err as JSON with the status and code it maps to, and
// logs it: 4xx at debug (a client's mistake), 5xx at warn or error.
func WriteError(logger zerolog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	writeAPIError(logger, w, r, err, httpStatusFor(err))
}

// writeAPIError logs err and answers ae, with Retry-After when err
// carries one.
func writeAPIError(logger zerolog.Logger, w http.ResponseWriter, r *http.Request, err error, ae *APIError) {
	setRetryAfter(w, err)
	apierr.Respond(logger, w, r, err, ae, "http request failed")
}

// decodeJSON reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over maxHTTPBody. Its messages name the JSON field and
// the type expected in JSON's terms, never the Go types behind them.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeBody(http.MaxBytesReader(w, r.Body, maxHTTPBody), v)
}

// decodeBody is decodeJSON over a body already bounded (the pipeline
// decodes the bytes it buffered with it, so that it reads what the handler
// will read).
func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return BadRequest("malformed JSON: data after the request object")
	}
	return nil
}

// jsonError turns a decoding failure into a 4xx written for a person.
func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body exceeds %d bytes", maxHTTPBody)}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "the request"
		}
		return BadRequest("field %s: expected %s, got a JSON %s", field, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.Is(err, io.EOF):
		return BadRequest("the request body is empty; this call takes a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("malformed JSON: the body ends inside a value")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return BadRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return BadRequest("malformed JSON: %v", err)
}

// jsonKind names a Go type as the JSON it is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("an integer (%s)", integerRange(t))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// integerRange is the range of an integer type, for messages.
func integerRange(t reflect.Type) string {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return fmt.Sprintf("0 to %d", uint64(1)<<bits-1)
	}
	return fmt.Sprintf("%d to %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
}

// statusRecorder keeps a handler's status and headers and drops its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

// registerAPI adds the /v1 endpoints to mux.
func (b *Server) registerAPI(mux routeMux) {
	mux.HandleFunc("POST /v1/topics", b.httpCreateTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/messages:publish", b.httpPublish)
	mux.HandleFunc("POST /v1/producers", b.httpInitProducer)
	mux.HandleFunc("GET /v1/openapi.json", b.httpOpenAPI)
	b.registerGroupAPI(mux)
	b.registerAdminAPI(mux)
	b.registerListingAPI(mux)
	b.registerHotKeysAPI(mux) // http_hotkeys.go
	b.registerRedriveAPI(mux) // redrive.go
}
