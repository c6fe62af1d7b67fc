package wal

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// One appender (appending, rolling, maintenance, deleting the oldest
// segments beyond 20,000 bytes, truncation), readers and syncers run
// together; the race detector and the checks below must hold.
func TestConcurrentAppendReadSync(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), Config{SegmentBytes: 2000, IndexIntervalBytes: 300})
	var (
		done      atomic.Bool
		truncates atomic.Int64
		wg        sync.WaitGroup
	)
	errc := make(chan error, 16)
	report := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	wg.Add(1)
	go func() { // the appender
		defer wg.Done()
		defer done.Store(true)
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range 3000 {
			if _, _, err := l.Append(mkBatch(1+rng.IntN(5), rng.IntN(200), int64(i), byte(i)), 1); err != nil {
				report(err)
				return
			}
			switch rng.IntN(50) {
			case 0:
				if _, err := l.Maintain(); err != nil {
					report(err)
					return
				}
				if _, err := deleteOldest(l, 20000); err != nil {
					report(err)
					return
				}
			case 1:
				truncates.Add(1) // odd while truncating
				to := l.EndOffset()
				if b, err := l.Read(max(l.StartOffset(), to-20), to, 1); err == nil && b != nil {
					h, _ := ParseBatchHeader(b)
					to = h.BaseOffset
				}
				err := l.Truncate(to)
				truncates.Add(1)
				if err != nil {
					report(err)
					return
				}
			}
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() { // a reader
			defer wg.Done()
			rng := rand.New(rand.NewPCG(2, uint64(r)))
			for !done.Load() {
				start, end := l.StartOffset(), l.EndOffset()
				from := start + Offset(rng.Int64N(int64(end-start)+1))
				b, err := l.Read(from, end, rng.IntN(3000))
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // a deletion or truncation moved the range
				}
				if err != nil {
					report(err)
					return
				}
				for len(b) > 0 {
					h, err := ParseBatchHeader(b)
					if err == nil {
						err = CheckCRC(b)
					}
					if err != nil {
						report(err)
						return
					}
					b = b[h.Size():]
				}
				if _, err := l.FindTimestamp(rng.Int64N(3000)); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() { // a syncer
			defer wg.Done()
			for !done.Load() {
				tr := truncates.Load()
				target := l.EndOffset()
				durable, err := l.Sync()
				if err != nil {
					report(err)
					return
				}
				if durable < target && tr%2 == 0 && truncates.Load() == tr {
					report(errors.New("sync returned before covering the end it was called at"))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	checkInvariants(t, l, true)
}

// Callers arriving while an fsync runs wait for the next round when their
// data is not covered, and all of them share that one round.
func TestGroupCommitCoalesces(t *testing.T) {
	var (
		armed   atomic.Bool
		rounds  atomic.Int64
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	inject := func(op vfs.Op, path string) error {
		if op != vfs.OpSync || !strings.HasSuffix(path, ".log") || !armed.Load() {
			return nil
		}
		if rounds.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	}
	l := mustOpen(t, vfs.NewFaulty(vfs.NewMem(), inject), Config{})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the log closes, should the test fail early
	mustAppend(t, l, nil, mkBatch(1, 10, 1, 1))
	armed.Store(true)
	first := make(chan Offset, 1)
	go func() {
		d, _ := l.Sync()
		first <- d
	}()
	recvWithin(t, entered, "round 1 inside its fsync") // covering offset 1
	mustAppend(t, l, nil, mkBatch(1, 10, 1, 1))
	var wg sync.WaitGroup
	results := make([]Offset, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Sync()
			if err != nil {
				t.Error(err)
			}
			results[i] = d
		}()
	}
	letGo()
	if d := recvWithin(t, first, "the first round"); d != 1 {
		t.Errorf("first round made %d durable, want 1", d)
	}
	waitGroupWithin(t, &wg, "the callers of the second round")
	for i, d := range results {
		if d != 2 {
			t.Errorf("caller %d: durable %d, want 2", i, d)
		}
	}
	if n := rounds.Load(); n != 2 {
		t.Errorf("%d fsync rounds for 9 callers, want 2", n)
	}
}
