package httpapi

// The log level of an HTTP error: a client's mistake (4xx) is DEBUG, so an
// operator's log at INFO does not fill with other people's typos; the
// broker's own failure (5xx) is an ERROR (500) or a WARN (the others).

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestHTTPErrorLogLevels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		level  string
	}{
		{"bad request", BadRequest("field messages: expected an array"), http.StatusBadRequest, "debug"},
		{"unknown topic", kerr.UnknownTopicOrPartition, http.StatusNotFound, "debug"},
		{"out of range", kerr.OffsetOutOfRange, http.StatusGone, "debug"},
		{"stale member", kerr.UnknownMemberID, http.StatusConflict, "debug"},
		{"not leader", kerr.NotLeaderForPartition, http.StatusServiceUnavailable, "warn"},
		{"the broker's own failure", errors.New("disk on fire"), http.StatusInternalServerError, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := zerolog.New(&buf).Level(zerolog.DebugLevel)
			w := httptest.NewRecorder()
			WriteError(logger, w, httptest.NewRequest(http.MethodPost, "/v1/topics/t/messages:publish", nil), tc.err)
			if w.Code != tc.status {
				t.Fatalf("answered %d, want %d", w.Code, tc.status)
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("log line %q: %v", buf.String(), err)
			}
			if line["level"] != tc.level || line["status"] != float64(tc.status) {
				t.Fatalf("logged %v, want level %s with status %d", line, tc.level, tc.status)
			}
			var body map[string]APIError
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body["error"].Code == "" || body["error"].Message == "" {
				t.Fatalf("answer %q is not a JSON error with a code and a message: %v", w.Body.String(), err)
			}
		})
	}
}
