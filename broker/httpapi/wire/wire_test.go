package wire

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/sluice-mq/sluice/payload/ref"
)

func TestNewMessage(t *testing.T) {
	m := NewMessage(3, 7, 1000, []byte{0xff, 0xfe}, []byte("hello"),
		[]Header{{MessageIDHeader, []byte("m1")}, {"source", []byte("web")}})
	if m.KeyBase64 == nil || *m.KeyBase64 != "//4=" || m.MessageKey != nil {
		t.Fatalf("a key that is not UTF-8 is shown in base64 only: %+v", m)
	}
	if m.Payload == nil || *m.Payload != "hello" || m.PayloadBase64 != "aGVsbG8=" {
		t.Fatalf("payload %+v", m)
	}
	if m.MessageID != "m1" || len(m.Headers) != 1 || m.Headers["source"] != "web" || m.ObjectRef != nil {
		t.Fatalf("headers %+v, message id %q, object_ref %v", m.Headers, m.MessageID, m.ObjectRef)
	}
}

// TestEnvelopeShowsObjectRef: an envelope's headers give its object_ref
// (with the download URL) and stay in the headers too.
func TestEnvelopeShowsObjectRef(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	r := ref.Ref{ID: "abc", Size: 5 << 20, SHA256: ref.SumHex(sum), ContentType: "application/pdf"}
	var hs []Header
	for _, h := range r.Headers() {
		hs = append(hs, Header{h.Key, h.Value})
	}
	m := NewMessage(0, 0, 0, nil, nil, hs)
	if m.ObjectRef == nil || m.ObjectRef.AsRef() != r || m.ObjectRef.URL != "/v1/objects/abc" {
		t.Fatalf("object_ref %+v, want %+v", m.ObjectRef, r)
	}
	if m.Headers[ref.HeaderRef] != "abc" {
		t.Fatalf("the envelope's headers are kept: %v", m.Headers)
	}
	raw, _ := json.Marshal(m)
	var back map[string]any
	_ = json.Unmarshal(raw, &back)
	if _, ok := back["object_ref"]; !ok {
		t.Fatalf("JSON without object_ref: %s", raw)
	}
	// A malformed envelope is shown by its headers alone.
	bad := NewMessage(0, 0, 0, nil, nil, []Header{{ref.HeaderRef, []byte("../x")}})
	if bad.ObjectRef != nil || bad.Headers[ref.HeaderRef] != "../x" {
		t.Fatalf("malformed envelope: %+v", bad)
	}
}
