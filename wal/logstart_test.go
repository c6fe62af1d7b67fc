package wal

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

func TestLogStartCodec(t *testing.T) {
	for _, start := range []Offset{0, 1, 1 << 40} {
		got, err := decodeLogStart(encodeLogStart(start))
		if err != nil || got != start {
			t.Fatalf("round trip of %d: %d %v", start, got, err)
		}
	}
	good := encodeLogStart(7)
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		err    error
	}{
		{"empty", func([]byte) []byte { return nil }, ErrCorrupt},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorrupt},
		{"newer version", func(b []byte) []byte { b[5] = 9; return b }, ErrUnknownVersion},
		{"short", func(b []byte) []byte { return b[:19] }, ErrCorrupt},
		{"bit flip", func(b []byte) []byte { b[15] ^= 1; return b }, ErrCorrupt},
		{"bad crc", func(b []byte) []byte { b[19] ^= 1; return b }, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeLogStart(tc.mutate(append([]byte(nil), good...)))
			wantErr(t, err, tc.err)
		})
	}
}

func TestAdvanceStart(t *testing.T) {
	// 10 batches of 3 offsets, 2 per segment: segments at 0, 6, 12, 18, 24.
	cases := []struct {
		name      string
		to        Offset
		err       error
		start     Offset
		deleted   int // by the Maintain that follows
		firstRead Offset
	}{
		{"inside a batch", 10, nil, 10, 1, 9},
		{"segment base", 12, nil, 12, 2, 12},
		{"inside the active segment", 28, nil, 28, 4, 27},
		{"end rolls the active segment", 30, nil, 30, 5, 30},
		{"at start", 0, nil, 0, 0, 0},
		{"above end", 31, ErrOffsetOutOfRange, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
			l := mustOpen(t, mem, cfg)
			var a appended
			for i := range 10 {
				mustAppend(t, l, &a, mkBatch(3, 60, int64(i), byte(i)))
				if i == 6 {
					l.Sync() // AdvanceStart must sync the rest itself
				}
			}
			start, err := l.AdvanceStart(tc.to)
			wantErr(t, err, tc.err)
			if start != tc.start || l.StartOffset() != tc.start {
				t.Fatalf("start %d (reported %d), want %d", l.StartOffset(), start, tc.start)
			}
			if l.DurableEnd() < tc.start {
				t.Fatalf("durable end %d below the start %d", l.DurableEnd(), tc.start)
			}
			if _, err := l.Read(tc.start-1, 30, 100); tc.start > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below the start: %v", err)
			}
			wantBatches := a.batches[tc.firstRead/3:]
			check := func(l *Log, when string) {
				t.Helper()
				if l.StartOffset() != tc.start || l.EndOffset() != 30 {
					t.Fatalf("%s: [%d, %d), want [%d, 30)", when, l.StartOffset(), l.EndOffset(), tc.start)
				}
				if got := readAll(t, l, 1<<20); !equalBatches(got, wantBatches) {
					t.Fatalf("%s: read %d batches, want %d", when, len(got), len(wantBatches))
				}
				// Timestamps below the start find the first batch still readable.
				if got, err := l.FindTimestamp(0); err != nil || (len(wantBatches) > 0 && string(got) != string(wantBatches[0])) {
					t.Fatalf("%s: FindTimestamp(0): %d bytes, %v", when, len(got), err)
				}
			}
			check(l, "advanced")
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			crashed := mem.CrashClone() // before Maintain: the dead segments are still on disk
			if n, err := l.Maintain(); err != nil || n != tc.deleted {
				t.Fatalf("maintain deleted %d (%v), want %d", n, err, tc.deleted)
			}
			check(l, "after maintain")
			checkInvariants(t, l, true)
			check(mustOpen(t, crashed, cfg), "crash before maintain")
			check(mustOpen(t, mem.CrashClone(), cfg), "crash after maintain")
			l.Close()
			r := mustOpen(t, mem, cfg)
			check(r, "reopened")
			if base, _ := mustAppend(t, r, nil, mkBatch(1, 1, 99, 0)); base != 30 {
				t.Fatalf("next append got %d", base)
			}
			if err := r.Truncate(tc.start - 1); tc.start > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("truncate below the start: %v", err)
			}
		})
	}
}

// TestAdvanceStartFailureIsSticky: a checkpoint that cannot be written stops
// the log, like any failed write.
func TestAdvanceStartFailureIsSticky(t *testing.T) {
	isTmp := func(p string) bool { return p == "/data/t-0/"+logStartName+vfs.TmpSuffix }
	mem := vfs.NewMem()
	l := mustOpen(t, vfs.NewFaulty(mem, vfs.FailNth(vfs.OpSync, 2, isTmp, false)), Config{})
	mustAppend(t, l, nil, mkBatch(5, 10, 1, 1))
	if _, err := l.AdvanceStart(3); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("advance start: %v", err)
	}
	if l.StartOffset() != 0 {
		t.Fatalf("start moved to %d without its checkpoint", l.StartOffset())
	}
	if _, _, err := l.Append(mkBatch(1, 1, 1, 1), 0); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append after a failed checkpoint: %v", err)
	}
}
