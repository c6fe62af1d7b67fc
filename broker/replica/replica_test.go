package replica

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// Raft's Figure 8: a record of an old epoch that a later leader copies to a
// quorum is not committed until that leader's own epoch-start batch is on
// the quorum; otherwise a leader elected next may erase it.
func TestFigure8(t *testing.T) {
	for _, tc := range []struct {
		name string
		bugs bugs
	}{{"rule", bugs{}}, {"planted-bug", bugs{hwIgnoresEpochStart: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, tc.bugs)
			c.elect(1, 0, 0, 1, 2)
			c.settle(3)
			c.propose(0, 1, 1, true)
			c.settle(3) // A at offset 1 committed everywhere
			if hw := c.nodes[0].r.Status().HW; hw != 2 {
				t.Fatalf("HW %d after A, want 2", hw)
			}
			// n1 and n2 go away; n0 writes B at 2 alone.
			c.crash(1)
			c.crash(2)
			bBase := c.propose(0, 1, 2, true)
			c.crash(0)
			// Epoch 2: n2 leads with n1's vote; its start batch lands at 2.
			c.restart(1)
			c.restart(2)
			c.elect(2, 2, 1, 2)
			c.crash(1) // before n1 fetches anything of epoch 2
			c.crash(2)
			// Epoch 3: n0 leads with n1's vote ((1,3) >= (1,2)).
			c.restart(0)
			c.restart(1)
			c.budget = 1
			c.elect(3, 0, 0, 1)
			// n1 fetches at 2, gets B, fetches at 3: B is on a quorum, the
			// start batch of epoch 3 (at 3) only on n0.
			c.deliverN(3)
			b := c.nodes[1].log
			if len(b) < 3 || b[2].Base != bBase {
				t.Fatalf("n1 did not copy B: %+v", b)
			}
			hw := c.nodes[0].r.Status().HW
			if tc.bugs.hwIgnoresEpochStart {
				if hw <= bBase {
					t.Fatalf("planted bug: HW %d does not cover B at %d", hw, bBase)
				}
			} else if hw > bBase {
				t.Fatalf("HW %d covers B at %d (epoch 1) before epoch 3's start is on a quorum", hw, bBase)
			}
			// n0 dies before more; epoch 4: n2 ((2,3)) beats n1 ((1,3)) and
			// n1 truncates B.
			c.crash(0)
			c.queue = nil
			c.restart(2)
			c.elect(4, 2, 1, 2)
			c.settle(3)
			l := c.nodes[1].log
			if l[2].Epoch != 2 {
				t.Fatalf("n1 log %+v: want epoch 2's start at 2", l)
			}
			// B is gone from every live log. Under the rule it was never
			// committed; with the planted bug it was, and is now lost.
			if tc.bugs.hwIgnoresEpochStart {
				t.Logf("planted bug: B at %d was committed (HW %d) and is now erased", bBase, hw)
			}
		})
	}
}

// A fence is answered only once it is durable; a restarted replica answers
// a repeated fence at once and refuses a lower one.
func TestFenceAnsweredAfterDurable(t *testing.T) {
	c := newCluster(t, 1, bugs{})
	c.autoSync = false
	n := c.nodes[0]
	n.r.Step(Message{Type: MsgFence, From: ControllerNode, To: 0, Epoch: 5})
	c.drain(0)
	if len(c.toCtrl) != 0 {
		t.Fatalf("answered before the fence was durable: %+v", c.toCtrl)
	}
	if n.hsWanted == nil || n.hsWanted.Fenced != 5 {
		t.Fatalf("hard state asked %+v, want Fenced 5", n.hsWanted)
	}
	c.syncHS(0)
	c.drain(0)
	if len(c.toCtrl) != 1 || c.toCtrl[0].Type != MsgFenceAck || c.toCtrl[0].Epoch != 5 || c.toCtrl[0].Offset != 0 || c.toCtrl[0].LastEpoch != -1 {
		t.Fatalf("answer %+v", c.toCtrl)
	}
	c.toCtrl = nil
	c.restart(0)
	if got := n.r.Status().Fenced; got != 5 {
		t.Fatalf("restarted fenced at %d, want 5", got)
	}
	n.r.Step(Message{Type: MsgFence, From: ControllerNode, To: 0, Epoch: 5})
	n.r.Step(Message{Type: MsgFence, From: ControllerNode, To: 0, Epoch: 4})
	c.drain(0)
	if len(c.toCtrl) != 2 || c.toCtrl[0].Err != ErrNone || c.toCtrl[1].Err != ErrCodeFencedLeaderEpoch || c.toCtrl[1].Epoch != 5 {
		t.Fatalf("answers %+v", c.toCtrl)
	}
}

