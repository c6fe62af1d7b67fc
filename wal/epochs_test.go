package wal

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// stamped returns a batch of count records stamped at base with epoch, as a
// leader would send it to a follower.
func stamped(base Offset, epoch Epoch, count int, fill byte) []byte {
	b := mkBatch(count, 20, 1, fill)
	stampBatch(b, base, epoch)
	return b
}

// appendEpoch appends a batch of count records at epoch (as a leader).
func appendEpoch(t testing.TB, l *Log, epoch Epoch, count int) Offset {
	t.Helper()
	base, _, err := l.Append(mkBatch(count, 20, 1, byte(epoch)), epoch)
	if err != nil {
		t.Fatalf("append at epoch %d: %v", epoch, err)
	}
	return base
}

func wantChain(t testing.TB, l *Log, want ...EpochEntry) {
	t.Helper()
	if got := l.Epochs(); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("chain %v, want %v", got, want)
	}
}

// checkEpochChain checks the chain against the batches the log holds: it
// is ordered, every entry starts below the end, only the first starts at
// or below the log start, every entry at or above the start begins a batch
// of its epoch, and every batch has the epoch the chain gives its offset.
func checkEpochChain(t testing.TB, l *Log) {
	t.Helper()
	chain := l.Epochs()
	start, end := l.StartOffset(), l.EndOffset()
	for i, e := range chain {
		if e.StartOffset >= end || e.Epoch < 0 || i > 0 && (e.Epoch <= chain[i-1].Epoch || e.StartOffset <= chain[i-1].StartOffset) {
			t.Fatalf("chain %v of the log [%d, %d): entry %d out of place", chain, start, end, i)
		}
		if i > 0 && e.StartOffset <= start {
			t.Fatalf("chain %v keeps entry %d wholly below the start %d", chain, i-1, start)
		}
	}
	batches := readAll(t, l, 1<<20)
	if len(batches) > 0 && (len(chain) == 0 || chain[0].StartOffset > start) {
		t.Fatalf("chain %v does not cover the log start %d", chain, start)
	}
	bases := map[Offset]Epoch{}
	for _, b := range batches {
		h, _ := ParseBatchHeader(b)
		bases[h.BaseOffset] = h.LeaderEpoch
		i := len(chain) - 1
		for i >= 0 && chain[i].StartOffset > h.BaseOffset {
			i--
		}
		if i < 0 || chain[i].Epoch != h.LeaderEpoch {
			t.Fatalf("batch at %d has epoch %d; chain %v", h.BaseOffset, h.LeaderEpoch, chain)
		}
	}
	for _, e := range chain {
		if got, ok := bases[e.StartOffset]; e.StartOffset >= start && (!ok || got != e.Epoch) {
			t.Fatalf("chain %v: no batch of epoch %d at %d", chain, e.Epoch, e.StartOffset)
		}
	}
}

