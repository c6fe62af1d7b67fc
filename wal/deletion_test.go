package wal

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// buildSegments appends n batches of one offset each, one per segment
// (SegmentBytes 200, 161-byte batches), syncs, and returns what it appended.
func buildSegments(t *testing.T, fs vfs.FS, n int) (*Log, appended, Config) {
	t.Helper()
	cfg := Config{SegmentBytes: 200}
	l := mustOpen(t, fs, cfg)
	var a appended
	for i := range n {
		mustAppend(t, l, &a, mkBatch(1, 100, int64(i), byte(i)))
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l, a, cfg
}

// TestDeleteBelowRemoveFailure: a failed removal during a deletion used to
// let it go on deleting newer segments, so the next Open found a gap after
// the surviving segment and dropped every later one, the active one
// included (durable end 21, only [0, 2) left). DeleteBelow must stop at the
// failure, and recovery must keep everything from the log start on.
func TestDeleteBelowRemoveFailure(t *testing.T) {
	isLog := func(p string) bool { return strings.HasSuffix(p, logSuffix) }
	cases := []struct {
		name  string
		failN int64 // the nth removal of a .log file fails
		crash bool  // reopen a crash clone instead of closing
	}{
		{"first removal, close", 1, false},
		{"second removal, close", 2, false},
		{"second removal, crash", 2, true},
		{"fifth removal, crash", 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs := vfs.NewFaulty(mem, vfs.FailNth(vfs.OpRemove, tc.failN, isLog, false))
			l, a, cfg := buildSegments(t, fs, 21)
			n, err := l.DeleteBelow(16) // keep the last 5 segments
			if !errors.Is(err, vfs.ErrInjected) || n != int(tc.failN)-1 {
				t.Fatalf("delete below 16: %d, %v; want %d and the injected removal failure", n, err, tc.failN-1)
			}
			start, durable := l.StartOffset(), l.DurableEnd()
			if start != 16 {
				t.Fatalf("start %d, want 16: the start is checkpointed before any removal", start)
			}
			if durable != 21 || l.EndOffset() != 21 {
				t.Fatalf("durable end %d, end %d, want 21", durable, l.EndOffset())
			}
			want := a.batches[start:]
			if got := readAll(t, l, 1<<20); !equalBatches(got, want) {
				t.Fatalf("before reopen: read %d batches from %d, want %d", len(got), start, len(want))
			}
			var reopened vfs.FS = mem
			if tc.crash {
				reopened = mem.CrashClone()
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			r := mustOpen(t, reopened, cfg)
			if r.EndOffset() < durable || r.StartOffset() > start {
				t.Fatalf("reopened [%d, %d), before [%d, %d) with durable end %d", r.StartOffset(), r.EndOffset(), start, l.EndOffset(), durable)
			}
			got := readAll(t, r, 1<<20)
			if !equalBatches(got, a.batches[r.StartOffset():]) {
				t.Fatalf("reopened: read %d batches from %d, want %d", len(got), r.StartOffset(), 21-int(r.StartOffset()))
			}
			checkInvariants(t, r, true)
			if base, _ := mustAppend(t, r, nil, mkBatch(1, 1, 0, 0)); base != 21 {
				t.Fatalf("offset %d reused: next append got %d", 21, base)
			}
		})
	}
}

// TestDeleteRetriesAfterRemoveFailure: the segment DeleteBelow could not
// remove is unreadable at once, and removed by the next call, whether
// DeleteBelow (with any offset) or Maintain.
func TestDeleteRetriesAfterRemoveFailure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry func(*Log) (int, error)
	}{
		{"DeleteBelow again", func(l *Log) (int, error) { return l.DeleteBelow(8) }},
		{"DeleteBelow below the start", func(l *Log) (int, error) { return l.DeleteBelow(0) }},
		{"Maintain", (*Log).Maintain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isLog := func(p string) bool { return strings.HasSuffix(p, logSuffix) }
			mem := vfs.NewMem()
			l, _, _ := buildSegments(t, vfs.NewFaulty(mem, vfs.FailNth(vfs.OpRemove, 2, isLog, false)), 10)
			if n, err := l.DeleteBelow(8); n != 1 || !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("first deletion: %d %v", n, err)
			}
			if _, err := l.Read(1, 10, 100); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read of a segment the deletion failed to remove: %v", err)
			}
			if n, err := tc.retry(l); n != 7 || err != nil {
				t.Fatalf("retry: %d %v", n, err)
			}
			if l.StartOffset() != 8 || len(mem.Files()) != 3+1+2 { // 1 sealed, 1 active, logstart and epochs
				t.Fatalf("start %d, files %v", l.StartOffset(), mem.Files())
			}
		})
	}
}

