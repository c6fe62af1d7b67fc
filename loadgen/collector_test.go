package loadgen

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCollectorOrderedDedup(t *testing.T) {
	clk := &fakeClock{now: epoch}
	c := newCollector(clk, true, 1)
	c.acked.Store(6)
	s0, s1 := memberSink{c, 0}, memberSink{c, 1}
	s0.Deliver([]Delivered{{Partition: 0, Offset: 0}, {Partition: 0, Offset: 1}, {Partition: 1, Offset: 0}})
	c.markKill(0)
	clk.advance(6 * time.Second)
	// Member 1 takes over partition 0 from the last commit (offset 0) and
	// gets partition 2's first record.
	s1.Deliver([]Delivered{{Partition: 2, Offset: 0}})
	if cs := c.crashResult(); cs.resumed {
		t.Fatal("a partition the killed member never owned counted as resumption")
	}
	s1.Deliver([]Delivered{{Partition: 0, Offset: 0}, {Partition: 0, Offset: 1}, {Partition: 0, Offset: 2}})
	if got := c.unique.Load(); got != 5 {
		t.Fatalf("unique %d, want 5", got)
	}
	if got := c.dup.Load(); got != 2 {
		t.Fatalf("duplicates %d, want 2", got)
	}
	cs := c.crashResult()
	if !cs.resumed || cs.pause != 6*time.Second || cs.replayed != 2 {
		t.Fatalf("crash %+v", cs)
	}
	if lag := c.lag(); lag != 1 {
		t.Fatalf("lag %d, want 1", lag)
	}
}

func TestCollectorUnorderedDedup(t *testing.T) {
	c := newCollector(&fakeClock{now: epoch}, false, 1)
	s := memberSink{c, 0}
	s.Deliver([]Delivered{{Offset: 1}, {Offset: 3}, {Offset: 2}, {Offset: 1000}})
	s.Deliver([]Delivered{{Offset: 3, Redelivered: true}, {Offset: 4, Redelivered: true}})
	if c.unique.Load() != 5 || c.dup.Load() != 1 || c.consumed.Load() != 6 {
		t.Fatalf("unique %d dup %d consumed %d", c.unique.Load(), c.dup.Load(), c.consumed.Load())
	}
}

func TestCollectorLatencies(t *testing.T) {
	clk := &fakeClock{now: epoch}
	c := newCollector(clk, true, 1)
	clk.advance(5 * time.Millisecond)
	c.acknowledged(epoch, 100, nil)
	c.acknowledged(epoch, 100, kerr.NotLeaderForPartition)
	memberSink{c, 0}.Deliver([]Delivered{{Offset: 0, Scheduled: epoch.Add(-5 * time.Millisecond)}, {Offset: 1}})
	if s := c.ack.Summary(); s.Count != 1 || !within(s.MaxMs, 5, 0.01) {
		t.Fatalf("ack %+v", s)
	}
	if s := c.e2e.Summary(); s.Count != 1 || !within(s.MaxMs, 10, 0.01) {
		t.Fatalf("e2e %+v", s)
	}
	if c.failed.Load() != 1 || c.errorCounts()["produce: NOT_LEADER_FOR_PARTITION"] != 1 {
		t.Fatalf("errors %v", c.errorCounts())
	}
}

func TestErrorKind(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{kerr.NotEnoughReplicas, "NOT_ENOUGH_REPLICAS"},
		{fmt.Errorf("produce: %w", kerr.RequestTimedOut), "REQUEST_TIMED_OUT"},
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("flush: %w", context.Canceled), "canceled"},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "connection refused"},
	}
	for _, tt := range tests {
		if got := errorKind(tt.err); got != tt.want {
			t.Errorf("errorKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestBitset(t *testing.T) {
	var b bitset
	for _, i := range []int64{0, 63, 64, 1 << 20} {
		if b.testAndSet(i) {
			t.Fatalf("%d present before set", i)
		}
		if !b.testAndSet(i) {
			t.Fatalf("%d absent after set", i)
		}
	}
	first := b.testAndSet(-1)
	second := b.testAndSet(-1)
	if first || second {
		t.Fatal("negative offsets are never duplicates")
	}
}