// A follower whose tail diverges truncates to where the leader's log
// agrees (KIP-595), then copies the leader's log.
func TestDivergenceTruncation(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(3)
	c.propose(0, 2, 1, true)
	c.settle(3)
	c.crash(1)
	c.crash(2)
	c.propose(0, 3, 2, false) // only on n0: epoch 1 at [3,6)
	c.crash(0)
	c.restart(1)
	c.restart(2)
	c.elect(2, 1, 1, 2)
	c.settle(3)
	c.propose(1, 1, 3, true) // epoch 2 at 4
	c.settle(3)
	c.restart(0)
	c.settle(5)
	want := c.nodes[1].log
	got := c.nodes[0].log
	if len(got) != len(want) {
		t.Fatalf("n0 log %+v, leader %+v", got, want)
	}
	for i := range got {
		if !sameBatch(got[i], want[i]) {
			t.Fatalf("n0 batch %d %+v, leader %+v", i, got[i], want[i])
		}
	}
	if e, end := c.nodes[0].r.EndOffsetForEpoch(1); e != 1 || end != 3 {
		t.Fatalf("EndOffsetForEpoch(1) = (%d,%d), want (1,3)", e, end)
	}
}

// Propose refuses a write that cannot be committed.
func TestNotEnoughReplicas(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	// A new leader counts its followers in sync for LagTicks, as Kafka
	// starts a leader with the whole ISR.
	if _, err := c.nodes[0].r.Propose(1, nil); err != nil {
		t.Fatalf("at the start of the epoch: %v", err)
	}
	c.settle(2)
	if _, err := c.nodes[0].r.Propose(1, nil); err != nil {
		t.Fatalf("with followers: %v", err)
	}
	c.crash(1)
	c.crash(2)
	for range 12 {
		c.nodes[0].r.Tick()
	}
	if _, err := c.nodes[0].r.Propose(1, nil); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("followers gone: %v, want ErrNotEnoughReplicas", err)
	}
	if _, err := c.nodes[1].r.Propose(1, nil); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower: %v, want ErrNotLeader", err)
	}
	if st := c.nodes[0].r.Status(); len(st.InSync) != 1 {
		t.Fatalf("in sync %v", st.InSync)
	}
}

