package partition

// Failure paths of the partition owner: a failed fsync, a failed snapshot
// and a shutdown racing produce must each leave every request answered and
// the producer state no further than what is durable.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// armedFaults fails operations of one kind on paths containing a substring
// while armed; tests arm it between steps.
type armedFaults struct {
	armed atomic.Bool
	hits  atomic.Int64 // faults injected
	op    vfs.Op
	path  string
	err   error
}

func (a *armedFaults) inject(op vfs.Op, path string) error {
	if a.armed.Load() && op == a.op && strings.Contains(path, a.path) {
		a.hits.Add(1)
		if a.err != nil {
			return a.err
		}
		return vfs.ErrInjected
	}
	return nil
}

// newFixtureOn opens a snapshot fixture with default segments on fs.
func newFixtureOn(t *testing.T, fs vfs.FS) *snapshotFixture {
	f := &snapshotFixture{t: t, dir: t.TempDir(), now: time.UnixMilli(1_000_000),
		cfg: wal.Config{}.WithDefaults(), fs: fs}
	f.open()
	return f
}

// appendWithin is the fixture's append with a deadline: a reply that never
// comes fails the test instead of hanging it.
func (f *snapshotFixture) appendWithin(raw []byte, d time.Duration) AppendResult {
	f.t.Helper()
	r := newTestAppend(f.t, raw)
	f.part.appendGroup([]*AppendRequest{r})
	f.part.handleReady()
	select {
	case res := <-r.res:
		return res
	case <-time.After(d):
		f.t.Fatalf("no reply within %v", d)
		return AppendResult{}
	}
}

func TestIdempotentRetryAfterFailedFsyncIsAnswered(t *testing.T) {
	faults := &armedFaults{op: vfs.OpSync, path: ".log"}
	f := newFixtureOn(t, vfs.NewFaulty(vfs.OS, faults.inject))
	if res := f.appendWithin(testBatch(1, 7, 0, 0, 1), 5*time.Second); res.Err != nil {
		t.Fatal(res.Err)
	}
	faults.armed.Store(true)
	first := f.appendWithin(testBatch(1, 7, 0, 1, 1), 5*time.Second)
	if !errors.Is(first.Err, ErrStorage) {
		t.Fatalf("append with a failed fsync: %+v, want a storage error", first)
	}
	if got := f.part.producers[7].lastSeq(); got != 0 {
		t.Fatalf("producer state ran ahead of durability: last sequence %d, want 0", got)
	}
	// The client retries the same batch: it must be answered (with an
	// error: the log is failed), not parked behind a high watermark that
	// can never reach it.
	retry := f.appendWithin(testBatch(1, 7, 0, 1, 1), 5*time.Second)
	if retry.Err == nil || retry.Dup {
		t.Fatalf("retry after a failed fsync: %+v, want an error", retry)
	}
	if hw, _ := f.part.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after the failed fsync, want 1", hw)
	}
}

func TestProducerStateFollowsOnlyAppendedBatches(t *testing.T) {
	// A group whose write fails leaves every producer as it was, including
	// one the group introduced.
	faults := &armedFaults{op: vfs.OpWrite, path: ".log", err: errors.New("no space left on device")}
	f := newFixtureOn(t, vfs.NewFaulty(vfs.OS, faults.inject))
	if res := f.appendWithin(testBatch(1, 7, 0, 0, 1), 5*time.Second); res.Err != nil {
		t.Fatal(res.Err)
	}
	faults.armed.Store(true)
	reqs := []*AppendRequest{}
	for _, raw := range [][]byte{testBatch(1, 7, 0, 1, 1), testBatch(1, 8, 0, 0, 1), testBatch(1, 7, 0, 2, 1)} {
		reqs = append(reqs, newTestAppend(t, raw))
	}
	f.part.appendGroup(reqs)
	f.part.handleReady()
	for i, r := range reqs {
		if res := recvWithin(t, r.res, fmt.Sprintf("the answer to batch %d of a failed write", i)); !errors.Is(res.Err, ErrStorage) {
			t.Fatalf("batch %d of a failed write: %+v", i, res)
		}
	}
	if _, ok := f.part.producers[8]; ok {
		t.Fatal("a producer whose only batch failed is remembered")
	}
	if got := f.part.producers[7].lastSeq(); got != 0 {
		t.Fatalf("producer 7 last sequence %d after a failed write, want 0", got)
	}
}

func TestSnapshotFailurePostponesRetention(t *testing.T) {
	faults := &armedFaults{op: vfs.OpRename, path: ".producers"}
	f := newSnapshotFixture(t)
	f.fs = vfs.NewFaulty(vfs.OS, faults.inject)
	f.close()
	f.open()
	if res := f.append(testBatch(2, 7, 0, 0, 1)); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := f.part.writeSnapshot(); err != nil {
		t.Fatal(err)
	}
	second := f.append(testBatch(2, 7, 0, 2, 1))
	if second.Err != nil {
		t.Fatal(second.Err)
	}
	// Enough plain data that retention would delete the producer's batches.
	for f.part.log.Size() < 4*f.cfg.SegmentBytes {
		if res := f.append(testBatch(4, -1, -1, -1, 5)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	below := belowKeeping(f.part.log.Segments(), keepBytes)
	if below < second.Base+2 { // the second batch holds two offsets
		t.Fatalf("retention would delete only below %d, not the producer's batch at %d: the test proves nothing", below, second.Base)
	}
	faults.armed.Store(true)
	if n, err := f.deleteLocalBelow(below); !errors.Is(err, vfs.ErrInjected) || n != 0 {
		t.Fatalf("deletion with a failing snapshot: %d segments, %v; want none and the snapshot's failure", n, err)
	}
	if start := f.part.log.StartOffset(); start > second.Base {
		t.Fatalf("retention deleted up to %d although the snapshot replacing it was not written", start)
	}
	// A crash here (nothing more is written) and a restart: the producer
	// continues in order.
	f.close()
	f.fs = vfs.OS
	f.open()
	if next := f.append(testBatch(1, 7, 0, 4, 1)); next.Err != nil {
		t.Fatalf("the producer's next batch after restart: %v", next.Err)
	}
}

func TestProduceRacingShutdownIsAnswered(t *testing.T) {
	// Enqueue used to pick at random between a free queue slot and the
	// closed done channel, so some batches were queued after the final
	// drain and never answered. Many rounds make the race likely.
	for round := range 200 {
		f := newFixtureOn(t, vfs.NewMem())
		ctx, cancel := context.WithCancel(context.Background())
		go f.part.Run(ctx)
		var wg sync.WaitGroup
		var queued []*AppendRequest
		var mu sync.Mutex
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 16 {
					raw := testBatch(1, -1, -1, -1, 1)
					h, _ := wal.ParseBatchHeader(raw)
					r := NewAppendRequest(raw, h, false)
					if f.part.Enqueue(r) == nil {
						mu.Lock()
						queued = append(queued, r)
						mu.Unlock()
					}
				}
			}()
		}
		cancel()
		waitGroupWithin(t, &wg, fmt.Sprintf("round %d: the producers' Enqueue calls to return", round))
		recvWithin(t, f.part.done, fmt.Sprintf("round %d: the owner to stop after its cancel", round))
		for i, r := range queued {
			select {
			case <-r.res:
			case <-time.After(5 * time.Second):
				t.Fatalf("round %d: queued batch %d of %d never answered", round, i, len(queued))
			}
		}
		if err := f.part.log.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
