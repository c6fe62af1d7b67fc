// Package wire owns how the HTTP API shows a record: the JSON of one
// fetched message (key and payload as text when they are UTF-8, always in
// base64 too), its message_id, its headers, and the object_ref of an
// envelope record (payload/ref). The partition fetch (httpapi) and the
// queue fetch (queueapi) both answer with it, so a record reads the same
// through either.
//
// Invariant: NewMessage never fails and never drops a header: the
// message_id header becomes MessageID, every other header stays in
// Headers, and an envelope's headers stay there beside its ObjectRef.
package wire

import (
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/payload/ref"
)

// MessageIDHeader is the record header that carries an HTTP message_id.
const MessageIDHeader = "message_id"

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Message is one record as the HTTP API answers it.
type Message struct {
	Offset        int64             `json:"offset"`
	Partition     int32             `json:"partition"`
	MessageKey    *string           `json:"message_key,omitempty"`
	KeyBase64     *string           `json:"key_base64,omitempty"`
	MessageID     string            `json:"message_id,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       *string           `json:"payload,omitempty"`
	PayloadBase64 string            `json:"payload_base64"`
	TimestampMs   int64             `json:"timestamp_ms"`
	// ObjectRef is set on an envelope record: the object it names and
	// where to read it. Its headers are kept in Headers too.
	ObjectRef *ObjectRef `json:"object_ref,omitempty"`
}

// ObjectRef is a reference to a large payload as the HTTP API shows it:
// what POST /v1/uploads/{id}:complete answers (its expires_if_unpublished
// is accepted in a publish and ignored), and on a fetched envelope the URL
// to read it.
type ObjectRef struct {
	Ref                  string          `json:"ref"`
	Size                 int64           `json:"size"`
	SHA256               string          `json:"sha256"`
	ContentType          string          `json:"content_type,omitempty"`
	EncKeyID             string          `json:"enc_key_id,omitempty"`
	EncAlg               string          `json:"enc_alg,omitempty"`
	ExpiresIfUnpublished json.RawMessage `json:"expires_if_unpublished,omitempty"`
	URL                  string          `json:"url,omitempty"` // answers only: GET /v1/objects/{ref}
}

// AsRef is o as the envelope convention's reference.
func (o ObjectRef) AsRef() ref.Ref {
	return ref.Ref{ID: o.Ref, Size: o.Size, SHA256: o.SHA256, ContentType: o.ContentType, KeyID: o.EncKeyID, Algorithm: o.EncAlg}
}

// NewMessage is the record at off of partition as the API shows it.
func NewMessage(partition int32, off, ts int64, key, value []byte, headers []Header) Message {
	m := Message{Offset: off, Partition: partition, TimestampMs: ts,
		PayloadBase64: base64.StdEncoding.EncodeToString(value)}
	if key != nil {
		if utf8.Valid(key) {
			k := string(key)
			m.MessageKey = &k
		} else {
			k := base64.StdEncoding.EncodeToString(key)
			m.KeyBase64 = &k
		}
	}
	if utf8.Valid(value) {
		v := string(value)
		m.Payload = &v
	}
	for _, h := range headers {
		if h.Key == MessageIDHeader {
			m.MessageID = string(h.Value)
			continue
		}
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		m.Headers[h.Key] = string(h.Value)
	}
	m.ObjectRef = objectRefOf(headers)
	return m
}

// objectRefOf is the object_ref of an envelope's headers, nil for any
// other record (or a malformed envelope, shown by its headers alone).
func objectRefOf(headers []Header) *ObjectRef {
	if len(headers) == 0 {
		return nil
	}
	hs := make([]ref.Header, len(headers))
	for i, h := range headers {
		hs[i] = ref.Header{Key: h.Key, Value: h.Value}
	}
	r, ok, err := ref.Parse(hs)
	if !ok || err != nil {
		return nil
	}
	return &ObjectRef{Ref: r.ID, Size: r.Size, SHA256: r.SHA256, ContentType: r.ContentType,
		EncKeyID: r.KeyID, EncAlg: r.Algorithm, URL: "/v1/objects/" + r.ID}
}
