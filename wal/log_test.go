package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

func TestAppendReadAcrossSegments(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Config{SegmentBytes: 1000, IndexIntervalBytes: 200})
	var a appended
	for i := range 200 {
		b := mkBatch(1+i%5, 10+(i*37)%300, int64(1000+i), byte(i))
		base, last := mustAppend(t, l, &a, b)
		if last-base != Offset(i%5) {
			t.Fatalf("batch %d: base %d last %d", i, base, last)
		}
	}
	if n := len(l.segs); n < 20 {
		t.Fatalf("only %d segments with SegmentBytes 1000", n)
	}
	for _, maxBytes := range []int{1, 500, 1500, 1 << 20} {
		if got := readAll(t, l, maxBytes); !equalBatches(got, a.batches) {
			t.Fatalf("maxBytes %d: read %d batches, appended %d", maxBytes, len(got), len(a.batches))
		}
	}
	// Every offset reads back starting with the batch that contains it.
	for off := Offset(0); off < l.EndOffset(); off++ {
		b, err := l.Read(off, l.EndOffset(), 1)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		h, _ := ParseBatchHeader(b)
		if h.BaseOffset > off || h.LastOffset() < off || h.LeaderEpoch != 7 {
			t.Fatalf("read %d returned batch [%d,%d] epoch %d", off, h.BaseOffset, h.LastOffset(), h.LeaderEpoch)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, fs, Config{SegmentBytes: 1000, IndexIntervalBytes: 200})
	if got := readAll(t, l2, 4096); !equalBatches(got, a.batches) {
		t.Fatalf("after reopen: read %d batches, appended %d", len(got), len(a.batches))
	}
}

func TestReadSemantics(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{SegmentBytes: 400})
	var a appended
	// Batches: [0..2] 161B, [3..3] 111B, [4..8] 261B (own segment), [9..9] 71B.
	for _, s := range []struct{ count, n int }{{3, 100}, {1, 50}, {5, 200}, {1, 10}} {
		mustAppend(t, l, &a, mkBatch(s.count, s.n, 100, 1))
	}
	sz := func(i int) int { return len(a.batches[i]) }
	cases := []struct {
		name            string
		from, limit     Offset
		maxBytes        int
		want            []int // indexes of appended batches
		err             error
		wantNil         bool
		skipLimitAsHWFn bool
	}{
		{name: "first batch even above maxBytes", from: 0, limit: 10, maxBytes: 1, want: []int{0}},
		{name: "exact fit of two", from: 0, limit: 10, maxBytes: sz(0) + sz(1), want: []int{0, 1}},
		{name: "one byte short of two", from: 0, limit: 10, maxBytes: sz(0) + sz(1) - 1, want: []int{0}},
		{name: "middle of batch", from: 1, limit: 10, maxBytes: 1 << 20, want: []int{0, 1, 2, 3}},
		{name: "middle of batch in later segment", from: 6, limit: 10, maxBytes: 1, want: []int{2}},
		{name: "limit stops at base", from: 0, limit: 4, maxBytes: 1 << 20, want: []int{0, 1}},
		{name: "limit inside batch includes it", from: 0, limit: 5, maxBytes: 1 << 20, want: []int{0, 1, 2}},
		{name: "nothing below limit", from: 3, limit: 3, maxBytes: 1 << 20, wantNil: true},
		{name: "crosses segments", from: 3, limit: 10, maxBytes: 1 << 20, want: []int{1, 2, 3}},
		{name: "at end", from: 10, limit: 10, maxBytes: 100, wantNil: true},
		{name: "beyond end", from: 11, limit: 11, maxBytes: 100, err: ErrOffsetOutOfRange},
		{name: "negative", from: -1, limit: 10, maxBytes: 100, err: ErrOffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Read(tc.from, tc.limit, tc.maxBytes)
			wantErr(t, err, tc.err)
			if tc.err != nil || tc.wantNil {
				if got != nil {
					t.Fatalf("got %d bytes, want nil", len(got))
				}
				return
			}
			var want [][]byte
			for _, i := range tc.want {
				want = append(want, a.batches[i])
			}
			if bs := splitBatches(t, got); !equalBatches(bs, want) {
				t.Fatalf("got %d batches, want %v", len(bs), tc.want)
			}
		})
	}
	// The result is a copy: scribbling on it does not change the log.
	b, _ := l.Read(0, 10, 1)
	for i := range b {
		b[i] = 0
	}
	if b2, _ := l.Read(0, 10, 1); splitBatches(t, b2) == nil {
		t.Fatal("log changed through a returned slice")
	}
}

