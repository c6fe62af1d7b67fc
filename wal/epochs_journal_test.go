package wal

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/wal/vfs"
)

// pollUntil polls cond until it holds or a deadline passes.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// journalGate holds the journal's fsyncs while closed: each one waits for a
// token. Open it (deferred after the fixture's close) so nothing stays held.
type journalGate struct {
	closed atomic.Bool
	tokens chan struct{}
	// failSegmentSync fails the next fsync of a segment.
	failSegmentSync atomic.Bool
}

func newJournalGate(mem *vfs.Mem) (*journalGate, vfs.FS) {
	g := &journalGate{tokens: make(chan struct{})}
	return g, vfs.NewFaulty(mem, func(op vfs.Op, path string) error {
		if op != vfs.OpSync {
			return nil
		}
		if strings.HasSuffix(path, journalSuffix) && g.closed.Load() {
			<-g.tokens
		}
		if strings.HasSuffix(path, logSuffix) && g.failSegmentSync.CompareAndSwap(true, false) {
			return vfs.ErrInjected
		}
		return nil
	})
}

// open lets every held and later journal fsync through.
func (g *journalGate) open() {
	g.closed.Store(false)
	close(g.tokens)
}

// feed runs fn, letting held journal fsyncs through one by one until it
// returns, and returns its error.
func (g *journalGate) feed(t *testing.T, done <-chan error) error {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case g.tokens <- struct{}{}:
		case <-timeout:
			t.Fatal("timed out letting journal rounds through")
		}
	}
}

// let lets one held journal fsync through, failing the test if none
// arrives in time (a round that never fsyncs must fail, not hang).
func (g *journalGate) let(t *testing.T) {
	t.Helper()
	select {
	case g.tokens <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a held journal fsync")
	}
}

func run(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	return done
}

// watchDurable records, at every durable-end notification, a DurableEnd
// above EndOffset or above ceiling.
type watchDurable struct {
	mu      sync.Mutex
	ceiling Offset
	bad     []string
	calls   int
}

func (w *watchDurable) install(l *Log) {
	l.SetDurableHook(func() {
		d, e := l.DurableEnd(), l.EndOffset()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.calls++
		if d > e || d > w.ceiling {
			w.bad = append(w.bad, fmt.Sprintf("durable %d end %d ceiling %d", d, e, w.ceiling))
		}
	})
}

func (w *watchDurable) set(c Offset) { w.mu.Lock(); w.ceiling = c; w.mu.Unlock() }

func (w *watchDurable) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) > 0 {
		t.Fatalf("durable end above what is durable: %v", w.bad)
	}
}

// TestTruncateIgnoresStaleJournalNotes: after Truncate(to) on a journaled
// log, the journal's notice for an append made before the truncation never
// raises DurableEnd above to, neither while the truncation runs nor after
// new batches reuse the offsets; the new batches count once their own
// journal round is fsynced.
func TestTruncateIgnoresStaleJournalNotes(t *testing.T) {
	mem := vfs.NewMem()
	gate, fs := newJournalGate(mem)
	f := mustJournalFixture(t, fs, Config{}, smallJournal, 1)
	defer f.close()
	defer gate.open()
	l := f.logs[0]
	var w watchDurable
	w.set(10)
	w.install(l)

	appendEpoch(t, l, 1, 10) // [0, 10)
	if d, err := l.Sync(); err != nil || d != 10 {
		t.Fatalf("sync: %d %v", d, err)
	}
	gate.closed.Store(true)
	appendEpoch(t, l, 1, 10) // [10, 20): its round is held
	done := run(func() error { return l.Truncate(10) })
	pollUntil(t, "the truncation to remove the bytes", func() bool { return l.EndOffset() == 10 })
	if d := l.DurableEnd(); d > 10 {
		t.Fatalf("durable end %d while truncating to 10", d)
	}
	// The held round (the append [10, 20), maybe the truncation record),
	// then the truncation record's if it was not in it.
	if err := gate.feed(t, done); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	if d := l.DurableEnd(); d != 10 {
		t.Fatalf("durable end %d after truncating to 10", d)
	}
	// New batches at the same offsets: not durable until their round is.
	appendEpoch(t, l, 2, 15) // [10, 25)
	if d := l.DurableEnd(); d != 10 {
		t.Fatalf("durable end %d before the new batch's round", d)
	}
	w.set(25)
	var d Offset
	if err := gate.feed(t, run(func() (err error) { d, err = l.Sync(); return err })); err != nil || d != 25 {
		t.Fatalf("sync after the new batch: %d %v", d, err)
	}
	w.check(t)
}

