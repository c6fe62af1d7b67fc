package replica

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/wal"
)

// logStartCluster is three replicas with n0 leading epoch 1 over a log of
// the epoch-start batch and five batches of ten records: [1, 10] ...
// [41, 50], everything committed and copied.
func logStartCluster(t *testing.T) *tcluster {
	c := newCluster(t, 3, bugs{})
	c.elect(1, 0, 0, 1, 2)
	c.settle(3)
	for i := range 5 {
		c.propose(0, 10, Token(i+1), true)
	}
	c.settle(3)
	if st := c.nodes[0].r.Status(); st.HW != 51 || len(st.InSync) != 3 {
		t.Fatalf("setup: HW %d, in sync %v", st.HW, st.InSync)
	}
	return c
}

// answerTo steps a fetch from node from at offset into the leader n0 and
// returns its answer.
func answerTo(t *testing.T, c *tcluster, from NodeID, offset wal.Offset, lastEpoch wal.Epoch, seq uint64) Message {
	t.Helper()
	c.queue = nil
	c.nodes[0].r.Step(Message{Type: MsgFetch, From: from, To: 0, Epoch: 1, Seq: seq, Offset: offset, LastEpoch: lastEpoch, LogStart: offset})
	c.drain(0)
	for _, m := range c.queue {
		if m.Type == MsgFetchResp && m.To == from && m.Seq == seq {
			c.queue = nil
			return m
		}
	}
	c.queue = nil
	t.Fatalf("no answer to the fetch at %d", offset)
	return Message{}
}

// A follower whose fetch offset is below the leader's log start is told
// where it may start, and does not count as in sync however often it asks:
// its durable end can never advance by fetching.
func TestFetchBelowLogStartIsOutOfRange(t *testing.T) {
	c := logStartCluster(t)
	c.crash(1) // n1 is driven by hand below
	leader := c.nodes[0].r
	leader.SetLogStart(25, 21) // DeleteRecords inside the batch [21, 30]
	c.drain(0)

	m := answerTo(t, c, 1, 5, 1, 1000)
	if m.Err != ErrCodeOffsetOutOfRange || m.LogStart != 21 || m.ReadTo > m.ReadFrom {
		t.Fatalf("answer below the log start: err %d, log start %d, range [%d, %d); want out of range at 21",
			m.Err, m.LogStart, m.ReadFrom, m.ReadTo)
	}
	for i := range 15 { // past LagTicks (10), n1 asking every tick
		answerTo(t, c, 1, 5, 1, uint64(1001+i))
		c.settle(1)
	}
	if got := leader.Status().InSync; !slices.Equal(got, []NodeID{0, 2}) {
		t.Fatalf("in sync %v; a follower below the log start must not count", got)
	}
	// Restarted at the base of the batch holding the log start (an empty
	// log: no last epoch), it fetches and is in sync again.
	m = answerTo(t, c, 1, 21, -1, 2000)
	if m.Err != ErrNone || m.ReadFrom != 21 || m.ReadTo != 51 || m.LogStart != 25 {
		t.Fatalf("fetch at the first batch: %+v", m)
	}
	if got := leader.Status().InSync; !slices.Equal(got, []NodeID{0, 1, 2}) {
		t.Fatalf("in sync %v after a fetch at the log start", got)
	}
}

// A low-watermark wait (DeleteRecords) is released once every in-sync
// replica reports a log start at or past it; a follower that leaves the
// in-sync set stops holding it; a leader that steps down fails it.
func TestLowWatermarkWait(t *testing.T) {
	c := logStartCluster(t)
	leader := c.nodes[0]
	leader.r.SetLogStart(25, 21)
	leader.r.WaitLowWatermark(25, 77)
	c.drain(0)
	c.settle(2)
	if hasToken(leader.released, 77) {
		t.Fatal("released before any follower moved its log start")
	}
	c.nodes[1].r.SetLogStart(25, 25)
	c.settle(2)
	if hasToken(leader.released, 77) {
		t.Fatal("released while n2, in sync, still starts at 0")
	}
	if lw := leader.r.LowWatermark(); lw != 0 {
		t.Fatalf("low watermark %d, want 0", lw)
	}
	c.crash(2)
	c.settle(12) // past LagTicks: n2 leaves the in-sync set
	if !hasToken(leader.released, 77) {
		t.Fatalf("not released once n2 left the in-sync set (in sync %v, low watermark %d)",
			leader.r.Status().InSync, leader.r.LowWatermark())
	}

	leader.r.WaitLowWatermark(40, 78)
	c.drain(0)
	c.restart(2)
	c.elect(2, 1, 1, 2)
	c.drain(0)
	i := slices.IndexFunc(leader.failed, func(f TokenErr) bool { return f.Token == 78 })
	if i < 0 || !errors.Is(leader.failed[i].Err, ErrNotLeader) {
		t.Fatalf("wait of a deposed leader: failed %+v", leader.failed)
	}
}