func TestFindTimestamp(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{SegmentBytes: 600, IndexIntervalBytes: 100})
	// maxTimestamps are not monotonic: 10, 20, 15, 30, 30, 25, 40 ... (Kafka allows it).
	ts := []int64{10, 20, 15, 30, 30, 25, 40, 50, 45, 60, 70, 65, 80, 90, 85, 100}
	var a appended
	for i, x := range ts {
		mustAppend(t, l, &a, mkBatch(2, 80+i, x, byte(i)))
	}
	for _, tc := range []struct {
		ts   int64
		want int // index of batch, -1 none
	}{{0, 0}, {10, 0}, {11, 1}, {16, 1}, {21, 3}, {30, 3}, {31, 6}, {46, 7}, {51, 9}, {61, 10}, {66, 10},
		{71, 12}, {86, 13}, {91, 15}, {100, 15}, {101, -1}} {
		t.Run(fmt.Sprint(tc.ts), func(t *testing.T) {
			got, err := l.FindTimestamp(tc.ts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want < 0 {
				if got != nil {
					t.Fatalf("got a batch, want none")
				}
				return
			}
			if string(got) != string(a.batches[tc.want]) {
				h, _ := ParseBatchHeader(got)
				t.Fatalf("got batch at %d (maxTS %d), want batch %d", h.BaseOffset, h.MaxTimestamp, tc.want)
			}
		})
	}
}

func TestRoll(t *testing.T) {
	clk := newClock()
	cfg := Config{SegmentBytes: 1000, SegmentAge: time.Minute, Now: clk.Now}
	l := mustOpen(t, vfs.NewMem(), cfg)
	steps := []struct {
		name     string
		advance  time.Duration
		n        int // payload bytes
		segments int // after the append
	}{
		{"first batch", 0, 400, 1},
		{"fits", 0, 400, 1},            // 922 bytes
		{"would exceed", 0, 100, 2},    // 922+161 > 1000
		{"oversize alone", 0, 2000, 3}, // own segment
		{"after oversize", 0, 10, 4},
		{"young", 59 * time.Second, 10, 4},
		{"old", time.Second, 10, 5},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		mustAppend(t, l, nil, mkBatch(1, s.n, 1, 0))
		if got := len(l.segs); got != s.segments {
			t.Fatalf("%s: %d segments, want %d", s.name, got, s.segments)
		}
	}
	// Maintain rolls a non-empty active segment by age, but never an empty
	// one, and deletes nothing: every batch is decades old (timestamp 1),
	// but the log decides no deletion.
	clk.Advance(time.Minute)
	if n, err := l.Maintain(); err != nil || n != 0 {
		t.Fatalf("maintain: deleted %d, %v", n, err)
	}
	if got := len(l.segs); got != 6 {
		t.Fatalf("maintain: %d segments, want 6", got)
	}
	clk.Advance(time.Minute)
	if n, err := l.Maintain(); err != nil || n != 0 {
		t.Fatalf("maintain of empty active: deleted %d, %v", n, err)
	}
	if got := len(l.segs); got != 6 || l.StartOffset() != 0 {
		t.Fatalf("maintain of empty active: %d segments, start %d; want 6, 0", got, l.StartOffset())
	}
}