func TestEpochsCodec(t *testing.T) {
	for _, s := range []epochState{
		{},
		{fenced: 9},
		{fenced: 3, entries: []EpochEntry{{0, 0}}},
		{entries: []EpochEntry{{1, 5}, {4, 6}, {1<<31 - 1, 1 << 50}}},
	} {
		got, err := decodeEpochs(encodeEpochs(s))
		if err != nil || got.fenced != s.fenced || len(got.entries) != len(s.entries) ||
			len(s.entries) > 0 && !reflect.DeepEqual(got.entries, s.entries) {
			t.Fatalf("round trip of %+v: %+v %v", s, got, err)
		}
	}
	good := encodeEpochs(epochState{fenced: 2, entries: []EpochEntry{{1, 0}, {2, 10}}})
	// reseal recomputes the crc, so a case reaches the check after it.
	reseal := func(b []byte) []byte {
		b[16], b[17], b[18], b[19] = 0, 0, 0, 0
		c := epochsCRC(b)
		b[16], b[17], b[18], b[19] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		return b
	}
	cases := []struct {
		name   string
		mutate func([]byte) []byte
		err    error
	}{
		{"empty", func([]byte) []byte { return nil }, ErrCorrupt},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrCorrupt},
		{"newer version", func(b []byte) []byte { b[5] = 2; return b }, ErrUnknownVersion},
		{"newer version, other size", func(b []byte) []byte { b[5] = 2; return b[:9] }, ErrUnknownVersion},
		{"short header", func(b []byte) []byte { return b[:19] }, ErrCorrupt},
		{"reserved set", func(b []byte) []byte { b[7] = 1; return reseal(b) }, ErrCorrupt},
		{"torn entry", func(b []byte) []byte { return b[:len(b)-1] }, ErrCorrupt},
		{"count too big", func(b []byte) []byte { b[15] = 3; return reseal(b) }, ErrCorrupt},
		{"bad crc", func(b []byte) []byte { b[19] ^= 1; return b }, ErrCorrupt},
		{"bit flip in an entry", func(b []byte) []byte { b[30] ^= 1; return b }, ErrCorrupt},
		{"negative fence", func(b []byte) []byte { b[8] = 0x80; return reseal(b) }, ErrCorrupt},
		{"epochs out of order", func(b []byte) []byte { b[35] = 1; return reseal(b) }, ErrCorrupt},
		{"starts out of order", func(b []byte) []byte { b[43] = 0; return reseal(b) }, ErrCorrupt},
		{"negative start", func(b []byte) []byte { b[24] = 0x80; return reseal(b) }, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeEpochs(tc.mutate(append([]byte(nil), good...)))
			wantErr(t, err, tc.err)
		})
	}
}

func FuzzEpochFile(f *testing.F) {
	f.Add(encodeEpochs(epochState{}))
	f.Add(encodeEpochs(epochState{fenced: 5, entries: []EpochEntry{{0, 0}, {3, 100}, {5, 101}}}))
	f.Add([]byte("SLEP\x00\x01"))
	f.Add(make([]byte, epochsHeaderSize+epochEntrySize))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeEpochs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if again := encodeEpochs(s); string(again) != string(b) {
			t.Fatalf("decoded %+v re-encodes differently", s)
		}
		if s2, err := decodeEpochs(encodeEpochs(s)); err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("decoded %+v decodes again as %+v %v", s, s2, err)
		}
	})
}

