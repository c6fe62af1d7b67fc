package kafka

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
	"github.com/sluice-mq/sluice/broker/kafka/replybuf"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseRequestRoundTrip(t *testing.T) {
	for _, v := range []int16{0, 4, 9, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := "orders"
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		frame := brokertest.EncodeRequest(req, 42)
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

func TestParseRequestRejects(t *testing.T) {
	unknown := binary.BigEndian.AppendUint16(nil, 999)
	unknown = append(unknown, 0, 0, 0, 0, 0, 1, 0xff, 0xff)
	if _, err := parseRequest(unknown); !errors.Is(err, errFrame) {
		t.Fatalf("unknown key: %v", err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	frame := brokertest.EncodeRequest(req, 1)[4:]
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
				f.Add(brokertest.EncodeRequest(r, 7)[4:])
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
		again, err := parseRequest(brokertest.EncodeRequest(req.body, req.correlation)[4:])
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
	f.Add(brokertest.Batch(3, -1, -1, -1, 1000))
	f.Add(brokertest.Batch(1, 5, 0, 0, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := node.ValidateBatch(b, 1<<20)
		if err == nil && int(h.Length)+12 != len(b) {
			t.Fatalf("accepted a batch whose length %d does not match %d bytes", h.Length, len(b))
		}
	})
}

// TestKeepReplyBuffer: after a reply, a connection keeps its encoding buffer
// for the next one only if it is small, or, for a follower's replica fetch,
// at most a full replica fetch's worth; a large consumer reply's buffer goes
// back to the shared pools. Fetch replies are encoded into a buffer sized
// once.
func TestKeepReplyBuffer(t *testing.T) {
	req := &request{key: 1, version: 12, correlation: 7}
	for _, tt := range []struct {
		name     string
		records  int
		replica  bool
		wantKept bool
	}{
		{"small reply", 1 << 10, false, true},
		{"reply at the limit", maxKeptReplyBuffer - 1<<10, false, true},
		{"large reply", 8 << 20, false, false},
		{"large replica reply", 8 << 20, true, true},
		{"full replica reply", node.ReplicaFetchMaxBytes + 1<<20, true, true},
		{"replica reply past any fetch", maxKeptReplicaReplyBuffer + 1, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(req.version)
			rt := kmsg.NewFetchResponseTopic()
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = make([]byte, tt.records)
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			size := fetchReplySize(resp)
			limit := maxKeptReplyBuffer
			if tt.replica {
				limit = maxKeptReplicaReplyBuffer
			}
			var bufs replybuf.Conn
			b0 := bufs.Take(size, !tt.replica)
			buf := encodeResponse(b0, req, resp)
			if cap(buf) != cap(b0) {
				t.Fatalf("a %d-byte reply outgrew its estimated %d bytes (cap %d, now %d)", len(buf), size, cap(b0), cap(buf))
			}
			bufs.Done(buf, limit)
			kept := bufs.Take(0, false) // the connection's own buffer
			if len(kept) != 0 || (cap(kept) > 0) != tt.wantKept || cap(kept) > limit {
				t.Fatalf("after a %d-byte reply the connection keeps len %d cap %d (want kept: %v)", len(buf), len(kept), cap(kept), tt.wantKept)
			}
		})
	}
	v15 := &kmsg.FetchRequest{Version: 15, ReplicaID: -1, ReplicaState: kmsg.FetchRequestReplicaState{ID: 2, Epoch: 7}}
	if isReplicaFetch(&request{key: 1, interBroker: true, body: &kmsg.FetchRequest{ReplicaID: -1}}) ||
		!isReplicaFetch(&request{key: 1, interBroker: true, body: &kmsg.FetchRequest{ReplicaID: 2}}) ||
		!isReplicaFetch(&request{key: 1, interBroker: true, body: v15}) ||
		isReplicaFetch(&request{key: 0, interBroker: true, body: kmsg.NewPtrProduceRequest()}) {
		t.Fatal("isReplicaFetch mistakes a consumer's fetch, a follower's or a produce")
	}
	// A client's forged replica fetch is refused, and never earns its
	// connection the large buffer.
	if isReplicaFetch(&request{key: 1, body: &kmsg.FetchRequest{ReplicaID: 2}}) {
		t.Fatal("a replica fetch on the client listener counts as a follower's")
	}
}