// TestDeleteBelow: the deletions retention asks for, carried out by
// DeleteBelow on 6 sealed segments of one 10-offset batch each (161 bytes)
// and an active segment holding offset 60 (71 bytes).
func TestDeleteBelow(t *testing.T) {
	cases := []struct {
		name      string
		below     Offset
		deleted   int
		wantStart Offset
	}{
		{"nothing", 0, 0, 0},
		{"inside the first segment keeps it whole", 9, 0, 0},
		{"end of the first segment", 10, 1, 10},
		{"inside a later segment keeps it whole", 35, 3, 30},
		{"end of a later segment", 50, 5, 50},
		{"base of the active segment", 60, 6, 60},
		{"end of the log never deletes the active segment", 61, 6, 60},
		{"above the end never deletes the active segment", 1000, 6, 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := Config{SegmentBytes: 200}
			l := mustOpen(t, fs, cfg)
			var a appended
			for i := range 6 {
				mustAppend(t, l, &a, mkBatch(10, 100, int64(i), byte(i)))
			}
			mustAppend(t, l, &a, mkBatch(1, 10, 6, 6)) // rolls: active holds this one
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			n, err := l.DeleteBelow(tc.below)
			if err != nil || n != tc.deleted {
				t.Fatalf("DeleteBelow(%d) deleted %d (%v), want %d", tc.below, n, err, tc.deleted)
			}
			want := a.batches[tc.wantStart/10:]
			check := func(l *Log, when string) {
				t.Helper()
				if l.StartOffset() != tc.wantStart || l.EndOffset() != 61 {
					t.Fatalf("%s: start %d end %d, want %d 61", when, l.StartOffset(), l.EndOffset(), tc.wantStart)
				}
				if _, err := l.Read(tc.wantStart-1, 61, 100); tc.wantStart > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("%s: read below start: %v", when, err)
				}
				if got := readAll(t, l, 1<<20); !equalBatches(got, want) {
					t.Fatalf("%s: read %d batches, want %d", when, len(got), len(want))
				}
				if segs := l.Segments(); len(segs) != 7-tc.deleted || segs[len(segs)-1].Sealed {
					t.Fatalf("%s: segments %+v, want %d with the last active", when, segs, 7-tc.deleted)
				}
			}
			check(l, "deleted")
			check(mustOpen(t, fs.CrashClone(), cfg), "crashed") // durable when DeleteBelow returns
			l.Close()
			check(mustOpen(t, fs, cfg), "reopened")
		})
	}
}

// TestDeleteBelowKeepsEndAcrossRestart: after everything sealed was deleted,
// leaving an empty active segment, the end offset survives a crash.
func TestDeleteBelowKeepsEndAcrossRestart(t *testing.T) {
	clk := newClock()
	fs := vfs.NewMem()
	cfg := Config{SegmentAge: time.Minute, Now: clk.Now}
	l := mustOpen(t, fs, cfg)
	mustAppend(t, l, nil, mkBatch(5, 10, clk.Now().UnixMilli(), 0))
	clk.Advance(2 * time.Hour)
	if n, err := l.Maintain(); err != nil || n != 0 { // rolls by age, deletes nothing
		t.Fatalf("maintain: %d %v", n, err)
	}
	if segs := l.Segments(); len(segs) != 2 || !segs[0].Sealed {
		t.Fatalf("maintain did not roll: %+v", segs)
	}
	if n, err := l.DeleteBelow(l.EndOffset()); err != nil || n != 1 {
		t.Fatalf("delete below the end: %d %v", n, err)
	}
	if l.StartOffset() != 5 || l.EndOffset() != 5 || l.Size() != 0 {
		t.Fatalf("start %d end %d size %d", l.StartOffset(), l.EndOffset(), l.Size())
	}
	crashed := fs.CrashClone() // no Close: only what DeleteBelow made durable
	l2 := mustOpen(t, crashed, cfg)
	if l2.StartOffset() != 5 || l2.EndOffset() != 5 {
		t.Fatalf("after crash: start %d end %d", l2.StartOffset(), l2.EndOffset())
	}
	if base, _ := mustAppend(t, l2, nil, mkBatch(1, 1, 0, 0)); base != 5 {
		t.Fatalf("next append got %d", base)
	}
}

