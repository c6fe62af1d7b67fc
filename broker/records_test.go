package broker

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/klauspost/compress/gzip"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/records"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gzipBatch is brokertest.Batch(n, ...) with its records gzipped.
func gzipBatch(t *testing.T, n int) []byte {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(brokertest.Batch(n, -1, -1, -1, 1000)); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(rb.Records); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	rb.Records, rb.Attributes = z.Bytes(), rb.Attributes|1
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestDecompressionSlots: however many goroutines decode compressed batches
// at once, at most records.MaxConcurrentDecompressions hold a decompressed buffer;
// the others wait for a slot. Uncompressed batches need no slot.
func TestDecompressionSlots(t *testing.T) {
	const callers = 4 * records.MaxConcurrentDecompressions
	batch := gzipBatch(t, 3)
	var inside, most atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failed test still lets the held decoders go
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := node.EachRecord(batch, func(_, _ int64, _ *kmsg.Record) bool {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				inside.Add(-1)
				return false
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	brokertest.Eventually(t, 10*time.Second, "every slot taken", func() bool { return inside.Load() >= records.MaxConcurrentDecompressions })

	// With every slot taken, an uncompressed batch is still decoded.
	n := 0
	if err := node.EachRecord(brokertest.Batch(3, -1, -1, -1, 1000), func(_, _ int64, _ *kmsg.Record) bool { n++; return true }); err != nil || n != 3 {
		t.Fatalf("uncompressed batch while the slots are taken: %d records, %v", n, err)
	}
	free()
	brokertest.WaitGroupWithin(t, &wg, 10*time.Second, "every decoder to finish once released")
	if got := most.Load(); got > records.MaxConcurrentDecompressions {
		t.Fatalf("%d batches were decompressed at once; the bound is %d", got, records.MaxConcurrentDecompressions)
	}
}