func TestEpochChainAppends(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{})
	wantChain(t, l)
	if e := l.LastEpoch(); e != UndefinedEpoch {
		t.Fatalf("empty log's last epoch %d", e)
	}
	appendEpoch(t, l, 2, 3)                                                                    // [0, 3)
	appendEpoch(t, l, 2, 2)                                                                    // [3, 5)
	appendEpoch(t, l, 5, 1)                                                                    // [5, 6)
	for i, res := range l.AppendGroup([][]byte{mkBatch(2, 5, 1, 1), mkBatch(1, 5, 1, 2)}, 6) { // [6, 9)
		if res.Err != nil {
			t.Fatalf("group batch %d: %v", i, res.Err)
		}
	}
	if _, _, err := l.AppendStamped(stamped(9, 8, 2, 3)); err != nil { // [9, 11)
		t.Fatal(err)
	}
	wantChain(t, l, EpochEntry{2, 0}, EpochEntry{5, 5}, EpochEntry{6, 6}, EpochEntry{8, 9})
	if e := l.LastEpoch(); e != 8 {
		t.Fatalf("last epoch %d", e)
	}

	// Refused, leaving the log as it was.
	for name, err := range map[string]error{
		"append below":   func() error { _, _, err := l.Append(mkBatch(1, 5, 1, 1), 7); return err }(),
		"group below":    l.AppendGroup([][]byte{mkBatch(1, 5, 1, 1)}, 3)[0].Err,
		"stamped below":  func() error { _, _, err := l.AppendStamped(stamped(11, 1, 1, 1)); return err }(),
		"negative epoch": func() error { _, _, err := l.Append(mkBatch(1, 5, 1, 1), -1); return err }(),
	} {
		want := ErrStaleEpoch
		if name == "negative epoch" {
			want = ErrInvalidBatch
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if l.EndOffset() != 11 || l.Failed() != nil {
		t.Fatalf("after refusals: end %d, failed %v", l.EndOffset(), l.Failed())
	}
	checkEpochChain(t, l)
}

func TestEndOffsetForEpoch(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{})
	if e, o := l.EndOffsetForEpoch(0); e != UndefinedEpoch || o != UndefinedOffset {
		t.Fatalf("empty chain: (%d, %d)", e, o)
	}
	appendEpoch(t, l, 3, 10) // [0, 10)
	appendEpoch(t, l, 5, 10) // [10, 20)
	appendEpoch(t, l, 8, 5)  // [20, 25)
	cases := []struct {
		name  string
		e     Epoch
		epoch Epoch
		end   Offset
	}{
		{"undefined", -1, UndefinedEpoch, UndefinedOffset},
		{"below the first (Kafka: the asked epoch and the first start)", 1, 1, 0},
		{"first", 3, 3, 10},
		{"between: the epoch below", 4, 3, 10},
		{"middle", 5, 5, 20},
		{"between, near the last", 7, 5, 20},
		{"last: the log end", 8, 8, 25},
		{"above the last: the last and the log end", 12, 8, 25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if e, o := l.EndOffsetForEpoch(tc.e); e != tc.epoch || o != tc.end {
				t.Fatalf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc.e, e, o, tc.epoch, tc.end)
			}
		})
	}
}

func TestEpochTruncateAndReopen(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
	l := mustOpen(t, mem, cfg)
	for _, e := range []Epoch{1, 1, 2, 2, 4, 4, 4, 7} {
		appendEpoch(t, l, e, 2)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// Batches at 0 2 | 4 6 | 8 10 12 | 14.
	steps := []struct {
		to   Offset
		want []EpochEntry
	}{
		{16, []EpochEntry{{1, 0}, {2, 4}, {4, 8}, {7, 14}}},
		{14, []EpochEntry{{1, 0}, {2, 4}, {4, 8}}},
		{10, []EpochEntry{{1, 0}, {2, 4}, {4, 8}}},
		{8, []EpochEntry{{1, 0}, {2, 4}}},
	}
	for _, s := range steps {
		if err := l.Truncate(s.to); err != nil {
			t.Fatalf("truncate to %d: %v", s.to, err)
		}
		wantChain(t, l, s.want...)
		checkEpochChain(t, l)
	}
	// A follower takes its leader's batches after the divergence point:
	// epoch 3, never seen here, then 4 again.
	for _, b := range [][]byte{stamped(8, 3, 2, 1), stamped(10, 4, 3, 2)} {
		if _, _, err := l.AppendStamped(b); err != nil {
			t.Fatal(err)
		}
	}
	want := []EpochEntry{{1, 0}, {2, 4}, {3, 8}, {4, 10}}
	wantChain(t, l, want...)
	crashed := mem.CrashClone()
	l.Close()
	for name, fs := range map[string]*vfs.Mem{"reopen": mem, "crash": crashed} {
		r := mustOpen(t, fs, cfg)
		if name == "crash" {
			// Nothing was synced after the truncation: the batches of 3
			// and 4 are gone, and so are their entries.
			wantChain(t, r, EpochEntry{1, 0}, EpochEntry{2, 4})
		} else {
			wantChain(t, r, want...)
		}
		checkEpochChain(t, r)
		r.Close()
	}
}

func TestEpochEntryDurableBeforeItsBatch(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{}
	l := mustOpen(t, mem, cfg)
	appendEpoch(t, l, 1, 2)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	appendEpoch(t, l, 3, 2)
	// Unsynced, the batch of epoch 3 is lost by a crash, but its entry was
	// durable before it was written: Open drops the entry and says so in the file.
	crashed := mem.CrashClone()
	b, err := vfs.ReadFile(crashed, "/data/t-0/epochs", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := decodeEpochs(b); err != nil || len(s.entries) != 2 {
		t.Fatalf("epochs file after the crash: %+v %v", s, err)
	}
	r := mustOpen(t, crashed, cfg)
	wantChain(t, r, EpochEntry{1, 0})
	checkEpochChain(t, r)
	appendEpoch(t, r, 2, 1) // epoch 3 never made it: 2 is not stale
	wantChain(t, r, EpochEntry{1, 0}, EpochEntry{2, 2})
	again := mustOpen(t, crashed.CrashClone(), cfg)
	wantChain(t, again, EpochEntry{1, 0}) // the batch at 2 was not synced either
}

func TestEpochWriteFailureIsSticky(t *testing.T) {
	isEpochs := func(p string) bool { return strings.Contains(p, epochsName) }
	mem := vfs.NewMem()
	l := mustOpen(t, vfs.NewFaulty(mem, vfs.FailNth(vfs.OpSync, 2, isEpochs, false)), Config{})
	appendEpoch(t, l, 1, 1)
	if _, _, err := l.Append(mkBatch(1, 5, 1, 1), 2); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append with a failing epoch write: %v", err)
	}
	if l.EndOffset() != 1 {
		t.Fatalf("the batch was written after its epoch failed: end %d", l.EndOffset())
	}
	if _, _, err := l.Append(mkBatch(1, 5, 1, 1), 1); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append after the failure: %v, want it sticky", err)
	}
	if err := l.SetFencedEpoch(5); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("fence after the failure: %v", err)
	}
}