func TestTruncate(t *testing.T) {
	cases := []struct {
		name string
		to   Offset
		err  error
	}{
		{"inside active", 27, nil},
		{"active base", 24, nil},
		{"inside sealed", 9, nil},
		{"sealed base", 6, nil},
		{"start", 0, nil},
		{"end", 30, nil},
		{"not a boundary", 7, ErrNotBatchBoundary},
		{"above end", 31, ErrOffsetOutOfRange},
		{"below start", -1, ErrOffsetOutOfRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
			l := mustOpen(t, fs, cfg)
			var a appended
			for i := range 10 { // 10 batches of 3 offsets, 2 per segment
				mustAppend(t, l, &a, mkBatch(3, 60, int64(i), byte(i)))
			}
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			err := l.Truncate(tc.to)
			wantErr(t, err, tc.err)
			want := a.batches
			if tc.err == nil {
				want = a.batches[:tc.to/3]
				if l.EndOffset() != tc.to || l.DurableEnd() > tc.to {
					t.Fatalf("end %d durable %d after truncate to %d", l.EndOffset(), l.DurableEnd(), tc.to)
				}
			}
			if got := readAll(t, l, 1<<20); !equalBatches(got, want) {
				t.Fatalf("read %d batches, want %d", len(got), len(want))
			}
			// Appending continues at the truncation point, and a crash keeps the truncation.
			b := mkBatch(2, 5, 99, 9)
			mustAppend(t, l, nil, b)
			want = append(append([][]byte(nil), want...), b)
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			l2 := mustOpen(t, fs.CrashClone(), cfg)
			if got := readAll(t, l2, 1<<20); !equalBatches(got, want) {
				t.Fatalf("after crash: read %d batches, want %d", len(got), len(want))
			}
		})
	}
}

func TestAppendRejects(t *testing.T) {
	good := func() []byte { return mkBatch(3, 20, 5, 1) }
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		err    error
	}{
		{"bad crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, ErrCorrupt},
		{"bad crc in attributes", func(b []byte) []byte { b[offAttributes] ^= 1; return b }, ErrCorrupt},
		{"bad magic", func(b []byte) []byte { b[offMagic] = 1; return b }, ErrInvalidBatch},
		{"short", func(b []byte) []byte { return b[:40] }, ErrInvalidBatch},
		{"length says more", func(b []byte) []byte { return b[:len(b)-1] }, ErrInvalidBatch},
		{"length says less", func(b []byte) []byte { return append(b, 0) }, ErrInvalidBatch},
		{"two batches", func(b []byte) []byte { return append(b, good()...) }, ErrInvalidBatch},
		{"negative lastOffsetDelta", func(b []byte) []byte {
			return mkBatch(0, 20, 5, 1) // count 0 => delta -1
		}, ErrInvalidBatch},
	}
	l := mustOpen(t, vfs.NewMem(), Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := l.Append(tc.mutate(good()), 1)
			wantErr(t, err, tc.err)
		})
	}
	if l.EndOffset() != 0 {
		t.Fatalf("rejected appends moved the end to %d", l.EndOffset())
	}
	// Stamped appends must continue the log exactly.
	b := good()
	stampBatch(b, 1, 3)
	_, _, err := l.AppendStamped(b)
	wantErr(t, err, ErrInvalidBatch)
	stampBatch(b, 0, 3)
	if base, last, err := l.AppendStamped(b); err != nil || base != 0 || last != 2 {
		t.Fatalf("stamped append: %d %d %v", base, last, err)
	}
}

