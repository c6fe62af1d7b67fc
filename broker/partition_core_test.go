package broker

import (
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

func TestCoreSingleReplica(t *testing.T) {
	c := newCore([]int32{1}, 0, 0)
	if c.wait(10, 1) || c.wait(5, 2) || c.wait(10, 3) {
		t.Fatal("nothing is durable yet; no reply may go")
	}
	hw, rose, released := c.durableEnd(1, 7)
	if hw != 7 || !rose || !slices.Equal(released, []int{2}) {
		t.Fatalf("durable 7: hw %d rose %v released %v", hw, rose, released)
	}
	hw, _, released = c.durableEnd(1, 10)
	if hw != 10 || !slices.Equal(released, []int{1, 3}) {
		t.Fatalf("durable 10: hw %d released %v", hw, released)
	}
	if !c.wait(9, 4) {
		t.Fatal("a reply below the high watermark must go at once")
	}
	if hw, rose, _ := c.durableEnd(1, 8); hw != 10 || rose {
		t.Fatalf("a smaller durable end moved the high watermark to %d", hw)
	}
}

// TestCoreQuorum drives three replicas through a script: the high watermark
// is the second-largest durable end, and never falls.
func TestCoreQuorum(t *testing.T) {
	steps := []struct {
		replica int32
		end     wal.Offset
		wantHW  wal.Offset
	}{
		{1, 10, 0}, // only the leader has it
		{2, 4, 4},  // two replicas hold [0,4)
		{3, 8, 8},  // second-largest of 10, 4, 8
		{2, 12, 10},
		{3, 2, 10},  // stale report: ignored
		{9, 50, 10}, // not a replica
		{3, 12, 12},
	}
	c := newCore([]int32{1, 2, 3}, 0, 0)
	c.wait(9, 1)
	for i, s := range steps {
		hw, _, released := c.durableEnd(s.replica, s.end)
		if hw != s.wantHW {
			t.Fatalf("step %d (%d at %d): hw %d, want %d", i, s.replica, s.end, hw, s.wantHW)
		}
		if len(released) > 0 && hw < 9 {
			t.Fatalf("step %d: reply for end 9 released at hw %d", i, hw)
		}
	}
}

// TestCoreCurrentEpochRule is Raft's Figure 8 in miniature: records of an
// older epoch replicated to a quorum do not commit until the new leader's
// own epoch start is on a quorum.
func TestCoreCurrentEpochRule(t *testing.T) {
	c := newCore([]int32{1, 2, 3}, 20, 0) // this leader's epoch starts at 20
	c.durableEnd(1, 21)
	if hw, _, _ := c.durableEnd(2, 20); hw != 0 {
		t.Fatalf("old-epoch records [0,20) on a quorum committed to %d before the epoch start was", hw)
	}
	if hw, _, _ := c.durableEnd(2, 21); hw != 21 {
		t.Fatalf("epoch start on a quorum: hw %d, want 21", hw)
	}
}

// TestCoreQuorumEvenReplicaCount: with four replicas a quorum is three, not
// two; half the replicas holding a record do not commit it.
func TestCoreQuorumEvenReplicaCount(t *testing.T) {
	for _, tc := range []struct {
		replicas []int32
		quorum   int
	}{
		{[]int32{1}, 1}, {[]int32{1, 2}, 2}, {[]int32{1, 2, 3}, 2},
		{[]int32{1, 2, 3, 4}, 3}, {[]int32{1, 2, 3, 4, 5}, 3}, {[]int32{1, 2, 3, 4, 5, 6}, 4},
	} {
		c := newCore(tc.replicas, 0, 0)
		if got := c.quorum(); got != tc.quorum {
			t.Errorf("%d replicas: quorum %d, want %d", len(tc.replicas), got, tc.quorum)
		}
	}
	c := newCore([]int32{1, 2, 3, 4}, 0, 0)
	c.durableEnd(1, 10)
	if hw, rose, _ := c.durableEnd(2, 10); rose || hw != 0 {
		t.Fatalf("two of four replicas moved the high watermark to %d", hw)
	}
	if hw, _, _ := c.durableEnd(3, 10); hw != 10 {
		t.Fatalf("three of four replicas: high watermark %d, want 10", hw)
	}
}
