package wal

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// checkInvariants compares every segment's in-memory index with a fresh scan
// of its file, and checks that segments are contiguous. Unless strict, a
// sealed segment whose trusted index files hide corrupt batch contents passes.
func checkInvariants(t testing.TB, l *Log, strict bool) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i, s := range l.segs {
		if i > 0 && s.base() != l.segs[i-1].idx.next {
			t.Fatalf("segment %d follows one ending at %d", s.base(), l.segs[i-1].idx.next)
		}
		if s.sealed == (i == len(l.segs)-1) {
			t.Fatalf("segment %d sealed=%v at position %d of %d", s.base(), s.sealed, i, len(l.segs))
		}
		res, err := scanSegment(s.file, s.base(), s.idx.size, l.cfg.IndexIntervalBytes)
		if !strict && s.sealed && err == nil && res.stop != nil {
			continue
		}
		if err != nil || res.stop != nil {
			t.Fatalf("segment %d does not scan: %v %v", s.base(), err, res.stop)
		}
		got, want := s.idx, res.idx
		got.sinceIndex, want.sinceIndex = 0, 0
		if len(got.offsets) == 0 {
			got.offsets = nil
		}
		if len(got.times) == 0 {
			got.times = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("segment %d index differs from a scan:\n got %+v\nwant %+v", s.base(), got, want)
		}
	}
	if end := l.segs[len(l.segs)-1].idx.next; end != l.end {
		t.Fatalf("end %d, last segment ends at %d", l.end, end)
	}
}

// crashModel is what the test knows the log holds: batches in offset order
// from offset start.
type crashModel struct {
	batches [][]byte
}

// cut keeps the batches below off (a batch boundary).
func (m *crashModel) cut(off Offset) {
	for i, b := range m.batches {
		if h, _ := ParseBatchHeader(b); h.BaseOffset >= off {
			m.batches = m.batches[:i]
			return
		}
	}
}

// crashScenario appends random batches with syncs, truncations, maintenance,
// deletions and crashes at random points, checking after each crash that the
// recovered log is a prefix of what was appended and holds everything
// synced. A third of the seeds delete the oldest segments beyond a size
// (deleteOldest: DeleteBelow at the offset size-based retention would pick)
// after each Maintain. With advance, maintenance is sometimes preceded by
// AdvanceStart to a random offset (the other draws of a seed are the same
// either way).
func crashScenario(t *testing.T, seed uint64, advance bool) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	clk := newClock()
	cfg := Config{
		SegmentBytes:       int64(150 + rng.IntN(2000)),
		IndexIntervalBytes: 1 + rng.IntN(600),
		SegmentAge:         time.Duration(1+rng.IntN(10)) * time.Minute,
		Now:                clk.Now,
	}
	keepBytes := int64(-1) // <0: no deletion but the leftovers below the start
	if rng.IntN(3) == 0 {
		keepBytes = int64(500 + rng.IntN(3000))
	}
	fs := vfs.NewMem()
	l := mustOpen(t, fs, cfg)
	var m crashModel
	for step := range 150 + rng.IntN(150) {
		switch p := rng.IntN(100); {
		case p < 65:
			b := mkBatch(1+rng.IntN(8), rng.IntN(300), clk.Now().UnixMilli()+int64(rng.IntN(1000)), byte(rng.Uint32()))
			mustAppend(t, l, nil, b)
			m.batches = append(m.batches, b)
		case p < 80:
			if _, err := l.Sync(); err != nil {
				t.Fatalf("step %d: sync: %v", step, err)
			}
		case p < 85:
			if advance && rng.IntN(2) == 0 {
				to := l.StartOffset() + Offset(rng.Int64N(int64(l.EndOffset()-l.StartOffset())+1))
				if got, err := l.AdvanceStart(to); err != nil || got != max(to, l.StartOffset()) {
					t.Fatalf("step %d: advance start to %d: %d %v", step, to, got, err)
				}
				m.dropBelow(l.StartOffset())
			}
			clk.Advance(time.Duration(rng.IntN(5)) * time.Minute)
			if _, err := l.Maintain(); err != nil {
				t.Fatalf("step %d: maintain: %v", step, err)
			}
			if keepBytes >= 0 {
				if _, err := deleteOldest(l, keepBytes); err != nil {
					t.Fatalf("step %d: delete beyond %d bytes: %v", step, keepBytes, err)
				}
			}
			m.dropBelow(l.StartOffset())
		case p < 88 && len(m.batches) > 0:
			i := rng.IntN(len(m.batches))
			h, _ := ParseBatchHeader(m.batches[i])
			if h.BaseOffset < l.StartOffset() { // the batch holding a start set by AdvanceStart
				break
			}
			if err := l.Truncate(h.BaseOffset); err != nil {
				t.Fatalf("step %d: truncate to %d: %v", step, h.BaseOffset, err)
			}
			m.cut(h.BaseOffset)
		case p < 95:
			l = crashAndCheck(t, rng, fs, l, &m, cfg)
			fs = l.fs.(*vfs.Mem)
		}
	}
	checkInvariants(t, l, true)
}

