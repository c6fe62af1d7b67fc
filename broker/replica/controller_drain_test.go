package replica

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// runRound ticks c until it fences, has every replica in acks answer with
// the same log, and returns the CAS it sends (nil if none within the
// round).
func runRound(t *testing.T, c *Controller, acks ...NodeID) *CAS {
	t.Helper()
	var e wal.Epoch
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("no fence round within 200 ticks")
		}
		c.Tick()
		rd := c.Ready()
		if len(rd.Messages) > 0 && rd.Messages[0].Type == MsgFence {
			e = rd.Messages[0].Epoch
			c.Advance()
			break
		}
		c.Advance()
	}
	var cas *CAS
	for _, id := range acks {
		ack(c, id, e, 3, 10)
		if rd := c.Ready(); rd.CAS != nil && cas == nil {
			cas = rd.CAS
		}
		c.Advance()
	}
	for i := 0; cas == nil && i < DefaultRoundTicks; i++ {
		c.Tick()
		if rd := c.Ready(); rd.CAS != nil {
			cas = rd.CAS
		}
		c.Advance()
	}
	return cas
}

// A leader on a draining broker is moved to another replica, the
// preferred one first, and leadership does not come back while it drains.
func TestControllerDrainMovesLeader(t *testing.T) {
	s := State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Version: 7}
	c := newTestController(t, s, 0, 1, 2)
	c.Tick()
	if c.HasReady() {
		t.Fatalf("elects under a live, undrained leader: %+v", c.Ready())
	}
	c.SetDraining([]NodeID{0})
	cas := runRound(t, c, 0, 1, 2)
	if cas == nil || cas.New.Leader == 0 || cas.New.Epoch != 5 {
		t.Fatalf("CAS %+v, want a leader other than the draining n0 at epoch 5", cas)
	}
	c.CASResult(true, cas.New)
	c.SetState(cas.New)
	// The preferred replica (n0) is live but draining: no move back.
	for range 200 {
		c.Tick()
		if c.HasReady() {
			t.Fatalf("moved leadership while n0 drains: %+v", c.Ready())
		}
	}
	// Drained no more: the preferred replica takes its leadership back.
	c.SetDraining(nil)
	c.PreferNow()
	cas = runRound(t, c, 0, 1, 2)
	if cas == nil || cas.New.Leader != 0 {
		t.Fatalf("CAS %+v, want the preferred n0 back", cas)
	}
}

// A draining replica still wins when no other can (the others' logs are
// behind a quorum, or they are not live): a drain never leaves a partition
// leaderless, and never elects a replica the quorum rule refuses.
func TestControllerDrainNeverLeavesLeaderless(t *testing.T) {
	s := State{Epoch: 4, Leader: NoLeader, Replicas: []NodeID{0, 1, 2}, Version: 7}
	c := newTestController(t, s, 0, 1, 2)
	c.SetDraining([]NodeID{0})
	c.Tick()
	e := fences(t, c)
	ack(c, 0, e, 3, 20) // only the draining n0 holds the committed tail
	ack(c, 1, e, 3, 10)
	ack(c, 2, e, 2, 30)
	var cas *CAS
	for i := 0; cas == nil && i < DefaultRoundTicks; i++ {
		if rd := c.Ready(); rd.CAS != nil {
			cas = rd.CAS
		}
		c.Advance()
		c.Tick()
	}
	// n1 is eligible too (its log is at least n2's), and not draining.
	if cas == nil || cas.New.Leader != 1 {
		t.Fatalf("CAS %+v, want n1 (eligible, not draining)", cas)
	}

	// Every replica draining: the most complete log still wins.
	c = newTestController(t, s, 0, 1, 2)
	c.SetDraining([]NodeID{0, 1, 2})
	cas = runRound(t, c, 0, 1, 2)
	if cas == nil || cas.New.Leader == NoLeader {
		t.Fatalf("CAS %+v: every replica draining left no leader", cas)
	}

	// The others not live: the draining leader stays, and no round
	// fences it again and again.
	s = State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Version: 7}
	c = newTestController(t, s, 0)
	c.SetDraining([]NodeID{0})
	for range 100 {
		c.Tick()
		if rd := c.Ready(); len(rd.Messages) > 0 {
			t.Fatalf("fenced the only live replica for a drain: %+v", rd)
		}
	}
}

// A draining leader that keeps winning (the only eligible replica) is not
// fenced every tick: the tries back off.
func TestControllerDrainBacksOff(t *testing.T) {
	s := State{Epoch: 4, Leader: 0, Replicas: []NodeID{0, 1, 2}, Version: 7}
	c := newTestController(t, s, 0, 1, 2)
	c.SetDraining([]NodeID{0})
	rounds := 0
	for range 400 {
		c.Tick()
		rd := c.Ready()
		c.Advance()
		if len(rd.Messages) == 0 || rd.Messages[0].Type != MsgFence || rd.Messages[0].To != 0 {
			continue
		}
		rounds++
		e := rd.Messages[0].Epoch
		// n1 is behind n0, and n2 does not answer: only n0 is
		// eligible.
		ack(c, 0, e, 3, 20)
		ack(c, 1, e, 2, 5)
		for i := 0; i < DefaultRoundTicks; i++ {
			if rd := c.Ready(); rd.CAS != nil {
				c.Advance()
				c.CASResult(true, rd.CAS.New)
				c.SetState(rd.CAS.New)
				break
			}
			c.Advance()
			c.Tick()
		}
	}
	t.Logf("%d rounds in 400 ticks", rounds)
	if c.state.Leader != 0 {
		t.Fatalf("leader n%d, want n0 (the only eligible replica)", c.state.Leader)
	}
	if rounds < 2 || rounds > 12 {
		t.Fatalf("%d rounds in 400 ticks to move a leader nobody can replace; want a few, backing off", rounds)
	}
}