// acks=1 is released at the leader's durable end, acks=all at the HW; a
// follower's HW is min(leader HW, its durable, matched) and never falls.
func TestAcksAndFollowerHW(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(2)
	c.autoSync = false
	l := c.nodes[0]
	base := l.r.Propose
	b, err := base(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.r.Wait(b+2, 10, false)
	l.r.Wait(b+2, 11, true)
	c.drain(0)
	if len(l.released) != 0 {
		t.Fatalf("released %v before anything is durable", l.released)
	}
	l.r.Durable(l.end())
	c.drain(0)
	if !hasToken(l.released, 10) || hasToken(l.released, 11) {
		t.Fatalf("after the leader's fsync released %v, want only the acks=1 token", l.released)
	}
	c.deliver()
	// n1 appended but has not synced: its fetch is not sent, HW stays.
	if st := l.r.Status(); st.HW != b {
		t.Fatalf("HW %d before a follower synced, want %d", st.HW, b)
	}
	c.nodes[1].r.Durable(c.nodes[1].end())
	c.drain(1)
	c.deliver()
	if !hasToken(l.released, 11) || l.r.Status().HW != b+2 {
		t.Fatalf("HW %d released %v after n1's fsync", l.r.Status().HW, l.released)
	}
	f := c.nodes[1].r.Status()
	if f.HW != b+2 {
		t.Fatalf("follower HW %d, want %d", f.HW, b+2)
	}
	// n2 is behind: its HW is bounded by its own durable end.
	if st := c.nodes[2].r.Status(); st.HW > c.nodes[2].r.durable {
		t.Fatalf("n2 HW %d above its durable end %d", st.HW, c.nodes[2].r.durable)
	}
}

// A leader that loses its epoch fails its parked replies with ErrNotLeader.
func TestStepDownFailsParked(t *testing.T) {
	for _, how := range []string{"fence", "state"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t, 3, bugs{})
			c.elect(1, 0, 0, 1, 2)
			c.settle(2)
			c.crash(1)
			c.crash(2)
			c.propose(0, 1, 7, true)
			l := c.nodes[0]
			switch how {
			case "fence":
				l.r.Step(Message{Type: MsgFence, From: ControllerNode, To: 0, Epoch: 2})
			case "state":
				c.state.Epoch, c.state.Leader, c.state.Version = 2, 1, c.state.Version+1
				l.r.SetState(c.state)
			}
			c.drain(0)
			if len(l.failed) != 1 || l.failed[0].Token != 7 || !errors.Is(l.failed[0].Err, ErrNotLeader) {
				t.Fatalf("failed %+v, want token 7 with ErrNotLeader", l.failed)
			}
			if st := l.r.Status(); st.Role == RoleLeader {
				t.Fatalf("still leader")
			}
			l.r.Wait(2, 8, true)
			c.drain(0)
			if len(l.failed) != 2 || !errors.Is(l.failed[1].Err, ErrNotLeader) {
				t.Fatalf("wait on a former leader: %+v", l.failed)
			}
		})
	}
}

// Storage failure is sticky and fails parked replies.
func TestFail(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(2)
	c.crash(1)
	c.crash(2)
	c.propose(0, 1, 3, true)
	l := c.nodes[0]
	l.r.Fail(errors.New("disk on fire"))
	c.drain(0)
	if len(l.failed) != 1 || l.failed[0].Token != 3 {
		t.Fatalf("failed %+v", l.failed)
	}
	if _, err := l.r.Propose(1, nil); err == nil {
		t.Fatal("propose after a storage failure")
	}
}