func TestFencedEpoch(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{}
	l := mustOpen(t, mem, cfg)
	if e := l.FencedEpoch(); e != 0 {
		t.Fatalf("fenced epoch of a new log %d", e)
	}
	appendEpoch(t, l, 2, 1)
	if err := l.SetFencedEpoch(5); err != nil {
		t.Fatal(err)
	}
	if err := l.SetFencedEpoch(4); err != nil || l.FencedEpoch() != 5 {
		t.Fatalf("lower fence: %v, fenced %d", err, l.FencedEpoch())
	}
	if _, _, err := l.Append(mkBatch(1, 5, 1, 1), 4); !errors.Is(err, ErrFencedEpoch) {
		t.Fatalf("leading below the fence: %v", err)
	}
	if res := l.AppendGroup([][]byte{mkBatch(1, 5, 1, 1)}, 3); !errors.Is(res[0].Err, ErrFencedEpoch) {
		t.Fatalf("group below the fence: %v", res[0].Err)
	}
	// A follower copies its leader's older batches.
	if _, _, err := l.AppendStamped(stamped(1, 3, 1, 1)); err != nil {
		t.Fatalf("stamped batch of an older epoch: %v", err)
	}
	appendEpoch(t, l, 5, 1)
	wantChain(t, l, EpochEntry{2, 0}, EpochEntry{3, 1}, EpochEntry{5, 2})
	// Durable when it returns: a crash right away keeps it.
	r := mustOpen(t, mem.CrashClone(), cfg)
	if e := r.FencedEpoch(); e != 5 {
		t.Fatalf("fenced epoch %d after a crash", e)
	}
}

