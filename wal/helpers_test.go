package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// mkBatch builds a valid v2 batch of count records with a payload of n bytes
// (filled with fill; records are not decoded by the log) and the given max
// timestamp. Base offset and epoch are zero.
func mkBatch(count, n int, maxTS int64, fill byte) []byte {
	b := make([]byte, BatchHeaderSize+n)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchLengthOverhead))
	b[offMagic] = batchMagic
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(maxTS-int64(count)+1))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	for i := BatchHeaderSize; i < len(b); i++ {
		b[i] = fill + byte(i)
	}
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// fakeClock is an injectable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func mustOpen(t testing.TB, fs vfs.FS, cfg Config) *Log {
	t.Helper()
	l, err := Open(fs, "/data/t-0", cfg, zerolog.Nop())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appended is what a test appended: each batch (stamped) in offset order.
type appended struct {
	batches [][]byte
}

func (a *appended) add(b []byte) { a.batches = append(a.batches, append([]byte(nil), b...)) }

func mustAppend(t testing.TB, l *Log, a *appended, b []byte) (Offset, Offset) {
	t.Helper()
	base, last, err := l.Append(b, 7)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if a != nil {
		a.add(b)
	}
	return base, last
}

// splitBatches splits concatenated batches.
func splitBatches(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		h, err := ParseBatchHeader(b)
		if err != nil || h.Size() > len(b) {
			t.Fatalf("split: bad batch (%d bytes left): %v", len(b), err)
		}
		if err := CheckCRC(b[:h.Size()]); err != nil {
			t.Fatalf("split: %v", err)
		}
		out = append(out, b[:h.Size()])
		b = b[h.Size():]
	}
	return out
}

// readAll reads the whole log from StartOffset with the given maxBytes.
func readAll(t testing.TB, l *Log, maxBytes int) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.Read(off, l.EndOffset(), maxBytes)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		bs := splitBatches(t, b)
		if len(bs) == 0 {
			t.Fatalf("read at %d returned nothing below end %d", off, l.EndOffset())
		}
		out = append(out, bs...)
		h, _ := ParseBatchHeader(bs[len(bs)-1])
		off = h.LastOffset() + 1
	}
	return out
}

func equalBatches(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// deleteOldest deletes the oldest sealed segments while the segments from
// the log start on hold more than keepBytes, the decision a size-based
// retention makes (tier's retention state machine makes it in production):
// it picks the offset from Segments and calls DeleteBelow, which also
// removes the segments already below the start. The caller is the appender.
func deleteOldest(l *Log, keepBytes int64) (int, error) {
	segs, start := l.Segments(), l.StartOffset()
	var total int64
	for _, s := range segs {
		if s.Next > start {
			total += s.Size
		}
	}
	below := Offset(0)
	for _, s := range segs[:len(segs)-1] {
		if total <= keepBytes {
			break
		}
		if s.Next > start {
			total -= s.Size
		}
		below = s.Next
	}
	return l.DeleteBelow(below)
}

// waitLimit bounds every wait of a test on another goroutine, so a broken
// log fails in seconds instead of at the package timeout.
const waitLimit = 10 * time.Second

// recvWithin receives from ch, failing the test if nothing arrives within
// waitLimit.
func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// waitGroupWithin waits for wg, failing the test after waitLimit.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recvWithin(t, done, what)
}
