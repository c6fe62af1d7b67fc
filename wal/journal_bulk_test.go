package wal

// Tests of the journal's bulk lane: a batch larger than PieceBytes is
// written in parts, small records of other logs go between them, replay
// reassembles the parts, and a batch a crash cut short is dropped.

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// bulkJournal: pieces of 4 KiB, so a 64 KiB batch is sixteen parts.
var bulkJournal = JournalConfig{FileBytes: 1 << 20, CheckpointBytes: 1 << 40, CheckpointEvery: smallJournal.CheckpointEvery, PieceBytes: 4 << 10}

// scannedRecord is one record found by scanJournal.
type scannedRecord struct {
	lsn int64
	rec journalRecord
}

// scanJournal decodes every readable record of the journal files in dir.
func scanJournal(t *testing.T, fs vfs.FS, dir string) []scannedRecord {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []scannedRecord
	for _, n := range names {
		start, ok := parseJournalFileName(n)
		if !ok {
			continue
		}
		data, err := vfs.ReadFile(fs, filepath.Join(dir, n), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for pos := int64(journalHeaderSize); pos < int64(len(data)); {
			lsn := start + pos - journalHeaderSize
			rec, size, err := decodeRecord(data[pos:], lsn)
			if err != nil {
				break
			}
			rec.payload = nil // aliases data
			out = append(out, scannedRecord{lsn, rec})
			pos += int64(size)
		}
	}
	return out
}

// A small record appended while a large batch of another log is being
// written goes to the journal before the large batch's remaining parts, and
// is durable before the large batch is; the large batch arrives whole.
func TestJournalSmallRecordPassesLargeBatch(t *testing.T) {
	// gate, while set, holds the journal's fsyncs, so the small append is
	// certain to arrive while the large batch's first round is in flight.
	var gate atomic.Pointer[chan struct{}]
	var held atomic.Int64
	fs := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if g := gate.Load(); g != nil && op == vfs.OpSync && strings.HasSuffix(path, journalSuffix) {
			held.Add(1)
			<-*g
		}
		return nil
	})
	f := mustJournalFixture(t, fs, Config{}, bulkJournal, 2)
	defer f.close()
	large, small := f.logs[0], f.logs[1]
	g := make(chan struct{})
	gate.Store(&g)
	big := mkBatch(10, 64<<10, 1, 'L')
	if res := large.AppendGroup([][]byte{big}, 1); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	for held.Load() == 0 {
		// The committer took the first piece and waits in its fsync.
		runtime.Gosched()
	}
	if res := small.AppendGroup([][]byte{mkBatch(1, 100, 2, 's')}, 1); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	gate.Store(nil)
	close(g)
	if end, err := small.Sync(); err != nil || end != 1 {
		t.Fatalf("small log sync: %d, %v", end, err)
	}
	if end, err := large.Sync(); err != nil || end != 10 {
		t.Fatalf("large log sync: %d, %v", end, err)
	}

	var smallAt, lastPart int64 = -1, -1
	parts := 0
	for _, r := range scanJournal(t, fs, "/data/journal") {
		switch {
		case r.rec.key == "t-1" && r.rec.kind == recAppend:
			smallAt = r.lsn
		case r.rec.key == "t-0" && r.rec.kind == recPart:
			parts++
			lastPart = r.lsn
		case r.rec.key == "t-0":
			t.Fatalf("large batch journaled whole (kind %d), want parts", r.rec.kind)
		}
	}
	if want := (len(big) + bulkJournal.PieceBytes - 1) / bulkJournal.PieceBytes; parts != want {
		t.Fatalf("%d parts of a %d-byte batch, want %d", parts, len(big), want)
	}
	if smallAt < 0 || smallAt > lastPart {
		t.Fatalf("small record at LSN %d, the large batch's last part at %d: it waited for the whole batch", smallAt, lastPart)
	}
	if got := readAll(t, large, 1<<20); len(got) != 1 || string(got[0]) != string(big) {
		t.Fatal("the large batch does not read back whole")
	}
}