func TestStickyFailures(t *testing.T) {
	isLog := func(p string) bool { return strings.HasSuffix(p, ".log") }
	// Open syncs the log directory twice (recovery, log-start checkpoint) and
	// its parents once each while creating them.
	isLogDir := func(p string) bool { return p == "/data/t-0" }
	cases := []struct {
		name   string
		inject func(vfs.Op, string) error
		failAt string // "append" or "sync"
	}{
		{"fsync", vfs.FailNth(vfs.OpSync, 2, isLog, false), "sync"},
		{"write", vfs.FailNth(vfs.OpWrite, 3, isLog, false), "append"},
		{"dir fsync", vfs.FailNth(vfs.OpSyncDir, 3, isLogDir, false), "sync"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs := vfs.NewFaulty(mem, tc.inject)
			cfg := Config{SegmentBytes: 200}
			l := mustOpen(t, fs, cfg) // Open syncs once
			var a appended
			var failed error
			for i := 0; i < 10 && failed == nil; i++ {
				if _, _, err := l.Append(mkBatch(1, 100, 1, 0), 0); err != nil {
					failed = err
					break
				}
				a.add(mkBatch(1, 100, 1, 0))
				if _, err := l.Sync(); err != nil {
					failed = err
				}
			}
			if !errors.Is(failed, vfs.ErrInjected) {
				t.Fatalf("no injected failure: %v", failed)
			}
			durable := l.DurableEnd()
			// Sticky: the fault is gone, but everything still fails.
			if _, _, err := l.Append(mkBatch(1, 1, 1, 0), 0); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("append after failure: %v", err)
			}
			if _, err := l.Sync(); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("sync after failure: %v", err)
			}
			if _, err := l.Maintain(); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("maintain after failure: %v", err)
			}
			if _, err := l.DeleteBelow(l.EndOffset()); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("delete below after failure: %v", err)
			}
			// Reads still work, and reopening recovers at least the durable part.
			if _, err := l.Read(0, l.EndOffset(), 100); err != nil {
				t.Fatalf("read after failure: %v", err)
			}
			l.Close()
			l2 := mustOpen(t, mem.CrashClone(), cfg)
			if l2.EndOffset() < durable {
				t.Fatalf("reopened end %d below durable %d", l2.EndOffset(), durable)
			}
		})
	}
}