// TestFailedTruncateIgnoresStaleJournalNotes: when Truncate fails after it
// removed bytes (here the segment fsync), before its journal record, the
// round holding earlier appends completes afterwards; its notice must not
// raise the failed log's DurableEnd over the removed offsets.
func TestFailedTruncateIgnoresStaleJournalNotes(t *testing.T) {
	mem := vfs.NewMem()
	gate, fs := newJournalGate(mem)
	f := mustJournalFixture(t, fs, Config{}, smallJournal, 1)
	defer f.close()
	defer gate.open()
	l := f.logs[0]
	var w watchDurable
	w.set(10)
	w.install(l)
	appendEpoch(t, l, 1, 10)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	gate.closed.Store(true)
	appendEpoch(t, l, 1, 10) // [10, 20): its round is held
	gate.failSegmentSync.Store(true)
	if err := l.Truncate(10); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("truncate with a failing fsync: %v", err)
	}
	w.mu.Lock()
	calls := w.calls
	w.mu.Unlock()
	gate.let(t) // the held round
	pollUntil(t, "the held round's notice", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.calls > calls
	})
	if d := l.DurableEnd(); d > 10 {
		t.Fatalf("durable end %d after a failed truncation to 10", d)
	}
	w.check(t)
}

// TestTruncateAppendStampedCrash: a follower truncates to its divergence
// point and appends its leader's batches (their offsets and epochs); a crash
// after they are durable recovers exactly that log and chain, journaled or
// not.
func TestTruncateAppendStampedCrash(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "journaled"}[journaled], func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := Config{SegmentBytes: 400, IndexIntervalBytes: 1}
			var l *Log
			var f *journalFixture
			if journaled {
				f = mustJournalFixture(t, mem, cfg, smallJournal, 1)
				defer f.close()
				l = f.logs[0]
			} else {
				l = mustOpen(t, mem, cfg)
			}
			// Local: epoch 1 at [0, 6), epoch 3 (uncommitted) at [6, 12).
			for _, e := range []Epoch{1, 1, 1, 3, 3, 3} {
				appendEpoch(t, l, e, 2)
			}
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			// The leader, at epoch 4, has epoch 1 up to 8, then epoch 4.
			leaderEnd, _ := Offset(8), Epoch(4)
			if e, o := l.EndOffsetForEpoch(3); e != 3 || o != 12 {
				t.Fatalf("EndOffsetForEpoch(3) = (%d, %d)", e, o)
			}
			// The leader answers (1, 8) for epoch 3; the follower truncates to
			// min(8, its end of epoch 1 = 6).
			_, end1 := l.EndOffsetForEpoch(1)
			to := min(leaderEnd, end1)
			if to != 6 {
				t.Fatalf("divergence point %d", to)
			}
			if err := l.Truncate(to); err != nil {
				t.Fatal(err)
			}
			leader := [][]byte{stamped(6, 1, 2, 9), stamped(8, 4, 3, 9), stamped(11, 4, 1, 9)}
			for _, b := range leader {
				if _, _, err := l.AppendStamped(b); err != nil {
					t.Fatal(err)
				}
			}
			if d, err := l.Sync(); err != nil || d != 12 {
				t.Fatalf("sync: %d %v", d, err)
			}
			want := []EpochEntry{{1, 0}, {4, 8}}
			wantChain(t, l, want...)
			crashed := mem.CrashClone()
			var r *Log
			if journaled {
				g := mustJournalFixture(t, crashed, cfg, smallJournal, 1)
				defer g.close()
				r = g.logs[0]
			} else {
				r = mustOpen(t, crashed, cfg)
			}
			wantChain(t, r, want...)
			checkEpochChain(t, r)
			got := readAll(t, r, 1<<20)
			if len(got) != 6 || !equalBatches(got[3:], leader) {
				t.Fatalf("recovered %d batches; want the 3 local then the leader's 3", len(got))
			}
		})
	}
}
