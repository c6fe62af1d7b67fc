package wal

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

func FuzzParseBatchHeader(f *testing.F) {
	f.Add(mkBatch(1, 0, 1, 0))
	f.Add(mkBatch(3, 100, 1000, 7))
	f.Add(make([]byte, BatchHeaderSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBatchHeader(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if h.Magic != batchMagic || h.Size() < BatchHeaderSize {
			t.Fatalf("accepted header %+v", h)
		}
		crcErr := CheckCRC(b)
		if crcErr != nil && !errors.Is(crcErr, ErrCorrupt) && !errors.Is(crcErr, ErrInvalidBatch) {
			t.Fatalf("unclassified crc error %v", crcErr)
		}
		// A valid batch prefix decodes again the same after a re-stamp round trip.
		if crcErr == nil {
			c := append([]byte(nil), b[:h.Size()]...)
			stampBatch(c, h.BaseOffset, h.LeaderEpoch)
			if h2, err := ParseBatchHeader(c); err != nil || h2 != h || CheckCRC(c) != nil {
				t.Fatalf("re-decode: %+v %v", h2, err)
			}
		}
	})
}

// fuzzSegments builds a valid two-segment log and returns its files' bytes.
func fuzzSegments(tb testing.TB) (log0, idx0, tidx0, log1 []byte) {
	fs := vfs.NewMem()
	l, err := Open(fs, "/d", Config{SegmentBytes: 300, IndexIntervalBytes: 1}, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 5 {
		if _, _, err := l.Append(mkBatch(2, 60, int64(i), byte(i)), 1); err != nil {
			tb.Fatal(err)
		}
	}
	l.Close()
	rd := func(name string) []byte {
		b, err := readFile(fs, filepath.Join("/d", name))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return rd(segmentName(0, logSuffix)), rd(segmentName(0, indexSuffix)), rd(segmentName(0, timeIndexSuffix)), rd(segmentName(4, logSuffix))
}

// FuzzRecoverSegment feeds arbitrary bytes as a sealed segment with index
// files followed by an active segment. Open must not panic, and the log it
// returns must be consistent, readable, appendable and recover to itself.
func FuzzRecoverSegment(f *testing.F) {
	log0, idx0, tidx0, log1 := fuzzSegments(f)
	f.Add(log0, idx0, tidx0, log1)
	f.Add(log0, []byte("garbage"), tidx0, log1)
	f.Add(log0[:len(log0)-7], idx0, tidx0, log1)
	f.Add(log0, idx0, tidx0, log1[:len(log1)-1])
	f.Add([]byte{}, []byte{}, []byte{}, []byte{})
	flipped := bytes.Clone(log0)
	flipped[100] ^= 1
	f.Add(flipped, idx0, tidx0, log1)
	f.Fuzz(func(t *testing.T, log0, idx0, tidx0, log1 []byte) {
		fs := vfs.NewMem()
		fs.MkdirAll("/d", 0o755)
		for name, b := range map[string][]byte{
			segmentName(0, logSuffix): log0, segmentName(0, indexSuffix): idx0,
			segmentName(0, timeIndexSuffix): tidx0, segmentName(4, logSuffix): log1,
		} {
			w, _ := fs.Create(filepath.Join("/d", name))
			w.Write(b)
			w.Close()
		}
		cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
		l, err := Open(fs, "/d", cfg, zerolog.Nop())
		if err != nil {
			t.Fatalf("open: %v", err) // recovery repairs; only I/O errors may fail Open
		}
		defer l.Close()
		checkInvariants(t, l, false)
		readTolerant(t, l)
		// Epoch 1, as fuzzSegments wrote: a lower one is ErrStaleEpoch.
		if _, _, err := l.Append(mkBatch(1, 5, 1, 1), 1); err != nil {
			t.Fatal(err)
		}
		got := readTolerant(t, l)
		for _, ts := range []int64{-1, 0, 3, 1 << 40} {
			if _, err := l.FindTimestamp(ts); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("FindTimestamp(%d): %v", ts, err)
			}
		}
		l.Close()
		l2, err := Open(fs, "/d", cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		if again := readTolerant(t, l2); !equalBatches(again, got) {
			t.Fatalf("reopen changed the log: %d batches, was %d", len(again), len(got))
		}
	})
}

// readTolerant reads the whole log checking structure (not CRCs, which a
// trusted sealed segment need not pass) and offset continuity.
func readTolerant(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		b, err := l.Read(off, l.EndOffset(), 1000)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		for len(b) > 0 {
			h, err := ParseBatchHeader(b)
			if err != nil || h.Size() > len(b) || h.BaseOffset > off || h.LastOffset() < off {
				t.Fatalf("read at %d: bad batch %+v: %v", off, h, err)
			}
			out = append(out, b[:h.Size()])
			b = b[h.Size():]
			off = h.LastOffset() + 1
		}
	}
	return out
}
