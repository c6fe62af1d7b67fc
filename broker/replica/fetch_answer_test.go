package replica

// The follower's reading of its leader's answers: an answer the leader's
// core did not judge moves nothing, and a leader whose epoch chain was
// trimmed names the follower's own epoch when it tells it to diverge.

import (
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

func testConfig(id NodeID) Config {
	return Config{ID: id, LagTicks: 10, FetchWaitTicks: 3, RetryTicks: 1, UnreachableTicks: 10}
}

// epochBatches is count one-record batches of epoch e from base.
func epochBatches(base wal.Offset, count int, e wal.Epoch) []Batch {
	var l []Batch
	for i := range count {
		o := base + wal.Offset(i)
		l = append(l, Batch{Base: o, Last: o, Epoch: e, Data: []byte{byte(o)}})
	}
	return l
}

// takeFetch returns the fetch in r's Ready (failing the test without one)
// and advances it.
func takeFetch(t *testing.T, r *Replica) Message {
	t.Helper()
	rd := r.Ready()
	r.Advance()
	for _, m := range rd.Messages {
		if m.Type == MsgFetch {
			return m
		}
	}
	t.Fatalf("no fetch in %+v", rd.Messages)
	return Message{}
}

// A follower whose tail [5,10) is of a deposed epoch gets, for its fetch,
// an answer its leader's core never judged (the leader answered a
// multi-partition fetch before this partition's core stepped it). Even if
// it carries the leader's HW, the follower takes nothing from it: its HW
// stays, it truncates nothing, and it asks again at once.
func TestUnjudgedAnswerMovesNothing(t *testing.T) {
	f := New(testConfig(1), HardState{Fenced: 2}, []EpochEntry{{Epoch: 1, Start: 0}}, 10, 3)
	f.SetState(State{Epoch: 2, Leader: 0, Replicas: []NodeID{0, 1, 2}, Version: 1})
	fetch := takeFetch(t, f)
	f.Step(Message{
		Type: MsgFetchResp, From: 0, To: 1, Epoch: fetch.Epoch, Seq: fetch.Seq,
		Offset: fetch.Offset, LastEpoch: fetch.LastEpoch, Unjudged: true,
		HW: 8, ReadFrom: fetch.Offset, ReadTo: fetch.Offset,
	})
	if st := f.Status(); st.HW != 3 || st.End != 10 {
		t.Fatalf("after an unjudged answer: HW %d end %d, want HW 3 (over no unjudged tail) end 10", st.HW, st.End)
	}
	again := takeFetch(t, f) // at once: no tick, no back-off
	if again.Offset != 10 || again.Seq == fetch.Seq {
		t.Fatalf("refetch %+v after %+v", again, fetch)
	}
	// The leader's core then judges the fetch: the tail diverges at 5.
	f.Step(Message{
		Type: MsgFetchResp, From: 0, To: 1, Epoch: again.Epoch, Seq: again.Seq,
		Offset: again.Offset, LastEpoch: again.LastEpoch, HW: 8,
		Diverging: true, DivergingEpoch: 1, DivergingEnd: 5,
	})
	if rd := f.Ready(); rd.Truncate != 5 {
		t.Fatalf("truncate %d after the leader's judgement, want 5", rd.Truncate)
	}
	if st := f.Status(); st.HW != 3 {
		t.Fatalf("HW %d after a diverging answer, want 3", st.HW)
	}
}

// The leader's log starts at 100 with epoch 3 (older epochs trimmed); its
// follower's log is [0,150) of epoch 1. The leader tells it to diverge at
// (1, 100), the follower's own epoch, not (-1, 100) (which the broker's
// wire reads as no divergence at all); the follower truncates to 100, not
// to its log start, and then copies the leader's log.
func TestTrimmedChainAnswersFollowersEpoch(t *testing.T) {
	c := newCluster(t, 3, bugs{})
	lead := append(epochBatches(100, 10, 3), epochBatches(110, 10, 3)...)
	c.nodes[0].r = New(testConfig(0), HardState{Fenced: 3}, chainOf(lead), 120, 100)
	c.nodes[0].log, c.nodes[0].hs = lead, HardState{Fenced: 3}
	fol := epochBatches(0, 150, 1)
	c.nodes[1].r = New(testConfig(1), HardState{Fenced: 1}, chainOf(fol), 150, 90)
	c.nodes[1].log, c.nodes[1].hs = fol, HardState{Fenced: 1}
	c.nodes[2].down = true
	c.elect(4, 0, 0, 1)

	if len(c.queue) != 1 || c.queue[0].Type != MsgFetch {
		t.Fatalf("queue %+v: want n1's fetch", c.queue)
	}
	c.deliverN(1) // n0 answers
	if len(c.queue) != 1 {
		t.Fatalf("queue %+v: want n0's answer", c.queue)
	}
	ans := c.queue[0]
	if !ans.Diverging || ans.DivergingEpoch != 1 || ans.DivergingEnd != 100 {
		t.Fatalf("leader answers diverging=%v (%d,%d), want (1,100)", ans.Diverging, ans.DivergingEpoch, ans.DivergingEnd)
	}
	c.deliverN(1) // n1 truncates
	if end := c.nodes[1].end(); end != 100 {
		t.Fatalf("n1 truncated to %d, want 100", end)
	}
	c.settle(5)
	l0, l1 := c.nodes[0], c.nodes[1]
	if l1.end() != l0.end() || l1.r.Status().HW != l0.end() {
		t.Fatalf("n1 end %d HW %d, leader end %d", l1.end(), l1.r.Status().HW, l0.end())
	}
}
