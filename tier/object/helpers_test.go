package object

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// spec describes a test batch: records offsets from base, under epoch,
// values of valueSize bytes, record timestamps ts, ts+1, ...
type spec struct {
	base      wal.Offset
	epoch     wal.Epoch
	records   int
	valueSize int
	ts        int64
}

// mkBatch builds a valid Kafka v2 record batch for s, records encoded as
// kmsg does, stamped with s.base and s.epoch as the log stores them.
func mkBatch(s spec) []byte {
	var recs []byte
	for i := range s.records {
		r := kmsg.Record{
			TimestampDelta64: int64(i),
			OffsetDelta:      int32(i),
			Key:              []byte{byte(i)},
			Value:            bytes.Repeat([]byte{byte(s.base) + byte(i)}, s.valueSize),
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // Length 0 is one varint byte
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          int64(s.base),
		Length:               int32(wal.BatchHeaderSize - batchLengthOverhead + len(recs)),
		PartitionLeaderEpoch: int32(s.epoch),
		Magic:                2,
		LastOffsetDelta:      int32(s.records - 1),
		FirstTimestamp:       s.ts,
		MaxTimestamp:         s.ts + int64(s.records) - 1,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(s.records),
		Records:              recs,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// mkBatchSized builds a one-record batch of exactly size bytes.
func mkBatchSized(t testing.TB, base wal.Offset, epoch wal.Epoch, ts int64, size int) []byte {
	t.Helper()
	s := spec{base: base, epoch: epoch, records: 1, ts: ts}
	for range 4 {
		b := mkBatch(s)
		if len(b) == size {
			return b
		}
		s.valueSize += size - len(b)
		if s.valueSize < 0 {
			break
		}
	}
	t.Fatalf("cannot build a batch of %d bytes", size)
	return nil
}

// run builds contiguous batches: counts[i] records each, valueSize bytes
// per value, starting at base, all under epoch, timestamps from ts.
func run(base wal.Offset, epoch wal.Epoch, ts int64, valueSize int, counts ...int) [][]byte {
	var out [][]byte
	for _, n := range counts {
		out = append(out, mkBatch(spec{base: base, epoch: epoch, records: n, valueSize: valueSize, ts: ts}))
		base += wal.Offset(n)
		ts += int64(n)
	}
	return out
}

// build makes an object of batches with cfg; it fails the test on error.
func build(t testing.TB, cfg BuilderConfig, batches [][]byte, epochs []wal.EpochEntry, snap []byte) ([]byte, Footer) {
	t.Helper()
	b, err := NewBuilder(cfg)
	if err != nil {
		t.Fatalf("new builder: %v", err)
	}
	for i, batch := range batches {
		if err := b.Add(batch); err != nil {
			t.Fatalf("add batch %d: %v", i, err)
		}
	}
	obj, f, err := b.Finish(epochs, snap)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return obj, f
}

// header parses a test batch's header.
func header(t testing.TB, batch []byte) wal.BatchHeader {
	t.Helper()
	h, err := wal.ParseBatchHeader(batch)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// chunkBytes returns chunk i's bytes in obj.
func chunkBytes(f *Footer, obj []byte, i int) []byte {
	pos, n := f.ChunkRange(i)
	return obj[pos : pos+n]
}

// smallObject is a valid object of three chunks over two epochs, with a
// producer snapshot, for corruption tests and fuzz seeds.
func smallObject(t testing.TB) ([]byte, Footer) {
	t.Helper()
	batches := append(run(100, 3, 1_000, 20, 2, 1, 3), run(106, 5, 2_000, 20, 1, 4)...)
	epochs := []wal.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 50}, {Epoch: 5, StartOffset: 106}}
	return build(t, BuilderConfig{TargetChunkBytes: 250, Partition: 7, TopicID: [16]byte{1, 2, 3}}, batches, epochs, []byte("producer state"))
}
