package wal

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

func TestSegmentsAndDeleteBelow(t *testing.T) {
	clk := newClock()
	fs := vfs.NewMem()
	cfg := Config{SegmentBytes: 200, Now: clk.Now}
	l := mustOpen(t, fs, cfg)
	now := clk.Now().UnixMilli()
	for i := range 4 { // four sealed segments of one 10-offset batch each
		mustAppend(t, l, nil, mkBatch(10, 100, now+int64(i), 0))
	}
	mustAppend(t, l, nil, mkBatch(1, 10, now+10, 0)) // the active segment
	segs := l.Segments()
	if len(segs) != 5 || segs[4].Sealed || !segs[3].Sealed {
		t.Fatalf("segments %+v", segs)
	}
	for i, s := range segs[:4] {
		if s.Base != Offset(10*i) || s.Next != Offset(10*i+10) || s.MaxTimestamp != now+int64(i) || s.Size != 161 {
			t.Fatalf("segment %d: %+v", i, s)
		}
	}
	steps := []struct {
		below     Offset
		deleted   int
		wantStart Offset
	}{
		{0, 0, 0},
		{9, 0, 0},   // inside the first segment: it stays whole
		{10, 1, 10}, // exactly its end: it goes
		{35, 2, 30}, // two more; the third is only partly below
		{1000, 1, 40},
		{1000, 0, 40}, // never the active segment
	}
	for _, s := range steps {
		n, err := l.DeleteBelow(s.below)
		if err != nil || n != s.deleted || l.StartOffset() != s.wantStart {
			t.Fatalf("DeleteBelow(%d): %d, %v, start %d; want %d deleted, start %d", s.below, n, err, l.StartOffset(), s.deleted, s.wantStart)
		}
	}
	if _, err := l.Read(39, 41, 1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v", err)
	}
	// The deletions and the start survive a crash (no Close).
	l2 := mustOpen(t, fs.CrashClone(), cfg)
	if l2.StartOffset() != 40 || l2.EndOffset() != 41 || len(l2.Segments()) != 1 {
		t.Fatalf("after a crash: start %d end %d segments %+v", l2.StartOffset(), l2.EndOffset(), l2.Segments())
	}
}

// RestartAt moves an empty log forward and keeps the epoch of its last
// offset known, across a crash.
func TestRestartAt(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Config{})
	if err := l.RestartAt(5000, EpochEntry{Epoch: 3, StartOffset: 4000}); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 5000 || l.EndOffset() != 5000 || l.DurableEnd() != 5000 {
		t.Fatalf("start %d end %d durable %d", l.StartOffset(), l.EndOffset(), l.DurableEnd())
	}
	if e := l.Epochs(); len(e) != 1 || e[0].Epoch != 3 || e[0].StartOffset >= 5000 {
		t.Fatalf("epochs %+v: the epoch at 4999 must be known", e)
	}
	l2 := mustOpen(t, fs.CrashClone(), Config{})
	if l2.StartOffset() != 5000 || l2.EndOffset() != 5000 || len(l2.Epochs()) == 0 || l2.Epochs()[0].Epoch != 3 {
		t.Fatalf("after a crash: start %d end %d epochs %+v", l2.StartOffset(), l2.EndOffset(), l2.Epochs())
	}
	mustAppend(t, l2, nil, mkBatch(1, 10, 1, 0))
	if err := l2.RestartAt(9000, EpochEntry{Epoch: 4}); err == nil {
		t.Fatal("RestartAt of a log holding records succeeded")
	}
}
