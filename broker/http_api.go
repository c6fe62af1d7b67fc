package broker

// This file owns the JSON HTTP API's plumbing: routing, request decoding
// with size limits, and errors as {"error": {"code", "message"}} with the
// HTTP status that fits the failure.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxHTTPBody bounds one JSON request body.
const maxHTTPBody = 64 << 20

// apiError is an HTTP API failure with its status.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf(format, args...)}
}

// httpStatusFor maps an internal error to an API error.
func httpStatusFor(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	code := errorCode(err)
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
	return &apiError{Status: status, Code: name, Message: err.Error()}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError logs and writes an error response.
func (b *Broker) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := httpStatusFor(err)
	ev := b.logger.Info()
	if ae.Status >= 500 {
		ev = b.logger.Error()
	}
	ev.Err(err).Str("method", r.Method).Str("path", r.URL.Path).Int("status", ae.Status).Msg("http request failed")
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}

// decodeJSON reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over maxHTTPBody.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxHTTPBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf("request body exceeds %d bytes", maxHTTPBody)}
		}
		return badRequest("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed JSON: data after the request object")
	}
	return nil
}

// registerAPI adds the /v1 endpoints to mux.
func (b *Broker) registerAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/topics", b.httpCreateTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/messages:publish", b.httpPublish)
	mux.HandleFunc("POST /v1/producers", b.httpInitProducer)
	mux.HandleFunc("GET /v1/openapi.json", b.httpOpenAPI)
	b.registerGroupAPI(mux)
	b.registerAdminAPI(mux)
	b.registerListingAPI(mux)
}
