package httpapi

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
)

// storedBatch encodes a batch as the log stores it: records at base,
// base+1, …; control marks a control batch.
func storedBatch(base int64, control bool, keys ...string) []byte {
	var recs []byte
	for i, k := range keys {
		r := kmsg.Record{Key: []byte(k), Value: []byte("v-" + k), OffsetDelta: int32(i)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: 3, Magic: 2, LastOffsetDelta: int32(len(keys) - 1),
		FirstTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(keys)), Records: recs}
	if control {
		rb.Attributes = node.AttrControl
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// A new leader's epoch-start control batch is no message: an HTTP fetch
// (and so the queue API) skips it and moves past it. The old code handed
// it out as a record whose key is the control key (version 0, type 2), a
// record nobody published.
func TestAppendMessagesSkipsControlBatches(t *testing.T) {
	epochStart := string([]byte{0, 0, 0, 2})
	var data []byte
	data = append(data, storedBatch(0, false, "a", "b")...)
	data = append(data, storedBatch(2, true, epochStart)...)
	data = append(data, storedBatch(3, false, "c")...)
	resp := fetchResponse{Messages: []fetchedMessage{}, NextOffset: 0}
	if err := appendMessages(&resp, 0, data, 0, 4); err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, m := range resp.Messages {
		offs = append(offs, m.Offset)
		if m.MessageKey != nil && *m.MessageKey == epochStart || m.KeyBase64 != nil {
			t.Errorf("the control record was handed out: %+v", m)
		}
	}
	if len(offs) != 3 || offs[0] != 0 || offs[1] != 1 || offs[2] != 3 || resp.NextOffset != 4 {
		t.Fatalf("offsets %v next %d, want [0 1 3] next 4", offs, resp.NextOffset)
	}

	// A control batch last: the next offset still moves past it.
	resp = fetchResponse{Messages: []fetchedMessage{}, NextOffset: 2}
	if err := appendMessages(&resp, 0, storedBatch(2, true, epochStart), 2, 3); err != nil {
		t.Fatal(err)
	}
	if len(resp.Messages) != 0 || resp.NextOffset != 3 {
		t.Fatalf("%d messages, next %d; want none, next 3", len(resp.Messages), resp.NextOffset)
	}
}
