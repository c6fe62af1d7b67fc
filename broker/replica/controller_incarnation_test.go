package replica

// Tests of the controller's incarnation rule: a replica that lost its disk
// (it answers with an incarnation the state does not record) neither votes
// nor wins until it has caught up; without an eligible quorum the partition
// stays leaderless until an unclean election is forced.

import (
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

func ackInc(c *Controller, from NodeID, e, last wal.Epoch, end wal.Offset, inc Incarnation, synced wal.Epoch) {
	c.Step(Message{Type: MsgFenceAck, From: from, To: ControllerNode, Epoch: e, LastEpoch: last, Offset: end, Incarnation: inc, SyncedEpoch: synced})
}

// takeCAS runs up to n ticks and returns the first CAS asked for.
func takeCAS(c *Controller, n int) *CAS {
	for i := 0; ; i++ {
		rd := c.Ready()
		c.Advance()
		if rd.CAS != nil || i == n {
			return rd.CAS
		}
		c.Tick()
	}
}

// The case: C was down while A led and B followed; B's disk was
// replaced and A crashed. B (new incarnation, empty log) and C (behind)
// answer the fence: a quorum of answers, but B's does not count, so no
// leader is elected, and the partition reports B as the lost replica.
func TestControllerLostDiskBlocks(t *testing.T) {
	const a, b, cc = NodeID(0), NodeID(1), NodeID(2)
	s := State{Epoch: 4, Leader: a, Replicas: []NodeID{a, b, cc}, Incarnations: []Incarnation{10, 11, 12}, Version: 7}
	c := newTestController(t, s, b, cc)
	c.Tick()
	e := fences(t, c)
	ackInc(c, b, e, -1, 0, 99, 0) // B: a new disk
	ackInc(c, cc, e, 3, 40, 12, 0)
	if cas := takeCAS(c, 3*DefaultRoundTicks); cas != nil {
		t.Fatalf("elected from a quorum holding a replica that lost its disk: CAS %+v", cas)
	}
	if got := c.Blocked(); !slices.Equal(got, []NodeID{b}) {
		t.Fatalf("Blocked() = %v, want [%d]", got, b)
	}

	// A comes back: A and C are an eligible quorum, A has the longest log.
	c.SetLive([]NodeID{a, b, cc})
	for range 3 * DefaultRoundTicks {
		c.Tick()
		if _, electing, _ := c.Status(); electing {
			break
		}
	}
	rd := c.Ready()
	c.Advance()
	if len(rd.Messages) == 0 {
		t.Fatal("no new round once A is live")
	}
	e = rd.Messages[0].Epoch
	ackInc(c, b, e, -1, 0, 99, 0)
	ackInc(c, a, e, 4, 60, 10, 0)
	ackInc(c, cc, e, 3, 40, 12, 0)
	cas := takeCAS(c, 3)
	if cas == nil || cas.New.Leader != a {
		t.Fatalf("CAS %+v, want leader %d", cas, a)
	}
	if !slices.Equal(cas.New.Incarnations, []Incarnation{10, 11, 12}) {
		t.Fatalf("incarnations %v: B's new one recorded before it caught up", cas.New.Incarnations)
	}
}

// A lost replica that proves it caught up in the state's epoch votes again
// and its incarnation is recorded; a proof from an older epoch does not
// count. MsgCaughtUp records it outside an election.
func TestControllerCaughtUpCountsAgain(t *testing.T) {
	s := State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 12}, Version: 7}

	c := newTestController(t, s, 1, 2)
	c.Tick()
	e := fences(t, c)
	ackInc(c, 1, e, 4, 60, 99, 3) // caught up in epoch 3: stale proof
	ackInc(c, 2, e, 4, 60, 12, 0)
	if cas := takeCAS(c, 2); cas != nil {
		t.Fatalf("a proof from an older epoch counted: CAS %+v", cas)
	}
	ackInc(c, 1, e, 4, 60, 99, 4) // caught up in the state's epoch
	cas := takeCAS(c, DefaultRoundTicks)
	if cas == nil || cas.New.Leader == NoLeader {
		t.Fatal("no election with an eligible quorum")
	}
	if got := cas.New.IncarnationOf(1); got != 99 {
		t.Fatalf("B's incarnation recorded as %d, want 99", got)
	}

	c = newTestController(t, s, 0, 1, 2)
	c.Step(Message{Type: MsgCaughtUp, From: 1, To: ControllerNode, Epoch: 3, Incarnation: 99})
	if c.HasReady() {
		t.Fatal("a catch-up in an older epoch was recorded")
	}
	c.Step(Message{Type: MsgCaughtUp, From: 1, To: ControllerNode, Epoch: 4, Incarnation: 99})
	rd := c.Ready()
	c.Advance()
	if rd.CAS == nil || rd.CAS.Expect != 7 || rd.CAS.New.Epoch != 4 || rd.CAS.New.Leader != 0 || rd.CAS.New.IncarnationOf(1) != 99 {
		t.Fatalf("recording CAS %+v", rd.CAS)
	}
	next := rd.CAS.New.Clone()
	c.CASResult(true, next)
	c.Tick()
	if c.HasReady() {
		t.Fatalf("a recording CAS led to an election: %+v", c.Ready())
	}
}

// An operator's forced unclean election elects the most complete log among
// the answers, and records every answer's incarnation.
func TestControllerForceUnclean(t *testing.T) {
	s := State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Incarnations: []Incarnation{10, 11, 12}, Version: 7}
	c := newTestController(t, s, 1, 2)
	c.Tick()
	e := fences(t, c)
	ackInc(c, 1, e, -1, 0, 99, 0)
	ackInc(c, 2, e, 3, 40, 12, 0)
	if cas := takeCAS(c, DefaultRoundTicks/4); cas != nil {
		t.Fatalf("CAS %+v before the unclean election was forced", cas)
	}
	c.ForceUnclean()
	cas := takeCAS(c, DefaultRoundTicks)
	if cas == nil || cas.New.Leader != 2 {
		t.Fatalf("forced unclean election: CAS %+v, want leader 2", cas)
	}
	if !slices.Equal(cas.New.Incarnations, []Incarnation{10, 99, 12}) {
		t.Fatalf("incarnations %v, want [10 99 12]", cas.New.Incarnations)
	}
}

// A state without incarnations (written before they existed) counts every
// answer, and the election records the answers' incarnations.
func TestControllerUnknownIncarnationsRecorded(t *testing.T) {
	s := State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Version: 7}
	c := newTestController(t, s, 1, 2)
	c.Tick()
	e := fences(t, c)
	ackInc(c, 1, e, 4, 50, 21, 0)
	ackInc(c, 2, e, 4, 40, 22, 0)
	cas := takeCAS(c, DefaultRoundTicks)
	if cas == nil || cas.New.Leader != 1 {
		t.Fatalf("CAS %+v, want leader 1", cas)
	}
	if !slices.Equal(cas.New.Incarnations, []Incarnation{0, 21, 22}) {
		t.Fatalf("incarnations %v, want [0 21 22]", cas.New.Incarnations)
	}
}
