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