// Large and small batches of several logs, journaled and never fsynced in
// their segments: replay puts the parts back together.
func TestJournalReplaysLargeBatchesFromParts(t *testing.T) {
	mem := vfs.NewMem()
	f := mustJournalFixture(t, mem, Config{}, bulkJournal, 3)
	var want [3]appended
	for n := range 24 {
		i := n % 3
		size := 50 + n
		if n%4 == 1 {
			size = 9<<10 + n*100 // three parts
		}
		group := [][]byte{mkBatch(1+n%3, size, int64(n), byte(n))}
		if n%5 == 0 {
			group = append(group, mkBatch(2, 20<<10, int64(n), 'x'))
		}
		for k, res := range f.logs[i].AppendGroup(group, 2) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			want[i].add(group[k])
		}
	}
	for _, l := range f.logs {
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	crashed := mem.CrashClone() // the segments' bytes are not kept
	f.close()
	g := mustJournalFixture(t, crashed, f.cfg, f.jcfg, 3)
	defer g.close()
	for i, l := range g.logs {
		if got := readAll(t, l, 1<<20); !equalBatches(got, want[i].batches) {
			t.Fatalf("log %d: recovered %d batches, want %d", i, len(got), len(want[i].batches))
		}
		checkInvariants(t, l, true)
	}
}

// A crash after some parts of a large batch were fsynced and before its
// last: the batch was never durable, replay drops its parts, the log takes
// new appends at its offsets, and a second crash replays those.
func TestJournalUnfinishedLargeBatchIsDropped(t *testing.T) {
	var syncs atomic.Int64
	var crashAt atomic.Int64 // the journal fsync after which to capture
	var captured atomic.Pointer[vfs.Mem]
	mem := vfs.NewMem()
	fs := vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, journalSuffix) {
			if n := syncs.Add(1); n == crashAt.Load() {
				// Taken before this fsync: the previous rounds are durable,
				// this one's bytes are not.
				captured.Store(mem.CrashClone())
			}
		}
		return nil
	})
	f := mustJournalFixture(t, fs, Config{}, bulkJournal, 1)
	l := f.logs[0]
	first := mkBatch(2, 100, 1, 'a')
	l.AppendGroup([][]byte{first}, 1)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashAt.Store(syncs.Load() + 3) // two parts durable, the third not
	big := mkBatch(4, 32<<10, 2, 'B')
	l.AppendGroup([][]byte{big}, 1)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := captured.Load()
	if crashed == nil {
		t.Fatal("no crash captured")
	}
	f.close()

	g := mustJournalFixture(t, crashed, f.cfg, f.jcfg, 1)
	if got := readAll(t, g.logs[0], 1<<20); !equalBatches(got, [][]byte{first}) {
		t.Fatalf("recovered %d batches ending at %d, want only the first (the large one was never durable)", len(got), g.logs[0].EndOffset())
	}
	again := mkBatch(3, 12<<10, 3, 'C') // at the unfinished batch's offsets
	g.logs[0].AppendGroup([][]byte{again}, 2)
	if _, err := g.logs[0].Sync(); err != nil {
		t.Fatal(err)
	}
	crashed2 := crashed.CrashClone()
	g.close()
	h := mustJournalFixture(t, crashed2, f.cfg, f.jcfg, 1)
	defer h.close()
	if got := readAll(t, h.logs[0], 1<<20); !equalBatches(got, [][]byte{first, again}) {
		t.Fatalf("after the second crash: %d batches ending at %d, want the first and the new one", len(got), h.logs[0].EndOffset())
	}
}

// A part that continues no batch is corruption, not something to skip.
func TestPartAssemblyRejectsAStrayPart(t *testing.T) {
	big := mkBatch(2, 300, 1, 'p')
	recs, starts := appendPartRecords(nil, nil, "k", big, 0, 1, 128)
	var parts []journalRecord
	for i := range starts {
		end := len(recs)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		sealRecord(recs[starts[i]:end], 0)
		rec, _, err := decodeRecord(recs[starts[i]:end], 0)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, rec)
	}
	var a partAssembly
	if _, err := a.add(parts[1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a second part with no first: %v, want ErrCorrupt", err)
	}
	var whole []byte
	for _, p := range parts {
		w, err := a.add(p)
		if err != nil {
			t.Fatal(err)
		}
		whole = w
	}
	if string(whole) != string(big) {
		t.Fatal("the parts do not make the batch")
	}
}
