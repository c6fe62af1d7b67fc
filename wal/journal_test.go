package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// smallJournal keeps the in-memory journals of these tests small (a fresh
// journal zero-fills initialSpares files of FileBytes).
var smallJournal = JournalConfig{FileBytes: 256 << 10, CheckpointBytes: 1 << 40, CheckpointEvery: time.Hour}

// journalFixture is a journal and its logs on one file system.
type journalFixture struct {
	t    testing.TB
	fs   vfs.FS
	cfg  Config
	jcfg JournalConfig
	j    *Journal
	logs []*Log
}

func openJournalFixture(t testing.TB, fs vfs.FS, cfg Config, jcfg JournalConfig, n int) (*journalFixture, error) {
	f := &journalFixture{t: t, fs: fs, cfg: cfg, jcfg: jcfg}
	j, err := OpenJournal(fs, "/data/journal", jcfg, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	f.j = j
	for i := range n {
		l, err := OpenJournaled(fs, fmt.Sprintf("/data/wal/t-%d", i), cfg, j, fmt.Sprintf("t-%d", i), zerolog.Nop())
		if err != nil {
			f.close()
			return nil, err
		}
		f.logs = append(f.logs, l)
	}
	j.Start()
	return f, nil
}

func mustJournalFixture(t testing.TB, fs vfs.FS, cfg Config, jcfg JournalConfig, n int) *journalFixture {
	t.Helper()
	f, err := openJournalFixture(t, fs, cfg, jcfg, n)
	if err != nil {
		t.Fatalf("open journal fixture: %v", err)
	}
	return f
}

// close closes the logs, then the journal, ignoring errors (a crashed
// fixture's files may be failed on purpose).
func (f *journalFixture) close() {
	for _, l := range f.logs {
		_ = l.Close()
	}
	_ = f.j.Close()
}

// countSyncs wraps fs, counting File.Sync calls by whether the path is a
// journal file.
func countSyncs(fs vfs.FS, journal, segments *atomic.Int64) vfs.FS {
	return vfs.NewFaulty(fs, func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			if strings.HasSuffix(path, journalSuffix) {
				journal.Add(1)
			} else if strings.HasSuffix(path, logSuffix) {
				segments.Add(1)
			}
		}
		return nil
	})
}

func TestJournalOneSyncCoversManyLogs(t *testing.T) {
	var jsyncs, ssyncs atomic.Int64
	// gate, while set, holds the journal's fsyncs, so appends made during
	// one are certain to queue behind it whatever the scheduling.
	var gate atomic.Pointer[chan struct{}]
	fs := vfs.NewFaulty(countSyncs(vfs.NewMem(), &jsyncs, &ssyncs), func(op vfs.Op, path string) error {
		if g := gate.Load(); g != nil && op == vfs.OpSync && strings.HasSuffix(path, journalSuffix) {
			<-*g
		}
		return nil
	})
	f := mustJournalFixture(t, fs, Config{}, smallJournal, 8)
	defer f.close()
	jsyncs.Store(0)
	ssyncs.Store(0)
	// Appends to eight logs, then a Sync of each: the journal's rounds make
	// them all durable; no segment is fsynced.
	for round := range 20 {
		g := make(chan struct{})
		gate.Store(&g)
		for i, l := range f.logs {
			if res := l.AppendGroup([][]byte{mkBatch(2, 100, int64(round), byte(i))}, 1); res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
		}
		gate.Store(nil)
		close(g)
		for i, l := range f.logs {
			end, err := l.Sync()
			if err != nil || end != Offset(2*(round+1)) {
				t.Fatalf("round %d log %d: sync %d, %v", round, i, end, err)
			}
		}
	}
	if n := ssyncs.Load(); n != 0 {
		t.Fatalf("%d segment fsyncs; the journal should carry durability", n)
	}
	// Each round's eight appends need at most two journal fsyncs: the one
	// the first append may start, and one for everything queued behind it.
	if n := jsyncs.Load(); n > 40 {
		t.Fatalf("%d journal fsyncs for 20 rounds of 8 logs, want at most 40", n)
	}
	t.Logf("20 rounds x 8 logs: %d journal fsyncs, %d segment fsyncs", jsyncs.Load(), ssyncs.Load())
}

