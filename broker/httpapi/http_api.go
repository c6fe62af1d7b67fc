package httpapi

// This file owns the JSON HTTP API's plumbing: routing, request decoding
// with size limits, and errors as {"error": {"code", "message"}} with the
// HTTP status that fits the failure.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

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
		kerr.MemberIDRequired.Code, kerr.UnstableOffsetCommit.Code:
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
func decodeBody(body io.Reader, v any) error { return apierr.Decode(body, v, maxHTTPBody) }

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