// dropBelow drops the batches wholly below start.
func (m *crashModel) dropBelow(start Offset) {
	for len(m.batches) > 0 {
		h, _ := ParseBatchHeader(m.batches[0])
		if h.LastOffset() >= start {
			return
		}
		m.batches = m.batches[1:]
	}
}

// crashAndCheck crashes fs (maybe with torn tails), recovers and checks the
// recovered log against the model, which it then trims to what survived.
func crashAndCheck(t *testing.T, rng *rand.Rand, fs *vfs.Mem, l *Log, m *crashModel, cfg Config) *Log {
	t.Helper()
	durable := l.DurableEnd()
	var crashed *vfs.Mem
	if rng.IntN(2) == 0 {
		crashed = fs.CrashCloneTorn(rng)
	} else {
		crashed = fs.CrashClone()
	}
	l.Close() // the old log's later syncs go to the old FS only
	r := mustOpen(t, crashed, cfg)
	checkInvariants(t, r, true)
	got := readAll(t, r, 1+rng.IntN(4000))
	// A prefix of the model, starting at the model's first batch or later
	// (a deletion may have deleted more than the model knows if a crash
	// resurrected nothing: deletions are durable before DeleteBelow and
	// Maintain return).
	m.dropBelow(r.StartOffset())
	if len(got) > len(m.batches) || !equalBatches(got, m.batches[:len(got)]) {
		t.Fatalf("recovered %d batches from %d are not a prefix of the %d appended", len(got), r.StartOffset(), len(m.batches))
	}
	if r.EndOffset() < durable {
		t.Fatalf("recovered end %d below durable end %d before the crash", r.EndOffset(), durable)
	}
	if r.DurableEnd() != r.EndOffset() {
		t.Fatalf("recovered durable end %d, end %d", r.DurableEnd(), r.EndOffset())
	}
	m.batches = m.batches[:len(got)]
	if len(got) == 0 && r.EndOffset() != r.StartOffset() {
		t.Fatalf("empty log with start %d end %d", r.StartOffset(), r.EndOffset())
	}
	checkFindTimestamp(t, r, got)
	return r
}

// checkFindTimestamp compares FindTimestamp with a brute-force search.
func checkFindTimestamp(t *testing.T, l *Log, batches [][]byte) {
	t.Helper()
	for _, b := range batches {
		h, _ := ParseBatchHeader(b)
		for _, ts := range []int64{h.MaxTimestamp, h.MaxTimestamp + 1} {
			var want []byte
			for _, c := range batches {
				if ch, _ := ParseBatchHeader(c); ch.MaxTimestamp >= ts {
					want = c
					break
				}
			}
			got, err := l.FindTimestamp(ts)
			if err != nil || string(got) != string(want) {
				t.Fatalf("FindTimestamp(%d): %d bytes (%v), want %d bytes", ts, len(got), err, len(want))
			}
		}
	}
}

func TestCrashRecovery(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with: go test ./wal -run 'TestCrashRecovery/seed=%d$'", seed)
				}
			}()
			crashScenario(t, seed, false)
		})
	}
}

// TestCrashRecoveryWithAdvanceStart is TestCrashRecovery with AdvanceStart
// (DeleteRecords) mixed into maintenance and deletion.
func TestCrashRecoveryWithAdvanceStart(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with: go test ./wal -run 'TestCrashRecoveryWithAdvanceStart/seed=%d$'", seed)
				}
			}()
			crashScenario(t, seed, true)
		})
	}
}
