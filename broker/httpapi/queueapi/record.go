package queueapi

// This file owns Record's conversions: from a message as the HTTP API
// reads it (wire.Message), and to the Kafka record a copy is written as.
//
// Invariant: the message_id travels in Record.MessageID, never among its
// Headers, and is written back as the wire.MessageIDHeader header, last.

import (
	"encoding/base64"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/httpapi/wire"
	"github.com/sluice-mq/sluice/queue"
)

// RecordOf is the record of a message read over the HTTP API's read path;
// its headers sorted by name.
func RecordOf(m wire.Message) Record {
	rec := Record{Offset: m.Offset, TimestampMs: m.TimestampMs, MessageID: m.MessageID}
	switch {
	case m.MessageKey != nil:
		rec.Key = []byte(*m.MessageKey)
	case m.KeyBase64 != nil:
		rec.Key, _ = base64.StdEncoding.DecodeString(*m.KeyBase64)
	}
	rec.Value, _ = base64.StdEncoding.DecodeString(m.PayloadBase64)
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rec.Headers = append(rec.Headers, queue.Header{Key: k, Value: []byte(m.Headers[k])})
	}
	return rec
}

// Kafka is the record as written: its timestamp absolute (made relative to
// its batch when encoded) and its message_id a header.
func (r Record) Kafka() kmsg.Record {
	kr := kmsg.Record{Key: r.Key, Value: r.Value, TimestampDelta64: r.TimestampMs}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	if r.MessageID != "" {
		kr.Headers = append(kr.Headers, kmsg.Header{Key: wire.MessageIDHeader, Value: []byte(r.MessageID)})
	}
	return kr
}
