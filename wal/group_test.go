package wal

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// TestAppendGroupMatchesAppend: a log built with AppendGroup holds the same
// batches at the same offsets as one built batch by batch, across rolls,
// with one write per segment touched instead of one per batch.
func TestAppendGroupMatchesAppend(t *testing.T) {
	cfg := Config{SegmentBytes: 1500, IndexIntervalBytes: 200}
	one := mustOpen(t, vfs.NewMem(), cfg)
	var writes atomic.Int64
	counting := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasSuffix(path, ".log") {
			writes.Add(1)
		}
		return nil
	})
	grouped := mustOpen(t, counting, cfg)
	var a appended
	total := 0
	for round := range 20 {
		var group [][]byte
		for j := range 1 + round%7 {
			b := mkBatch(1+j%3, 30+(round*j*13)%200, int64(round*10+j), byte(round+j))
			c := append([]byte(nil), b...)
			mustAppend(t, one, &a, b)
			group = append(group, c)
		}
		total += len(group)
		before := grouped.EndOffset()
		for i, res := range grouped.AppendGroup(group, 7) {
			if res.Err != nil {
				t.Fatalf("round %d batch %d: %v", round, i, res.Err)
			}
			if i == 0 && res.Base != before {
				t.Fatalf("round %d: first base %d, log end was %d", round, res.Base, before)
			}
		}
	}
	if got := readAll(t, grouped, 1<<20); !equalBatches(got, a.batches) {
		t.Fatalf("grouped log differs: %d batches, want %d", len(got), len(a.batches))
	}
	if n := len(grouped.segs); n < 5 || writes.Load() >= int64(total) || writes.Load() > int64(20+n) {
		t.Fatalf("%d writes for %d batches in 20 groups over %d segments", writes.Load(), total, n)
	}
}

func TestAppendGroupSkipsInvalidBatches(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{})
	bad := mkBatch(2, 50, 1, 1)
	bad[len(bad)-1] ^= 0xff
	res := l.AppendGroup([][]byte{mkBatch(2, 50, 1, 1), bad, mkBatch(3, 50, 2, 2)}, 1)
	if res[0].Err != nil || res[2].Err != nil || !errors.Is(res[1].Err, ErrCorrupt) {
		t.Fatalf("results %+v", res)
	}
	if res[0].Base != 0 || res[2].Base != 2 || res[2].Last != 4 || l.EndOffset() != 5 {
		t.Fatalf("offsets %+v, end %d", res, l.EndOffset())
	}
}

func TestAppendGroupWriteFailureIsSticky(t *testing.T) {
	fs := vfs.NewFaulty(vfs.NewMem(), vfs.FailNth(vfs.OpWrite, 2, func(p string) bool { return strings.HasSuffix(p, ".log") }, false))
	l := mustOpen(t, fs, Config{})
	if res := l.AppendGroup([][]byte{mkBatch(1, 10, 1, 1)}, 1); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	res := l.AppendGroup([][]byte{mkBatch(1, 10, 1, 1), mkBatch(1, 10, 1, 1)}, 1)
	if res[0].Err == nil || res[1].Err == nil || l.EndOffset() != 1 {
		t.Fatalf("failed write: %+v, end %d", res, l.EndOffset())
	}
	if res := l.AppendGroup([][]byte{mkBatch(1, 10, 1, 1)}, 1); res[0].Err == nil {
		t.Fatal("append after a failed write succeeded")
	}
}

// TestAppendStampedGroupCopiesALeader: a follower that copies a leader's
// batches with AppendStampedGroup, in chunks that cross epochs and segment
// rolls, holds the same bytes at the same offsets and the same epoch chain,
// with one write per segment run between epoch changes; a batch that does
// not follow the log end fails, with every batch after it, and leaves the
// log as it was after the ones before.
func TestAppendStampedGroupCopiesALeader(t *testing.T) {
	cfg := Config{SegmentBytes: 1500, IndexIntervalBytes: 200}
	leader := mustOpen(t, vfs.NewMem(), cfg)
	for round := range 12 {
		var group [][]byte
		for j := range 1 + round%4 {
			group = append(group, mkBatch(1+j%3, 30+(round*j*13)%200, int64(round*10+j), byte(round+j)))
		}
		for _, res := range leader.AppendGroup(group, Epoch(1+round/4)) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	batches := readAll(t, leader, 1<<20)
	follower := mustOpen(t, vfs.NewMem(), cfg)
	for i := 0; i < len(batches); i += 5 {
		chunk := batches[i:min(i+5, len(batches))]
		for j, res := range follower.AppendStampedGroup(chunk) {
			if res.Err != nil {
				t.Fatalf("chunk at %d, batch %d: %v", i, j, res.Err)
			}
		}
	}
	if got := readAll(t, follower, 1<<20); !equalBatches(got, batches) {
		t.Fatalf("follower holds %d batches that differ from the leader's %d", len(got), len(batches))
	}
	if got, want := follower.Epochs(), leader.Epochs(); len(got) != len(want) || len(got) != 3 {
		t.Fatalf("epoch chains %v and %v", got, want)
	} else {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("epoch chains %v and %v", got, want)
			}
		}
	}
	// Out of order: a gap fails it and everything after it.
	end := follower.EndOffset()
	res := follower.AppendStampedGroup([][]byte{batches[0], batches[1]})
	if !errors.Is(res[0].Err, ErrInvalidBatch) || !errors.Is(res[1].Err, ErrInvalidBatch) || follower.EndOffset() != end {
		t.Fatalf("replayed batches: %v %v, end %d (was %d)", res[0].Err, res[1].Err, follower.EndOffset(), end)
	}
}
