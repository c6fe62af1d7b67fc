package node

// This file owns building record batches for messages that arrive over
// HTTP. Encoding is kmsg's; this only fills the fields and the CRC.

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBatch encodes records[idx...] as one uncompressed v2 batch, as a
// producer would send it. Each record's TimestampDelta64 holds its absolute
// timestamp on entry.
func EncodeBatch(records []kmsg.Record, idx []int, producerID int64, epoch int16, seq int32) []byte {
	first := records[idx[0]].TimestampDelta64
	maxTS := first
	for _, i := range idx {
		first = min(first, records[i].TimestampDelta64)
		maxTS = max(maxTS, records[i].TimestampDelta64)
	}
	var recs []byte
	for j, i := range idx {
		r := records[i]
		r.TimestampDelta64 -= first
		r.OffsetDelta = int32(j)
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(idx) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: producerID, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(idx)), Records: recs,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}
