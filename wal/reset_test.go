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
	if err := l.TruncateFullyAndStartAt(29, EpochEntry{Epoch: UndefinedEpoch}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("restart below the end: %v", err)
	}
	if err := l.TruncateFullyAndStartAt(100, EpochEntry{Epoch: UndefinedEpoch}); err != nil {
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

// A log whose start lies inside its first segment restarts at a higher
// offset with the epoch in force there. The broker used Truncate to the
// log start and RestartAt, which refused such a log ("the log holds N
// bytes"), so a follower that had adopted its leader's log start and whose
// log ended below the remote end could not start at all (chaos disk-loss).
func TestTruncateFullyAndStartAtKeepsTheGivenEpoch(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
	l := mustOpen(t, mem, cfg)
	for i := range 4 {
		mustAppend(t, l, nil, mkBatch(3, 60, 3, byte(i)))
	}
	if _, err := l.AdvanceStart(3); err != nil { // the second batch, in the first segment
		t.Fatal(err)
	}
	if err := l.Truncate(l.StartOffset()); err != nil {
		t.Fatal(err)
	}
	last := EpochEntry{Epoch: 5, StartOffset: 40}
	if err := l.RestartAt(50, last); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("the old way, RestartAt after Truncate to the start: %v; want it refused (bytes below the start)", err)
	}
	if err := l.TruncateFullyAndStartAt(50, last); err != nil {
		t.Fatal(err)
	}
	for _, lg := range []*Log{l, mustOpen(t, mem.CrashClone(), cfg)} {
		if lg.StartOffset() != 50 || lg.EndOffset() != 50 || lg.Size() != 0 {
			t.Fatalf("[%d, %d), %d bytes; want an empty log at 50", lg.StartOffset(), lg.EndOffset(), lg.Size())
		}
		if e := lg.Epochs(); len(e) != 1 || e[0].Epoch != 5 {
			t.Fatalf("epochs %+v, want epoch 5 in force at 49", e)
		}
	}
}
