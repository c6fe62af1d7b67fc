package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func encodeRequest(req kmsg.Request, correlation int32) []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	return f.AppendRequest(nil, req, correlation)
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, v := range []int16{0, 4, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := "orders"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		frame := encodeRequest(req, 42)
		parsed, err := parseRequest(frame[4:])
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := parsed.body.(*kmsg.MetadataRequest)
		if parsed.correlation != 42 || parsed.clientID != "test" || parsed.version != v || len(got.Topics) != 1 || *got.Topics[0].Topic != topic {
			t.Fatalf("v%d: parsed %+v %+v", v, parsed, got)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		input []byte
	}{
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffffff)},
		{"huge size", binary.BigEndian.AppendUint32(nil, 1<<31-1)},
		{"tiny size", binary.BigEndian.AppendUint32(nil, 3)},
		{"truncated body", append(binary.BigEndian.AppendUint32(nil, 100), make([]byte, 10)...)},
		{"truncated past the first chunk", append(binary.BigEndian.AppendUint32(nil, 1<<19), make([]byte, frameChunk+10)...)},
		{"larger than the request memory", append(binary.BigEndian.AppendUint32(nil, 1<<20-1), make([]byte, 1<<20-1)...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newRequestMemory(1<<20-2, nil)
			if _, _, err := mem.readFrame(context.Background(), bufio.NewReader(bytes.NewReader(tt.input)), 1<<20); !errors.Is(err, errFrame) {
				t.Fatalf("readFrame = %v, want errFrame", err)
			}
			if got := mem.reserved(); got != 0 {
				t.Fatalf("a refused frame left %d bytes reserved", got)
			}
		})
	}
}

func TestParseRequestRejects(t *testing.T) {
	unknown := binary.BigEndian.AppendUint16(nil, 999)
	unknown = append(unknown, 0, 0, 0, 0, 0, 1, 0xff, 0xff)
	if _, err := parseRequest(unknown); !errors.Is(err, errFrame) {
		t.Fatalf("unknown key: %v", err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	frame := encodeRequest(req, 1)[4:]
	if _, err := parseRequest(frame[:len(frame)-3]); !errors.Is(err, errFrame) {
		t.Fatalf("truncated body: %v", err)
	}
}

// FuzzParseRequest feeds arbitrary frames to the request decoder: it must
// never panic, and a frame it accepts must re-encode to a frame that parses
// to the same request.
func FuzzParseRequest(f *testing.F) {
	for _, r := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest()} {
		for _, v := range []int16{0, 3, 9, 12} {
			if v <= r.MaxVersion() {
				r.SetVersion(v)
				f.Add(encodeRequest(r, 7)[4:])
			}
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 8 {
			return
		}
		req, err := parseRequest(frame)
		if err != nil || req.version < 0 || req.version > req.body.MaxVersion() {
			return
		}
		again, err := parseRequest(encodeRequest(req.body, req.correlation)[4:])
		if err != nil {
			t.Fatalf("re-encoded %s v%d does not parse: %v", kmsg.NameForKey(req.key), req.version, err)
		}
		if again.key != req.key || again.version != req.version {
			t.Fatalf("re-encoded request changed: %d v%d -> %d v%d", req.key, req.version, again.key, again.version)
		}
	})
}

// FuzzValidateBatch: arbitrary produce payloads never panic the validator.
func FuzzValidateBatch(f *testing.F) {
	f.Add(testBatch(3, -1, -1, -1, 1000))
	f.Add(testBatch(1, 5, 0, 0, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := validateBatch(b, 1<<20)
		if err == nil && int(h.Length)+12 != len(b) {
			t.Fatalf("accepted a batch whose length %d does not match %d bytes", h.Length, len(b))
		}
	})
}
