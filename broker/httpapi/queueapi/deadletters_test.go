package queueapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/sluice-mq/sluice/queue"
)

// TestListReportsMalformedHistory: a record whose retry headers do not
// parse is listed with history_error (not a failed page), one without
// them with no history, and a binary key as key_base64.
func TestListReportsMalformedHistory(t *testing.T) {
	h := newHarness(t, nil, 0)
	p := &h.f.topics["jobs"].parts[0]
	*p = append(*p,
		Record{Offset: 0, Key: []byte{0xff}, Value: []byte("plain")},
		Record{Offset: 1, Value: []byte("bad"), Headers: []queue.Header{{Key: queue.HeaderAttempt, Value: []byte("x")}}})
	r := httptest.NewRequest("GET", "/?limit=5", nil)
	r.SetPathValue("topic", "jobs")
	w := httptest.NewRecorder()
	h.api.HandleList(w, r)
	var l Listing
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || w.Code != 200 {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if len(l.Messages) != 2 || l.NextOffset != 2 || l.LogEnd != 2 {
		t.Fatalf("listing %+v", l)
	}
	m0, m1 := l.Messages[0], l.Messages[1]
	if m0.History != nil || m0.HistoryError != "" || m0.KeyBase64 == nil || *m0.KeyBase64 != "/w==" || m0.MessageKey != nil {
		t.Fatalf("plain record %+v", m0)
	}
	if m1.History != nil || m1.HistoryError == "" {
		t.Fatalf("malformed history %+v", m1)
	}
}
