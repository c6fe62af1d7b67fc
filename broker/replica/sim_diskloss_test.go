package replica

// The simulator's disk-loss fault: a replica restarted on an empty data
// directory (a replaced disk, a wiped volume), with a new incarnation and
// no hard state, log or HW checkpoint. etcd's state records the
// incarnation each replica was last in sync with; the register starts with
// every replica's first one, as a topic's creation records them.
//
// A disk is lost only while every replica is counted (the state records
// its present incarnation): losing a second disk before the first replica
// caught up may leave no eligible quorum at all, and then the partition
// must stay offline, which the liveness phase would report as a failure.
// That case is the controller unit tests' (TestControllerLostDiskBlocks).
//
// What the checker expects after a loss: the committed log is no longer
// on a quorum of synced disks, only on enough of them that every quorum of
// counted replicas holds one (eligibleQuorumHolds); an election must still
// pick a log holding everything committed (casApplied's check 7).

import "math/rand/v2"

// diskLoss is the fault's per-seed state, drawn from its own source so the
// other subsystems' draws do not move.
type diskLoss struct {
	r    *rand.Rand
	rate float64 // per fault tick
	lost int     // disks lost this run
}

// initDiskLoss draws the rate and every replica's first incarnation, and
// records them in the register.
func (s *sim) initDiskLoss(r *rand.Rand) {
	s.dl.r = r
	if r.IntN(2) == 0 {
		s.dl.rate = r.Float64() * 0.01
	}
	s.reg.state.Incarnations = make([]Incarnation, nReplicas)
	for i, n := range s.nodes {
		n.incarnation = s.newIncarnation()
		s.reg.state.Incarnations[i] = n.incarnation
	}
}

func (s *sim) newIncarnation() Incarnation {
	for {
		if x := Incarnation(s.dl.r.Uint64()); x != 0 {
			return x
		}
	}
}

// counted reports whether the register counts n's present incarnation.
func (s *sim) counted(n *simNode) bool {
	return s.reg.state.Counts(n.id, n.incarnation)
}

// maybeLoseDisk is the fault: crash a replica and restart it on an empty
// disk, when every replica is counted.
func (s *sim) maybeLoseDisk() {
	if s.dl.rate == 0 || s.dl.r.Float64() >= s.dl.rate {
		return
	}
	for _, n := range s.nodes {
		if !s.counted(n) {
			return
		}
	}
	n := s.nodes[s.dl.r.IntN(nReplicas)]
	s.loseDisk(n)
}

// loseDisk crashes n (if up) and restarts it later with an empty disk and
// a new incarnation.
func (s *sim) loseDisk(n *simNode) {
	if n.up {
		n.disk.crash(0)
		n.up = false
		n.inc++
	}
	n.lostSynced, n.lostStart = n.disk.synced, n.disk.start
	n.disk = simDisk{}
	n.hwCkpt = 0
	n.incarnation = s.newIncarnation()
	s.dl.lost++
	s.chk.fenceAcked[n.id] = 0 // the promises went with the disk
	s.readsForget(n)           // a new log: nothing read on it yet
	s.tracef("n%d disk lost: new incarnation %x", n.id, uint64(n.incarnation))
	if !s.chk.eligibleQuorumHolds(s.reg.state) {
		s.fail("check 7: after n%d lost its disk, a quorum of counted replicas holds no copy of the committed log (watermark %d)", n.id, s.chk.cw)
		return
	}
	s.after(1+s.dl.r.Int64N(30*tickUnits), "restart", int(n.id), func() {
		if !n.up {
			s.startNode(n)
		}
	})
}

// eligibleQuorumHolds: fewer than a quorum of the replicas st counts lack the committed log on their synced disks, so every quorum of
// counted replicas holds it. Without disk loss (all counted) this is
// quorumHolds.
func (c *checker) eligibleQuorumHolds(st State) bool {
	missing := 0
	for _, n := range c.s.nodes {
		if st.Counts(n.id, n.incarnation) && !c.holdsCommitted(n.disk.synced, n.disk.start, c.cw) {
			missing++
		}
	}
	return missing < nReplicas/2+1
}

// recordApplied checks a CAS that only records a replica's new
// incarnation (same epoch and leader): the replica runs it, and with it
// counted every quorum of counted replicas still holds the committed log
// (it holds what was committed when it lost its disk; what was committed
// since is on a quorum without it). It reports whether next was such a
// CAS.
func (c *checker) recordApplied(old, next State) bool {
	if next.Epoch != old.Epoch || next.Leader != old.Leader {
		return false
	}
	for _, n := range c.s.nodes {
		if next.IncarnationOf(n.id) == old.IncarnationOf(n.id) {
			continue
		}
		if next.IncarnationOf(n.id) != n.incarnation {
			c.s.fail("check 7: n%d's incarnation %x recorded; it runs %x", n.id, uint64(next.IncarnationOf(n.id)), uint64(n.incarnation))
		} else if !c.eligibleQuorumHolds(next) {
			c.s.fail("check 7: n%d's new incarnation recorded; then a quorum of counted replicas lacks the committed log (watermark %d)", n.id, c.cw)
		}
	}
	return true
}

// fromLostDisk: a message a replica sent before it lost its disk is not
// delivered. A disk is lost at the crash here, but a real one dies after
// whatever its broker had sent arrived (it is replaced, not vaporised),
// and a report of a durable end that arrives once the disk is gone would
// make the checker see a commit on a disk it no longer has.
func (s *sim) fromLostDisk(from int, m Message) bool {
	return from < nReplicas && m.Incarnation != 0 && m.Incarnation != s.nodes[from].incarnation
}

// lostSinceAck: the winner of next's election answered its fence with the
// incarnation next records, and has lost that disk since. It then holds
// nothing, but it will not lead: it resigns an epoch won by another
// incarnation, and the controller elects again.
func (c *checker) lostSinceAck(next State) bool {
	inc := next.IncarnationOf(next.Leader)
	return inc != 0 && inc != c.s.nodes[next.Leader].incarnation
}