// A restarted leader does not lead the epoch it recovered with; it resigns.
func TestRestartedLeaderResigns(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(2)
	c.crash(0)
	c.toCtrl = nil
	c.restart(0)
	if st := c.nodes[0].r.Status(); st.Role != RoleNone {
		t.Fatalf("restarted leader is %s", st.Role)
	}
	if len(c.toCtrl) != 1 || c.toCtrl[0].Type != MsgLeaderUnreachable || c.toCtrl[0].Epoch != 1 || c.toCtrl[0].From != 0 {
		t.Fatalf("to controller %+v", c.toCtrl)
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	c := []EpochEntry{{1, 0}, {3, 5}, {4, 9}}
	for _, tc := range []struct {
		e       wal.Epoch
		wantE   wal.Epoch
		wantEnd wal.Offset
	}{{0, 0, 0}, {1, 1, 5}, {2, 1, 5}, {3, 3, 9}, {4, 4, 12}, {9, 4, 12}} {
		if e, end := endOffsetForEpoch(c, 12, tc.e); e != tc.wantE || end != tc.wantEnd {
			t.Errorf("endOffsetForEpoch(%d) = (%d,%d), want (%d,%d)", tc.e, e, end, tc.wantE, tc.wantEnd)
		}
	}
	// An epoch older than the chain, or an empty chain, is answered with
	// itself (never -1, which reads as "no divergence" on the wire).
	if e, end := endOffsetForEpoch(nil, 7, 3); e != 3 || end != 7 {
		t.Errorf("empty chain: (%d,%d)", e, end)
	}
}

// A follower whose fetch the leader parked after the high watermark moved
// learns the new high watermark only when that fetch is answered. The
// driver answers its requests at their MaxWait, which may come before the
// core's own deadline for the park; ExpireFetch lets it have the core answer
// then, with the high watermark, instead of leaving the fetch held for an
// answer no one would read (the chaos run leader-kill, seed 3).
func TestExpireFetchAnswersTheHeldFetch(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(10)
	l, f2 := c.nodes[0], c.nodes[2]
	base := c.propose(0, 1, 7, true)
	// Both followers get the record; n1's next fetch moves the HW and is
	// answered with it; n2's arrives after and is held with the new HW.
	c.deliver()
	if !hasToken(l.released, 7) {
		t.Fatalf("the acks=all record is not acknowledged: released %v", l.released)
	}
	if hw := l.r.Status().HW; hw != base+1 {
		t.Fatalf("leader HW %d, want %d", hw, base+1)
	}
	if got := c.nodes[1].r.Status().HW; got != base+1 {
		t.Fatalf("n1 HW %d, want %d", got, base+1)
	}
	if got := f2.r.Status().HW; got != base {
		t.Fatalf("n2 HW %d: the scenario needs n2's fetch held with the HW it has not seen (%d)", got, base)
	}
	if p := l.r.peer(2); p == nil || !p.parked || p.parkSeq != f2.r.fetchSeq {
		t.Fatalf("n2's fetch %d is not held: %+v", f2.r.fetchSeq, p)
	}
	// Another fetch's number changes nothing.
	l.r.ExpireFetch(2, f2.r.fetchSeq-1)
	if l.r.HasReady() {
		t.Fatalf("ExpireFetch of a fetch not held answered: %+v", l.r.Ready())
	}
	l.r.ExpireFetch(2, f2.r.fetchSeq)
	c.drain(0)
	c.deliverN(1)
	if got := f2.r.Status().HW; got != base+1 {
		t.Fatalf("n2 HW %d after its held fetch was expired, want %d", got, base+1)
	}
}

// With MinISR above a majority (min.insync.replicas=3 of 3), a leader
// elected after losing one replica serves every record a majority holds:
// its high watermark needs a quorum, as elections do. Acks=all replies
// still wait for MinISR durable copies. The old rule held the high
// watermark to MinISR too, so a record acknowledged on all three, whose
// high watermark the survivors had not heard before the leader died, could
// not be read until the lost replica came back.
func TestMinISRAboveQuorumServesWhatAQuorumHolds(t *testing.T) {
	c := newElectedMinISR3(t)
	l := c.nodes[0]
	b := c.propose(0, 1, 1, true)
	end := b + 1
	// Deliver one message at a time until the leader acknowledges the
	// record (all three hold it) and stop it there: the answer to the
	// fetch that completed the acknowledgement is lost with it, so that
	// follower has not heard a high watermark past the record.
	for i := 0; !hasToken(l.released, 1); i++ {
		if i > 100 || len(c.queue) == 0 {
			t.Fatalf("acks=all record never released (leader HW %d)", l.r.Status().HW)
		}
		c.deliverN(1)
	}
	c.crash(0)
	next, other := -1, -1
	for _, i := range []int{1, 2} {
		st := c.nodes[i].r.Status()
		if st.Durable < end {
			t.Fatalf("n%d durable %d: the acknowledged record at %d is not on its disk", i, st.Durable, b)
		}
		if st.HW < end && next < 0 {
			next = i
		} else {
			other = i
		}
	}
	if next < 0 {
		t.Fatal("precondition: both followers heard the high watermark past the record")
	}
	c.elect(2, next, 1, 2)
	c.settle(3)
	nl := c.nodes[next]
	if st := nl.r.Status(); st.HW < end || st.HW != nl.end() {
		t.Fatalf("new leader n%d's HW %d with n%d caught up (log end %d): the acknowledged record at %d is unreadable", next, st.HW, other, nl.end(), b)
	}
	if st := c.nodes[other].r.Status(); st.HW < end {
		t.Fatalf("follower n%d HW %d, want past %d", other, st.HW, b)
	}

	// A write of the new epoch is readable once a majority holds it, and
	// its acks=all reply waits for the third copy.
	b2 := c.propose(next, 1, 2, true)
	c.settle(3)
	if st := nl.r.Status(); st.HW != b2+1 {
		t.Fatalf("HW %d, want %d: n%d holds the write", st.HW, b2+1, other)
	}
	if hasToken(nl.released, 2) {
		t.Fatalf("acks=all released with 2 of MinISR 3 copies: %v", nl.released)
	}
	c.restart(0)
	c.settle(5)
	if !hasToken(nl.released, 2) {
		t.Fatalf("acks=all not released after n0 caught up: released %v, n0 end %d", nl.released, c.nodes[0].end())
	}
}

// A lone replica that recovered its log with the high watermark at its end
// (a broker that lost its local log restarts at the remote end) leads
// without an epoch-start batch; an idempotent retry of a batch it holds
// waits for that batch's end under acks=all and is answered at once. With
// the acknowledgement point kept apart from the high watermark for every
// MinISR, it waited for a write that never came (CI:
// TestTieringProducerStateSurvivesLocalLoss, REQUEST_TIMED_OUT).
func TestLoneLeaderAnswersARetryOfItsRecoveredLog(t *testing.T) {
	cfg := Config{ID: 0, LagTicks: 10, FetchWaitTicks: 3, RetryTicks: 1, UnreachableTicks: 10, ElideEpochStart: true}
	r := New(cfg, HardState{Fenced: 1}, []EpochEntry{{Epoch: 1, Start: 0}}, 40, 40)
	r.SetState(State{Epoch: 2, Leader: 0, Replicas: []NodeID{0}, Version: 1})
	r.Step(Message{Type: MsgFence, From: ControllerNode, To: 0, Epoch: 2})
	for range 3 {
		rd := r.Ready()
		r.Advance()
		if rd.HardState != nil {
			r.HardStateDurable(*rd.HardState)
		}
	}
	r.SetState(State{Epoch: 2, Leader: 0, Replicas: []NodeID{0}, Version: 2})
	r.Ready()
	r.Advance()
	if st := r.Status(); st.Role != RoleLeader || st.HW != 40 {
		t.Fatalf("status %+v, want leader of epoch 2 at HW 40", st)
	}
	r.Wait(40, 7, true)
	if rd := r.Ready(); !hasToken(rd.Released, 7) {
		t.Fatalf("acks=all retry of offsets below the recovered HW not released: %+v", rd)
	}
}

// Lowering MinISR to a majority releases, at once, an acks=all reply that
// waited for a third copy the high watermark already passed.
func TestLoweringMinISRReleasesWhatAMajorityHolds(t *testing.T) {
	c := newElectedMinISR3(t)
	c.crash(2)
	l := c.nodes[0]
	b := c.propose(0, 1, 9, true)
	c.settle(3)
	if st := l.r.Status(); st.HW != b+1 || hasToken(l.released, 9) {
		t.Fatalf("HW %d released %v: want HW %d and the reply held for a third copy", st.HW, l.released, b+1)
	}
	l.r.SetMinISR(2)
	c.drain(0)
	if !hasToken(l.released, 9) {
		t.Fatalf("after lowering MinISR to 2, released %v", l.released)
	}
}

// newElectedMinISR3 is three replicas with MinISR 3, n0 leading epoch 1.
func newElectedMinISR3(t *testing.T) *tcluster {
	c := newCluster(t, 3, bugs{})
	for _, n := range c.nodes {
		n.r.SetMinISR(3)
	}
	c.elect(1, 0, 0, 1, 2)
	c.settle(3)
	return c
}