func TestJournalReplaysUnsyncedSegments(t *testing.T) {
	mem := vfs.NewMem()
	f := mustJournalFixture(t, mem, Config{}, smallJournal, 3)
	var want [3]appended
	for n := range 30 {
		i := n % 3
		b := mkBatch(1+n%4, 50+n, int64(n), byte(n))
		if res := f.logs[i].AppendGroup([][]byte{b}, 2); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		want[i].add(b)
	}
	for _, l := range f.logs {
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	// The segments were never fsynced: the crash keeps only the journal.
	crashed := mem.CrashClone()
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

func TestJournalTruncationIsNotResurrected(t *testing.T) {
	mem := vfs.NewMem()
	f := mustJournalFixture(t, mem, Config{}, smallJournal, 1)
	l := f.logs[0]
	var a appended
	for n := range 4 {
		b := mkBatch(5, 40, int64(n), 'a')
		l.AppendGroup([][]byte{b}, 1)
		a.add(b)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(10); err != nil {
		t.Fatal(err)
	}
	a.batches = a.batches[:2]
	b := mkBatch(3, 40, 9, 'b')
	l.AppendGroup([][]byte{b}, 2)
	a.add(b)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone()
	f.close()
	g := mustJournalFixture(t, crashed, f.cfg, f.jcfg, 1)
	defer g.close()
	if got := readAll(t, g.logs[0], 1<<20); !equalBatches(got, a.batches) {
		t.Fatalf("recovered %d batches ending at %d; the truncated batches came back or the new one is lost", len(got), g.logs[0].EndOffset())
	}
}

func TestJournalFailureFailsEveryLog(t *testing.T) {
	var armed atomic.Bool
	fs := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if armed.Load() && op == vfs.OpSync && strings.HasSuffix(path, journalSuffix) {
			return vfs.ErrInjected
		}
		return nil
	})
	f := mustJournalFixture(t, fs, Config{}, smallJournal, 2)
	defer f.close()
	var woken atomic.Int64
	for _, l := range f.logs {
		l.SetDurableHook(func() { woken.Add(1) })
		l.AppendGroup([][]byte{mkBatch(1, 10, 1, 1)}, 1)
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	f.logs[0].AppendGroup([][]byte{mkBatch(1, 10, 2, 2)}, 1)
	if end, err := f.logs[0].Sync(); !errors.Is(err, vfs.ErrInjected) || end != 1 {
		t.Fatalf("sync after a failed journal fsync: %d, %v", end, err)
	}
	if f.logs[0].Failed() == nil || !errors.Is(f.j.Err(), vfs.ErrInjected) {
		t.Fatal("the failure is not sticky")
	}
	// The other log cannot append either: the journal is shared.
	if res := f.logs[1].AppendGroup([][]byte{mkBatch(1, 10, 3, 3)}, 1); res[0].Err == nil {
		t.Fatal("append after the journal failed was accepted")
	}
	if woken.Load() < 3 {
		t.Fatalf("durable hook called %d times, want the two syncs and the failure", woken.Load())
	}
}

func TestJournalCheckpointBoundsReplay(t *testing.T) {
	mem := vfs.NewMem()
	f := mustJournalFixture(t, mem, Config{}, JournalConfig{FileBytes: 2048}, 2)
	for n := range 40 {
		l := f.logs[n%2]
		l.AppendGroup([][]byte{mkBatch(1, 200, int64(n), byte(n))}, 1)
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	journalFiles := func() []string {
		names, _ := mem.ReadDir("/data/journal")
		var out []string
		for _, n := range names {
			if strings.HasSuffix(n, journalSuffix) {
				out = append(out, n)
			}
		}
		return out
	}
	before := journalFiles()
	if err := f.j.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Only the file being written remains; the others became spares.
	if after := journalFiles(); len(before) < 3 || len(after) != 1 {
		t.Fatalf("checkpoint kept %v of %v", after, before)
	}
	if spares := len(f.j.spares); spares == 0 || spares > f.j.maxSpares() {
		t.Fatalf("%d spares after a checkpoint removed %d files", spares, len(before)-1)
	}
	crashed := mem.CrashClone()
	f.close()
	g := mustJournalFixture(t, crashed, f.cfg, f.jcfg, 2)
	defer g.close()
	for i, l := range g.logs {
		if l.EndOffset() != 20 {
			t.Fatalf("log %d ends at %d after a checkpoint and a crash, want 20", i, l.EndOffset())
		}
	}
}

// journalCrashScenario drives three journaled logs through random appends,
// syncs, truncations, deletions (deleteOldest), checkpoints (sometimes
// crashing in the middle of one) and crashes, and checks after every
// recovery that each log is a prefix of what was appended holding every
// batch that was durable.
func journalCrashScenario(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
	clock := newClock()
	cfg := Config{SegmentBytes: int64(1024 + rng.IntN(4096)), Now: clock.Now}
	jcfg := JournalConfig{FileBytes: int64(1024 + rng.IntN(8192)), CheckpointBytes: 1 << 40, CheckpointEvery: time.Hour}
	mem := vfs.NewMem()
	// A crash inside a checkpoint: armed, the countdown takes a crash clone
	// at its nth file-system operation (of any goroutine); disarming takes
	// the clone, if any, under the same lock, so none can be taken later.
	var crashMu sync.Mutex
	var capture *vfs.Mem
	crashAt := 0 // operations until the capture; 0: disarmed
	arm := func(n int) {
		crashMu.Lock()
		defer crashMu.Unlock()
		crashAt, capture = n, nil
	}
	disarm := func() *vfs.Mem {
		crashMu.Lock()
		defer crashMu.Unlock()
		crashAt = 0
		return capture
	}
	wrap := func(m *vfs.Mem) vfs.FS {
		return vfs.NewFaulty(m, func(vfs.Op, string) error {
			crashMu.Lock()
			defer crashMu.Unlock()
			if crashAt > 0 {
				if crashAt--; crashAt == 0 {
					capture = m.CrashClone()
				}
			}
			return nil
		})
	}
	f := mustJournalFixture(t, wrap(mem), cfg, jcfg, 3)
	models := make([]crashModel, 3)
	for step := range 300 {
		i := rng.IntN(3)
		l := f.logs[i]
		switch op := rng.IntN(100); {
		case op < 55:
			var group [][]byte
			for range 1 + rng.IntN(4) {
				group = append(group, mkBatch(1+rng.IntN(5), 20+rng.IntN(300), clock.Now().UnixMilli(), byte(step)))
			}
			for k, res := range l.AppendGroup(group, Epoch(step)) {
				if res.Err != nil {
					t.Fatalf("seed %d step %d: append: %v", seed, step, res.Err)
				}
				models[i].batches = append(models[i].batches, append([]byte(nil), group[k]...))
			}
		case op < 70:
			if _, err := l.Sync(); err != nil {
				t.Fatalf("seed %d step %d: sync: %v", seed, step, err)
			}
		case op < 75 && len(models[i].batches) > 1:
			h, _ := ParseBatchHeader(models[i].batches[rng.IntN(len(models[i].batches))])
			if h.BaseOffset < l.StartOffset() {
				continue
			}
			if err := l.Truncate(h.BaseOffset); err != nil {
				t.Fatalf("seed %d step %d: truncate to %d: %v", seed, step, h.BaseOffset, err)
			}
			models[i].cut(h.BaseOffset)
		case op < 80:
			clock.Advance(time.Minute)
			keepBytes := int64(2048 + rng.IntN(8192))
			if _, err := l.Maintain(); err != nil {
				t.Fatalf("seed %d step %d: maintain: %v", seed, step, err)
			}
			if _, err := deleteOldest(l, keepBytes); err != nil {
				t.Fatalf("seed %d step %d: delete beyond %d bytes: %v", seed, step, keepBytes, err)
			}
			models[i].dropBelow(l.StartOffset())
		case op < 90:
			if err := f.j.Checkpoint(); err != nil {
				t.Fatalf("seed %d step %d: checkpoint: %v", seed, step, err)
			}
		default:
			durable := make([]Offset, 3)
			for k, l := range f.logs {
				durable[k] = l.DurableEnd()
			}
			var crashed *vfs.Mem
			if rng.IntN(2) == 0 {
				// Crash somewhere inside a checkpoint.
				arm(1 + rng.IntN(12))
				if err := f.j.Checkpoint(); err != nil {
					t.Fatalf("seed %d step %d: checkpoint: %v", seed, step, err)
				}
				crashed = disarm()
			}
			if crashed == nil {
				crashed = mem.CrashCloneTorn(rng)
			}
			f.close()
			mem = crashed
			var err error
			f, err = openJournalFixture(t, wrap(mem), cfg, jcfg, 3)
			if err != nil {
				t.Fatalf("seed %d step %d: reopen after crash: %v (rerun: go test ./wal -run 'TestJournalCrashRecovery/seed=%d')", seed, step, err, seed)
			}
			for k, l := range f.logs {
				checkRecovered(t, seed, step, k, l, &models[k], durable[k])
			}
		}
	}
	f.close()
}

// checkRecovered checks that l holds a prefix of m's batches (from its
// start) reaching at least durable, and cuts m to what l holds.
func checkRecovered(t *testing.T, seed uint64, step, k int, l *Log, m *crashModel, durable Offset) {
	t.Helper()
	m.dropBelow(l.StartOffset())
	got := readAll(t, l, 1<<20)
	if len(got) > len(m.batches) || !equalBatches(got, m.batches[:len(got)]) {
		t.Fatalf("seed %d step %d log %d: recovered %d batches that are not a prefix of the %d appended (rerun: go test ./wal -run 'TestJournalCrashRecovery/seed=%d')",
			seed, step, k, len(got), len(m.batches), seed)
	}
	if l.EndOffset() < durable {
		t.Fatalf("seed %d step %d log %d: recovered up to %d, but %d was durable (rerun: go test ./wal -run 'TestJournalCrashRecovery/seed=%d')",
			seed, step, k, l.EndOffset(), durable, seed)
	}
	checkInvariants(t, l, true)
	checkEpochChain(t, l)
	m.batches = m.batches[:len(got)]
}

func TestJournalCrashRecovery(t *testing.T) {
	n := uint64(100)
	if testing.Short() {
		n = 20
	}
	for seed := range n {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { journalCrashScenario(t, seed) })
	}
}

func FuzzJournalRecord(f *testing.F) {
	sealed := func(kind byte, key string, payload []byte, lsn int64) []byte {
		b := appendRecord(nil, kind, key, payload)
		sealRecord(b, lsn)
		return b
	}
	f.Add(sealed(recAppend, "t-0", mkBatch(2, 10, 5, 1), 0), int64(0))
	f.Add(sealed(recTruncate, "k", []byte{0, 0, 0, 0, 0, 0, 0, 9}, 77), int64(77))
	f.Add(sealed(recAppend, "t-1", mkBatch(1, 3, 5, 1), 5), int64(6))
	f.Add(make([]byte, recordHeaderSize), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, lsn int64) {
		rec, size, err := decodeRecord(b, lsn)
		if err != nil {
			return
		}
		if size > len(b) || size < recordHeaderSize {
			t.Fatalf("size %d of %d bytes", size, len(b))
		}
		if again := sealed(rec.kind, rec.key, rec.payload, lsn); string(again) != string(b[:size]) {
			t.Fatal("a decoded record does not encode to the same bytes")
		}
	})
}