// TestRecoveryGaps: what Open does with segments that do not follow each
// other (see recover.go).
func TestRecoveryGaps(t *testing.T) {
	dir := "/data/t-0"
	rm := func(fs *vfs.Mem, base Offset, suffixes ...string) {
		for _, s := range suffixes {
			if err := fs.Remove(filepath.Join(dir, segmentName(base, s))); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := []string{logSuffix, indexSuffix, timeIndexSuffix}
	cases := []struct {
		name       string
		damage     func(fs *vfs.Mem)
		err        error
		start, end Offset // when err is nil
	}{
		{"middle segment lost", func(fs *vfs.Mem) { rm(fs, 4, all...) }, ErrCorrupt, 0, 0},
		{"first segment lost", func(fs *vfs.Mem) { rm(fs, 0, all...) }, ErrCorrupt, 0, 0},
		{"gap after an unsynced segment drops the newer side", func(fs *vfs.Mem) {
			rm(fs, 4, all...)
			rm(fs, 3, indexSuffix) // segment 3 was never completely synced
		}, nil, 0, 4},
		{"no checkpoint: gap drops the older side", func(fs *vfs.Mem) {
			rm(fs, 4, all...)
			fs.Remove(filepath.Join(dir, logStartName))
		}, nil, 5, 10},
		{"corrupt checkpoint", func(fs *vfs.Mem) {
			b := encodeLogStart(3)
			b[10] ^= 1
			vfs.WriteFileDurable(fs, filepath.Join(dir, logStartName), b)
		}, ErrCorrupt, 0, 0},
		{"checkpoint from a newer version", func(fs *vfs.Mem) {
			b := encodeLogStart(3)
			b[5] = 2
			vfs.WriteFileDurable(fs, filepath.Join(dir, logStartName), b)
		}, ErrUnknownVersion, 0, 0},
		{"checkpoint above the end", func(fs *vfs.Mem) {
			vfs.WriteFileDurable(fs, filepath.Join(dir, logStartName), encodeLogStart(11))
		}, ErrCorrupt, 0, 0},
		{"leftovers below the checkpoint are removed", func(fs *vfs.Mem) {
			vfs.WriteFileDurable(fs, filepath.Join(dir, logStartName), encodeLogStart(6))
			rm(fs, 2, all...) // a gap below the start does not matter
		}, nil, 6, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, a, cfg := buildSegments(t, fs, 10)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(fs)
			r, err := Open(fs, dir, cfg, zerolog.Nop())
			wantErr(t, err, tc.err)
			if err != nil {
				if !strings.Contains(err.Error(), dir) {
					t.Fatalf("error does not name the log: %v", err)
				}
				return
			}
			defer r.Close()
			if r.StartOffset() != tc.start || r.EndOffset() != tc.end {
				t.Fatalf("recovered [%d, %d), want [%d, %d)", r.StartOffset(), r.EndOffset(), tc.start, tc.end)
			}
			if got := readAll(t, r, 1<<20); !equalBatches(got, a.batches[tc.start:tc.end]) {
				t.Fatalf("recovered %d batches", len(got))
			}
			for _, f := range fs.Files() {
				if base, _, ok := parseSegmentName(filepath.Base(f)); ok && (base < tc.start || base > tc.end) {
					t.Fatalf("segment file %s outside [%d, %d] survived", f, tc.start, tc.end)
				}
			}
		})
	}
}

// TestOpenNestedDirSurvivesCrash: Open used to create missing parents with
// MkdirAll and fsync only the immediate parent, so a crash could lose the
// whole chain of new directories with the synced data in them.
func TestOpenNestedDirSurvivesCrash(t *testing.T) {
	for _, dir := range []string{"/a/b/c/t-0", "rel/b/c/t-0"} {
		t.Run(dir, func(t *testing.T) {
			fs := vfs.NewMem()
			l, err := Open(fs, dir, Config{}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var a appended
			mustAppend(t, l, &a, mkBatch(3, 50, 1, 1))
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			r, err := Open(fs.CrashClone(), dir, Config{}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := readAll(t, r, 1<<20); r.EndOffset() != 3 || !equalBatches(got, a.batches) {
				t.Fatalf("after crash: end %d, %d batches", r.EndOffset(), len(got))
			}
		})
	}
}

// TestDeleteIsDurable: Delete moves the directory to the trash before
// removing anything, so a crash at any point leaves the whole log or none.
func TestDeleteIsDurable(t *testing.T) {
	for step := int64(1); step < 100; step++ {
		mem := vfs.NewMem()
		var armed bool
		var crashed *vfs.Mem
		var calls int64
		fs := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
			if armed && crashed == nil && (op == vfs.OpRemove || op == vfs.OpRename || op == vfs.OpSyncDir) {
				if calls++; calls == step {
					crashed = mem.CrashClone()
					return vfs.ErrInjected
				}
			}
			return nil
		})
		l, a, cfg := buildSegments(t, fs, 5)
		armed = true
		err := l.Delete()
		if crashed == nil {
			if err != nil {
				t.Fatalf("delete: %v", err)
			}
			if files := mem.CrashClone().Files(); len(files) != 0 {
				t.Fatalf("files survived a crash after delete: %v", files)
			}
			return
		}
		r := mustOpen(t, crashed, cfg)
		if got := readAll(t, r, 1<<20); r.EndOffset() != 0 && !equalBatches(got, a.batches) {
			t.Fatalf("crash at step %d of delete: recovered [%d, %d), %d batches: a partial log", step, r.StartOffset(), r.EndOffset(), len(got))
		}
		if err := vfs.EmptyTrash(crashed, filepath.Join("/data", TrashDirName)); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("delete did not finish in 100 steps")
}
