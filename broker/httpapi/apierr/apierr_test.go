package apierr

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestRespondWritesBodyAndLogsAtLevel(t *testing.T) {
	for _, tc := range []struct {
		status int
		level  string
	}{
		{http.StatusBadRequest, "debug"},
		{http.StatusNotFound, "debug"},
		{499, "debug"},
		{http.StatusInternalServerError, "error"},
		{http.StatusServiceUnavailable, "warn"},
	} {
		var logs bytes.Buffer
		logger := zerolog.New(&logs).Level(zerolog.DebugLevel)
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/things", nil)
		e := Errorf(tc.status, "some_code", "thing %d is %s", 7, "wrong")
		Respond(logger, rec, r, errors.New("cause"), e, "request failed")

		if rec.Code != tc.status {
			t.Errorf("status %d: answered %d", tc.status, rec.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("status %d: Content-Type %q", tc.status, ct)
		}
		var body map[string]map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("status %d: body %q: %v", tc.status, rec.Body.String(), err)
		}
		if len(body) != 1 || len(body["error"]) != 2 || body["error"]["code"] != "some_code" || body["error"]["message"] != "thing 7 is wrong" {
			t.Errorf("status %d: body %q, want {\"error\":{\"code\":\"some_code\",\"message\":\"thing 7 is wrong\"}}", tc.status, rec.Body.String())
		}
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
			t.Fatalf("status %d: log %q: %v", tc.status, logs.String(), err)
		}
		for k, want := range map[string]any{"level": tc.level, "error": "cause", "method": "POST", "path": "/v1/things",
			"status": float64(tc.status), "code": "some_code", "message": "request failed"} {
			if line[k] != want {
				t.Errorf("status %d: log %s = %v, want %v (%s)", tc.status, k, line[k], want, strings.TrimSpace(logs.String()))
			}
		}
	}
}

func TestBadRequest(t *testing.T) {
	e := BadRequest("field %s: expected a string", "name")
	if e.Status != http.StatusBadRequest || e.Code != "bad_request" || e.Error() != "field name: expected a string" {
		t.Errorf("BadRequest = %+v", e)
	}
}
