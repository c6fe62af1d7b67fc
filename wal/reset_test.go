package wal

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// TruncateFullyAndStartAt empties a log of several segments, some below an
// AdvanceStart inside a batch, clears its epoch chain and restarts it at a
// higher offset, across a crash at the end and a reopen.
func TestTruncateFullyAndStartAt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
	l := mustOpen(t, mem, cfg)
	for i := range 10 { // 10 batches of 3 offsets over 5 segments
		mustAppend(t, l, nil, mkBatch(3, 60, int64(i), byte(i)))
	}
	if _, err := l.AdvanceStart(10); err != nil { // inside a batch
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(29); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("restart below the end: %v", err)
	}
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, when string) {
		t.Helper()
		if l.StartOffset() != 100 || l.EndOffset() != 100 || l.Size() != 0 || len(l.Epochs()) != 0 {
			t.Fatalf("%s: [%d, %d), %d bytes, epochs %+v; want an empty log at 100 with no epochs",
				when, l.StartOffset(), l.EndOffset(), l.Size(), l.Epochs())
		}
		if l.FencedEpoch() != 0 {
			t.Fatalf("%s: fenced %d", when, l.FencedEpoch())
		}
	}
	check(l, "restarted")
	check(mustOpen(t, mem.CrashClone(), cfg), "after a crash")
	if base, _ := mustAppend(t, l, nil, mkBatch(2, 10, 1, 0)); base != 100 {
		t.Fatalf("next append at %d, want 100", base)
	}
	if e := l.Epochs(); len(e) != 1 || e[0] != (EpochEntry{Epoch: 7, StartOffset: 100}) {
		t.Fatalf("epochs after the append: %+v", e)
	}
	l.Close()
	r := mustOpen(t, mem, cfg)
	if r.StartOffset() != 100 || r.EndOffset() != 102 {
		t.Fatalf("reopened: [%d, %d)", r.StartOffset(), r.EndOffset())
	}
}
