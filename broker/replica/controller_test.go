package replica

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

func newTestController(t *testing.T, s State, live ...NodeID) *Controller {
	t.Helper()
	c := NewController(ControllerConfig{RetryTicks: 1, RoundTicks: 10, ComplaintTicks: 10, PreferredTicks: 20})
	c.SetState(s)
	c.SetLive(live)
	return c
}

// fences takes the fence round the controller started and its epoch.
func fences(t *testing.T, c *Controller) wal.Epoch {
	t.Helper()
	rd := c.Ready()
	c.Advance()
	if len(rd.Messages) == 0 || rd.Messages[0].Type != MsgFence {
		t.Fatalf("no fence round: %+v", rd)
	}
	return rd.Messages[0].Epoch
}

func ack(c *Controller, from NodeID, e, last wal.Epoch, end wal.Offset) {
	c.Step(Message{Type: MsgFenceAck, From: from, To: ControllerNode, Epoch: e, LastEpoch: last, Offset: end})
}

// The winner is the preferred replica when it is up to date with quorum-1
// others, else the greatest log; never one behind a quorum.
func TestControllerPicksUpToDate(t *testing.T) {
	base := State{Epoch: 4, Leader: NoLeader, Replicas: []NodeID{0, 1, 2}, Version: 7}
	type a struct {
		from NodeID
		last wal.Epoch
		end  wal.Offset
	}
	for _, tc := range []struct {
		name string
		acks []a
		want NodeID // NoLeader: no CAS yet
	}{
		{"preferred equal", []a{{0, 3, 10}, {1, 3, 10}}, 0},
		{"preferred behind", []a{{0, 3, 9}, {1, 3, 10}}, 1},
		{"higher epoch beats longer log", []a{{1, 2, 50}, {2, 3, 10}}, 2},
		{"preferred up to date with one other", []a{{0, 3, 10}, {2, 3, 8}, {1, 4, 12}}, 0},
		{"first quorum decides", []a{{1, 4, 12}, {0, 3, 10}, {2, 3, 8}}, 1},
		{"one ack is no quorum", []a{{2, 3, 10}}, NoLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestController(t, base, 0, 1, 2)
			c.Tick()
			e := fences(t, c)
			if e != 5 {
				t.Fatalf("round epoch %d, want 5", e)
			}
			var cas *CAS
			for _, x := range tc.acks {
				ack(c, x.from, e, x.last, x.end)
				if rd := c.Ready(); rd.CAS != nil && cas == nil {
					cas = rd.CAS
				}
				c.Advance()
			}
			// A live preferred replica that has not answered is waited
			// for a quarter of the round.
			for i := 0; cas == nil && tc.want != NoLeader && i <= DefaultRoundTicks/4; i++ {
				c.Tick()
				if rd := c.Ready(); rd.CAS != nil {
					cas = rd.CAS
				}
				c.Advance()
			}
			switch {
			case tc.want == NoLeader && cas != nil:
				t.Fatalf("CAS %+v without a quorum", cas)
			case tc.want == NoLeader:
			case cas == nil:
				t.Fatalf("no CAS, want n%d", tc.want)
			case cas.New.Leader != tc.want || cas.New.Epoch != 5 || cas.Expect != 7 || cas.New.Version != 8:
				t.Fatalf("CAS %+v, want leader n%d epoch 5 at version 7", cas, tc.want)
			}
		})
	}
}

// A dead leader is replaced; an unanswered CAS leads to a new round at a
// greater epoch; a refused fence raises the next epoch.
func TestControllerFailover(t *testing.T) {
	s := State{Epoch: 2, Leader: 1, Replicas: []NodeID{0, 1, 2}, Version: 3}
	c := newTestController(t, s, 0, 1, 2)
	c.Tick()
	if c.HasReady() {
		t.Fatalf("elects under a live leader: %+v", c.Ready())
	}
	c.SetLive([]NodeID{0, 2})
	c.Tick()
	e := fences(t, c)
	if e != 3 {
		t.Fatalf("epoch %d", e)
	}
	ack(c, 2, e, 2, 5)
	c.Step(Message{Type: MsgFenceAck, From: 0, Epoch: 9, Err: ErrCodeFencedLeaderEpoch})
	c.Advance()
	// The round is abandoned: the next starts above 9.
	for range 3 {
		c.Tick()
	}
	if e := fences(t, c); e != 10 {
		t.Fatalf("epoch after a refusal at 9: %d, want 10", e)
	}
	ack(c, 0, 10, 2, 5)
	ack(c, 2, 10, 2, 5)
	rd := c.Ready()
	c.Advance()
	if rd.CAS == nil || rd.CAS.New.Leader != 0 || rd.CAS.New.Epoch != 10 {
		t.Fatalf("CAS %+v", rd.CAS)
	}
	// The answer is lost; after the round time a new round starts.
	for range 12 {
		c.Tick()
	}
	if e := fences(t, c); e != 11 {
		t.Fatalf("epoch after a lost CAS answer: %d, want 11", e)
	}
	// The state arrives (the lost CAS had applied): the round stops.
	next := s.Clone()
	next.Epoch, next.Leader, next.Version = 10, 0, 4
	c.SetState(next)
	_, electing, _ := c.Status()
	if electing {
		t.Fatal("still electing after the state moved")
	}
}

// Complaints from more than n-quorum followers start a round that does not
// elect the complained-of leader unless nobody else can win.
func TestControllerComplaints(t *testing.T) {
	s := State{Epoch: 2, Leader: 1, Replicas: []NodeID{0, 1, 2}, Version: 3}
	c := newTestController(t, s, 0, 1, 2)
	c.Step(Message{Type: MsgLeaderUnreachable, From: 0, Epoch: 2})
	if c.HasReady() {
		t.Fatal("one follower's complaint elects")
	}
	c.Step(Message{Type: MsgLeaderUnreachable, From: 2, Epoch: 1})
	if c.HasReady() {
		t.Fatal("a complaint about an old epoch counts")
	}
	c.Step(Message{Type: MsgLeaderUnreachable, From: 2, Epoch: 2})
	e := fences(t, c)
	ack(c, 1, e, 2, 9) // the complained-of leader has the longest log
	ack(c, 2, e, 2, 7)
	if c.Ready().CAS != nil {
		t.Fatal("elected the excluded leader early")
	}
	for range 5 {
		c.Tick()
	}
	rd := c.Ready()
	c.Advance()
	if rd.CAS == nil || rd.CAS.New.Leader != 1 {
		t.Fatalf("half a round on, the excluded leader is the only safe choice: CAS %+v", rd.CAS)
	}
}
