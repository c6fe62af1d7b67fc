package replica

// The simulator's retention and the follower that stays away longer than
// it. A leader's log start moves forward at random, as the broker's
// retention deletes whole segments below what is committed, and the driver
// tells the core (SetLogStart) as the broker's partition does. A follower
// learns its leader's log start from clean fetch answers and moves its own
// up to its HW (the broker's FollowLogStart). A follower may be paused or
// cut off long enough for its leader's log start to pass its log end; its
// next fetch is then answered OFFSET_OUT_OF_RANGE with where it may start,
// and the driver empties its log and restarts it there, as the broker's
// restartAtLeaderStart does (wal.TruncateFullyAndStartAt), on the sim disk.
//
// Invariant: a log start moves only forward, only to a batch boundary at
// or below its replica's HW, and never past the base of the log's last
// batch (Kafka never deletes the active segment): deleting a batch is
// durable at once (its segment file is gone).
// Invariant: a replica restarts at its leader's log start only when its
// log ends below it, and that start is at most the committed watermark, so
// the records it drops are committed ones retention deleted; nothing
// committed is lost above a log start (the checker's holdsCommitted).
// Invariant: the retention subsystem draws only from its own source, so no
// other subsystem's draws move.

import (
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// retention is the subsystem's per-seed state.
type retention struct {
	r *rand.Rand
	// rate: chance per node and tick that a leader deletes old batches;
	// absence: chance per tick that a follower goes away for a long time.
	rate, absence float64
	restarts      int // followers restarted at their leader's log start
}

// initRetention draws the rates (either may be off for a seed) and starts
// a retention loop per node and the absence fault.
func (s *sim) initRetention(r *rand.Rand) {
	rt := &s.ret
	rt.r = r
	if r.IntN(3) > 0 {
		rt.rate = 0.02 + r.Float64()*0.2
	}
	if r.IntN(3) > 0 {
		rt.absence = r.Float64() * 0.02
	}
	for i := range s.nodes {
		n := s.nodes[i]
		s.every(tickUnits, int64(i)+1, "retention", i, func() { s.retain(n) })
	}
	s.every(tickUnits, 6, "absence", -1, s.absent)
}

// retain: a running leader deletes whole batches below its HW, and tells
// its core the new start.
func (s *sim) retain(n *simNode) {
	rt := &s.ret
	if s.live || rt.rate == 0 || rt.r.Float64() >= rt.rate || !n.up || s.paused(n.pausedUntil) {
		return
	}
	st := n.r.Status()
	if st.Role != RoleLeader || st.Err != nil {
		return
	}
	d := &n.disk
	// Batch boundaries a start may move to: ends of synced batches at or
	// below the HW, short of the log's last batch.
	var cands []wal.Offset
	l := d.log()
	for i := 0; i+1 < len(l) && l[i].End() <= st.HW && i < len(d.synced); i++ {
		cands = append(cands, l[i].End())
	}
	if len(cands) == 0 {
		return
	}
	to := cands[rt.r.IntN(len(cands))]
	if to <= d.start {
		return
	}
	d.advanceStart(to)
	s.tracef("n%d retention: log start %d", n.id, to)
	n.r.SetLogStart(to, to)
	s.drain(n)
}

// absent: a follower of the register's leader goes away (paused, or cut
// off from everyone) for long enough that retention may pass its log end.
func (s *sim) absent() {
	rt := &s.ret
	if s.live || rt.absence == 0 || rt.r.Float64() >= rt.absence {
		return
	}
	leader := s.reg.state.Leader
	id := NodeID(rt.r.IntN(nReplicas))
	if id == leader {
		id = (id + 1) % nReplicas
	}
	n := s.nodes[id]
	d := 40*tickUnits + rt.r.Int64N(100*tickUnits)
	if rt.r.IntN(2) == 0 {
		n.pausedUntil = max(n.pausedUntil, s.now+d)
		s.tracef("n%d away (paused) until %d", n.id, n.pausedUntil)
		return
	}
	var links [][2]int
	for x := range nEndpoints {
		if x != int(id) {
			links = append(links, [2]int{int(id), x}, [2]int{x, int(id)})
		}
	}
	for _, lk := range links {
		s.cut[lk[0]][lk[1]] = true
	}
	s.tracef("n%d away (cut off) for %d", n.id, d)
	s.after(d, "heal", -1, func() {
		for _, lk := range links {
			s.cut[lk[0]][lk[1]] = false
		}
		s.tracef("heal %v", links)
	})
}

// leaderLogStart is the follower's fetcher reading the partition's answer
// sp to fetch as the broker's does: OFFSET_OUT_OF_RANGE restarts the
// follower at the leader's log start; a clean answer moves its log start
// towards the leader's.
func (s *sim) leaderLogStart(fetch Message, sp *kmsg.FetchResponseTopicPartition) {
	n := s.nodes[endpointOf(fetch.From)]
	leaderStart := wal.Offset(sp.LogStartOffset)
	switch {
	case sp.ErrorCode == kerr.OffsetOutOfRange.Code:
		s.restartAtLeaderStart(n, leaderStart)
	case sp.ErrorCode == 0 && leaderStart > n.disk.start:
		n.leaderStart = max(n.leaderStart, leaderStart)
		s.followLogStart(n, leaderStart)
	}
}

// restartAtLeaderStart empties n's log and restarts it at start, when its
// log ends below start (wal.TruncateFullyAndStartAt, then a reopen).
func (s *sim) restartAtLeaderStart(n *simNode, start wal.Offset) {
	if !n.up || n.disk.end() >= start {
		return
	}
	if start > s.chk.cw {
		s.fail("retention: n%d told to restart at its leader's log start %d above the committed watermark %d", n.id, start, s.chk.cw)
		return
	}
	s.tracef("n%d restarts at its leader's log start %d (end %d)", n.id, start, n.disk.end())
	n.disk.restartAt(start)
	s.readsForget(n)
	s.ret.restarts++
	n.up = false
	n.inc++ // its outstanding fsyncs and hard-state writes went with the old log
	s.startNode(n)
}

// followLogStart moves follower n's log start towards its leader's, as far
// as its own HW and the base of its last batch.
func (s *sim) followLogStart(n *simNode, leaderStart wal.Offset) {
	st := n.r.Status()
	if st.Role != RoleFollower || st.Err != nil {
		return
	}
	d := &n.disk
	to := d.start
	l := d.log()
	for i := 0; i+1 < len(l) && i < len(d.synced) && l[i].End() <= min(leaderStart, st.HW); i++ {
		to = l[i].End()
	}
	if to <= d.start {
		return
	}
	d.advanceStart(to)
	s.tracef("n%d log start %d with its leader's %d", n.id, to, leaderStart)
	n.r.SetLogStart(to, to)
}

// advanceStart deletes the synced batches below to, a batch boundary,
// keeping their epochs in the chain's head (the epoch checkpoint).
func (d *simDisk) advanceStart(to wal.Offset) {
	i := 0
	for i < len(d.synced) && d.synced[i].End() <= to {
		d.head, _ = extendChain(d.head, d.synced[i])
		i++
	}
	d.synced = append([]Batch(nil), d.synced[i:]...)
	d.start = to
}

// restartAt empties the log and starts it at off (nothing pending, no
// epochs); the hard state stays.
func (d *simDisk) restartAt(off wal.Offset) {
	d.synced, d.pending, d.hsQueue, d.head = nil, nil, nil, nil
	d.start = off
}

// chain is the epoch chain of l, a log of d from its start, with the
// epochs of what retention deleted below it.
func (d *simDisk) chain(l []Batch) []EpochEntry {
	c := append([]EpochEntry(nil), d.head...)
	for _, b := range l {
		c, _ = extendChain(c, b)
	}
	return c
}