func TestEpochsRecovery(t *testing.T) {
	// build writes a log of several segments with the given batch epochs
	// and returns the chain it had.
	build := func(t *testing.T, epochs []Epoch, interval int) (*vfs.Mem, Config, []EpochEntry) {
		mem := vfs.NewMem()
		cfg := Config{SegmentBytes: 400, IndexIntervalBytes: interval}
		l := mustOpen(t, mem, cfg)
		for _, e := range epochs {
			appendEpoch(t, l, e, 2)
		}
		chain := l.Epochs()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return mem, cfg, chain
	}
	path := "/data/t-0/epochs"
	patterns := map[string][]Epoch{
		"one epoch":            {3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
		"change every batch":   {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
		"changes inside gaps":  {0, 0, 0, 1, 1, 4, 4, 4, 4, 4, 4, 5, 9, 9, 9, 9, 9, 9, 9},
		"change at the end":    {2, 2, 2, 2, 2, 2, 2, 2, 2, 7},
		"change at the second": {2, 7, 7, 7, 7, 7, 7, 7, 7, 7},
	}
	for name, epochs := range patterns {
		for _, interval := range []int{1, 150, 1 << 20} {
			t.Run(name, func(t *testing.T) {
				mem, cfg, chain := build(t, epochs, interval)
				if err := mem.Remove(path); err != nil {
					t.Fatal(err)
				}
				l := mustOpen(t, mem, cfg)
				wantChain(t, l, chain...)
				checkEpochChain(t, l)
				l.Close()
				// The rebuilt chain was written, durably.
				r := mustOpen(t, mem.CrashClone(), cfg)
				wantChain(t, r, chain...)
			})
		}
	}
	t.Run("newer version refused", func(t *testing.T) {
		mem, cfg, _ := build(t, []Epoch{1}, 1)
		b, _ := vfs.ReadFile(mem, path, 1<<20)
		b[5] = 2
		writeRaw(t, mem, path, b)
		_, err := Open(mem, "/data/t-0", cfg, zerolog.Nop())
		wantErr(t, err, ErrUnknownVersion)
	})
	t.Run("corrupt refused", func(t *testing.T) {
		mem, cfg, _ := build(t, []Epoch{1}, 1)
		b, _ := vfs.ReadFile(mem, path, 1<<20)
		b[len(b)-1] ^= 1
		writeRaw(t, mem, path, b)
		_, err := Open(mem, "/data/t-0", cfg, zerolog.Nop())
		wantErr(t, err, ErrCorrupt)
	})
	t.Run("empty log without a file", func(t *testing.T) {
		mem := vfs.NewMem()
		l := mustOpen(t, mem, Config{})
		l.Close()
		if _, err := mem.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an empty log wrote %s: %v", path, err)
		}
	})
}

func writeRaw(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	if err := vfs.WriteFileDurable(fs, path, b); err != nil {
		t.Fatal(err)
	}
}

func TestEpochsFollowTheLogStart(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{SegmentBytes: 300, IndexIntervalBytes: 1}
	l := mustOpen(t, mem, cfg)
	for _, e := range []Epoch{1, 1, 2, 3, 3, 3, 5, 5} {
		appendEpoch(t, l, e, 2)
	}
	// Batches at 0 2 | 4 | 6 8 10 | 12 14.
	steps := []struct {
		start Offset
		want  []EpochEntry
	}{
		{3, []EpochEntry{{1, 0}, {2, 4}, {3, 6}, {5, 12}}},
		{4, []EpochEntry{{2, 4}, {3, 6}, {5, 12}}},
		{9, []EpochEntry{{3, 6}, {5, 12}}},
		{16, []EpochEntry{{5, 12}}}, // an empty log keeps its last epoch
	}
	for _, s := range steps {
		if _, err := l.AdvanceStart(s.start); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Maintain(); err != nil {
			t.Fatal(err)
		}
		wantChain(t, l, s.want...)
		checkEpochChain(t, l)
		if e, o := l.EndOffsetForEpoch(5); e != 5 || o != 16 {
			t.Fatalf("EndOffsetForEpoch(5) = (%d, %d)", e, o)
		}
		r, err := Open(mem.CrashClone(), "/data/t-0", cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		wantChain(t, r, s.want...)
		r.Close()
	}
}
