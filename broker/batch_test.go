package broker

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/records"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateBatch(t *testing.T) {
	good := brokertest.Batch(3, -1, -1, -1, 1000)
	tests := []struct {
		name  string
		batch func() []byte
		max   int32
		want  error
	}{
		{"valid", func() []byte { return brokertest.Batch(3, -1, -1, -1, 1000) }, 1 << 20, nil},
		{"empty", func() []byte { return nil }, 1 << 20, node.ErrInvalidRecord},
		{"too large", func() []byte { return brokertest.Batch(3, -1, -1, -1, 1000) }, 20, node.ErrMessageTooLarge},
		{"short header", func() []byte { return good[:40] }, 1 << 20, node.ErrCorruptMessage},
		{"bad crc", func() []byte { b := brokertest.Batch(3, -1, -1, -1, 1000); b[len(b)-1] ^= 0xff; return b }, 1 << 20, node.ErrCorruptMessage},
		{"truncated", func() []byte { return brokertest.Batch(3, -1, -1, -1, 1000)[:len(good)-2] }, 1 << 20, node.ErrCorruptMessage},
		{"two batches", func() []byte {
			return append(brokertest.Batch(1, -1, -1, -1, 1), brokertest.Batch(1, -1, -1, -1, 1)...)
		}, 1 << 20, node.ErrInvalidRecord},
		{"control", func() []byte {
			b := brokertest.Batch(1, -1, -1, -1, 1)
			b[22] |= node.AttrControl
			return brokertest.Recrc(b)
		}, 1 << 20, node.ErrInvalidRecord},
		{"transactional", func() []byte {
			b := brokertest.Batch(1, -1, -1, -1, 1)
			b[22] |= node.AttrTransactional
			return brokertest.Recrc(b)
		}, 1 << 20, node.ErrInvalidRecord},
		{"codec 7", func() []byte { b := brokertest.Batch(1, -1, -1, -1, 1); b[22] |= 7; return brokertest.Recrc(b) }, 1 << 20, node.ErrCorruptMessage},
		{"magic 1", func() []byte { b := brokertest.Batch(1, -1, -1, -1, 1); b[16] = 1; return b }, 1 << 20, node.ErrCorruptMessage},
		{"base offset", func() []byte { b := brokertest.Batch(1, -1, -1, -1, 1); b[7] = 5; return b }, 1 << 20, node.ErrInvalidRecord},
		{"count mismatch", func() []byte {
			b := brokertest.Batch(2, -1, -1, -1, 1)
			binary.BigEndian.PutUint32(b[57:], 5)
			return brokertest.Recrc(b)
		}, 1 << 20, node.ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := node.ValidateBatch(tt.batch(), tt.max)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("validateBatch = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFirstOffsetAtOrAfter(t *testing.T) {
	b := brokertest.Batch(5, -1, -1, -1, 1000)
	binary.BigEndian.PutUint64(b[0:], 40) // stamped base offset
	for _, tt := range []struct {
		ts, from int64
		off      int64
		found    bool
	}{
		{999, 0, 40, true}, {1000, 0, 40, true}, {1003, 0, 43, true}, {1004, 0, 44, true}, {1005, 0, 0, false},
		// The log start inside the batch (after DeleteRecords): records below it are gone.
		{999, 42, 42, true}, {1003, 42, 43, true}, {999, 45, 0, false},
	} {
		off, _, found, err := node.FirstOffsetAtOrAfter(b, tt.ts, tt.from)
		if err != nil || found != tt.found || (found && off != tt.off) {
			t.Errorf("ts %d from %d: off %d found %v err %v; want %d %v", tt.ts, tt.from, off, found, err, tt.off, tt.found)
		}
	}
}

// FuzzEachRecord: a client controls the records inside the batches it
// produces (the CRC only proves they arrived intact), and the broker decodes
// them for timestamp lookups and HTTP fetches. No input may panic it.
func FuzzEachRecord(f *testing.F) {
	f.Add(brokertest.Batch(3, -1, -1, -1, 1000))
	for codec := byte(1); codec <= 4; codec++ {
		b := brokertest.Batch(2, -1, -1, -1, 5)
		b[22] |= codec
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		_ = node.EachRecord(b, func(_, _ int64, _ *kmsg.Record) bool { n++; return n < 100000 })
		_, _, _, _ = node.FirstOffsetAtOrAfter(b, 0, 0)
	})
}

func TestSnappyBombRefused(t *testing.T) {
	// A varint length claiming ~4 GiB, then nothing.
	if _, err := records.Decompress(2, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("a snappy block claiming 4 GiB was decoded")
	}
}