func TestRecoveryRepairs(t *testing.T) {
	cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
	dir := "/data/t-0"
	build := func(t *testing.T) (*vfs.Mem, appended) {
		fs := vfs.NewMem()
		l := mustOpen(t, fs, cfg)
		var a appended
		for i := range 9 {
			mustAppend(t, l, &a, mkBatch(2, 70+i, int64(i), byte(i)))
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return fs, a
	}
	write := func(fs *vfs.Mem, name string, b []byte) {
		f, _ := fs.Create(filepath.Join(dir, name))
		f.Write(b)
		f.Close()
	}
	cases := []struct {
		name    string
		damage  func(fs *vfs.Mem)
		batches int // left after recovery
	}{
		{"clean", func(*vfs.Mem) {}, 9},
		{"stray files", func(fs *vfs.Mem) {
			write(fs, "00000000000000000002.index.tmp", []byte("x"))
			write(fs, "00000000000000000999.index", []byte("x"))
			write(fs, "00000000000000000999.timeindex", []byte("x"))
		}, 9},
		{"garbage index", func(fs *vfs.Mem) { write(fs, segmentName(0, indexSuffix), []byte("garbage")) }, 9},
		{"missing time index", func(fs *vfs.Mem) { fs.Remove(filepath.Join(dir, segmentName(0, timeIndexSuffix))) }, 9},
		{"torn tail", func(fs *vfs.Mem) {
			f, _ := fs.OpenFile(filepath.Join(dir, segmentName(16, logSuffix)), 0x2, 0)
			n, _ := f.Size()
			f.Truncate(n - 5)
			f.Close()
		}, 8},
		{"bit flip in last batch", func(fs *vfs.Mem) {
			path := filepath.Join(dir, segmentName(16, logSuffix))
			b, _ := readFile(fs, path)
			b[len(b)-3] ^= 0x40
			write(fs, segmentName(16, logSuffix), b)
		}, 8},
		{"bit flip in sealed segment", func(fs *vfs.Mem) {
			path := filepath.Join(dir, segmentName(8, logSuffix))
			b, _ := readFile(fs, path)
			b[len(b)-3] ^= 0x40
			write(fs, segmentName(8, logSuffix), b)
			fs.Remove(filepath.Join(dir, segmentName(8, indexSuffix))) // force a scan
		}, 5},
		{"torn sealed segment", func(fs *vfs.Mem) {
			f, _ := fs.OpenFile(filepath.Join(dir, segmentName(4, logSuffix)), 0x2, 0)
			n, _ := f.Size()
			f.Truncate(n - 5)
			f.Close()
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, a := build(t)
			tc.damage(fs)
			l := mustOpen(t, fs, cfg)
			if got := readAll(t, l, 1<<20); !equalBatches(got, a.batches[:tc.batches]) {
				t.Fatalf("recovered %d batches, want %d", len(got), tc.batches)
			}
			for _, n := range fs.Files() {
				if strings.Contains(n, "999") || strings.HasSuffix(n, ".tmp") {
					t.Fatalf("stray file %s survived", n)
				}
			}
			// The repaired log is still a log: append, crash, recover.
			mustAppend(t, l, nil, mkBatch(1, 1, 1, 1))
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			l2 := mustOpen(t, fs.CrashClone(), cfg)
			if got := readAll(t, l2, 1<<20); len(got) != tc.batches+1 {
				t.Fatalf("after crash: %d batches, want %d", len(got), tc.batches+1)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	d := Config{}.WithDefaults()
	if d.SegmentBytes != 64<<20 || d.SegmentAge != 10*time.Minute || d.IndexIntervalBytes != 4096 || d.Now == nil {
		t.Fatalf("defaults: %+v", d)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		err  error
	}{
		{"zero", Config{}, nil},
		{"negative segment", Config{SegmentBytes: -1}, ErrInvalidConfig},
		{"huge segment", Config{SegmentBytes: 1 << 32}, ErrInvalidConfig},
		{"negative age", Config{SegmentAge: -1}, ErrInvalidConfig},
		{"negative interval", Config{IndexIntervalBytes: -1}, ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.cfg.Validate(), tc.err) })
	}
}

func TestClosedAndDelete(t *testing.T) {
	fs := vfs.NewMem()
	l := mustOpen(t, fs, Config{})
	mustAppend(t, l, nil, mkBatch(1, 1, 1, 1))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, _, err := l.Append(mkBatch(1, 1, 1, 1), 0)
	wantErr(t, err, ErrClosed)
	_, err = l.Read(0, 1, 1)
	wantErr(t, err, ErrClosed)
	_, err = l.Sync()
	wantErr(t, err, ErrClosed)
	l2 := mustOpen(t, fs, Config{})
	if err := l2.Delete(); err != nil {
		t.Fatal(err)
	}
	if files := fs.Files(); len(files) != 0 {
		t.Fatalf("files left after delete: %v", files)
	}
}

func TestBytesFrom(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{SegmentBytes: 1000, IndexIntervalBytes: 200})
	var a appended
	for i := range 60 {
		mustAppend(t, l, &a, mkBatch(1+i%3, 40+i*5, int64(i), byte(i)))
	}
	// The backlog from the batch holding each offset is the sum of that
	// batch and every later one.
	var suffix int64
	want := map[Offset]int64{}
	for i := len(a.batches) - 1; i >= 0; i-- {
		suffix += int64(len(a.batches[i]))
		h, _ := ParseBatchHeader(a.batches[i])
		for off := h.BaseOffset; off <= h.LastOffset(); off++ {
			want[off] = suffix
		}
	}
	for off, w := range want {
		if got, err := l.BytesFrom(off); err != nil || got != w {
			t.Fatalf("BytesFrom(%d) = %d, %v; want %d", off, got, err, w)
		}
	}
	if got, err := l.BytesFrom(l.EndOffset()); err != nil || got != 0 {
		t.Fatalf("BytesFrom(end) = %d, %v", got, err)
	}
	if _, err := l.BytesFrom(l.EndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("BytesFrom past the end: %v", err)
	}
}
