package replica

// The simulator's checker: the checks against ground truth (the
// synced disks, the register and the oracle of every proposed record),
// cheap ones at every step, the rest at the end of a schedule.

import (
	"bytes"

	"github.com/sluice-mq/sluice/wal"
)

type checker struct {
	s *sim
	// consequences: skip the checks that name a broken rule directly
	// (checks 2, 5's epoch rule and its follower HW rule, 8, 9), so a
	// planted bug must show as lost or diverging data, or as a consumer's
	// read of a record that is not the committed one.
	consequences bool
	committed    []Batch    // the committed log, from offset 0
	cw           wal.Offset // committed watermark: end of committed
	ackers       map[wal.Epoch]NodeID
	fenceAcked   [nReplicas]wal.Epoch // highest fence each replica answered
	acks         map[wal.Epoch]map[NodeID][]fenceAck
}

func (c *checker) init(s *sim) {
	c.s = s
	c.ackers = map[wal.Epoch]NodeID{}
	c.acks = map[wal.Epoch]map[NodeID][]fenceAck{}
}

func sameBatch(a, b Batch) bool {
	return a.Base == b.Base && a.Last == b.Last && a.Epoch == b.Epoch && a.Control == b.Control && bytes.Equal(a.Data, b.Data)
}

func (c *checker) isCommitted(b Batch) bool {
	if b.End() > c.cw {
		return false
	}
	i, ok := batchAt(c.committed, b.Base)
	return ok && sameBatch(c.committed[i], b)
}

// holdsCommitted reports whether l, a log starting at start, holds the
// committed log below h from its start on: what retention deleted below a
// log start is legitimately gone (sim_retention_test.go).
func (c *checker) holdsCommitted(l []Batch, start, h wal.Offset) bool {
	i, _ := batchAt(c.committed, start)
	for j := 0; i < len(c.committed); i, j = i+1, j+1 {
		b := c.committed[i]
		if b.Base >= h {
			break
		}
		if j >= len(l) || !sameBatch(l[j], b) {
			return false
		}
	}
	return true
}

// A replica that lost its disk after it reported what it held still counts
// for what its lost disk held: the leader counted that report when it was
// true, and a lost disk is the one fault the quorum is there to survive.
// Elections are judged by check 7, which gives a lost disk no such credit.
func (c *checker) quorumHolds(h wal.Offset) bool { return c.holders(h) >= nReplicas/2+1 }

// holders counts the replicas whose synced disk (or lost one, as above)
// holds the committed log below h.
func (c *checker) holders(h wal.Offset) int {
	n := 0
	for _, nd := range c.s.nodes {
		if c.holdsCommitted(nd.disk.synced, nd.disk.start, h) || c.holdsCommitted(nd.lostSynced, nd.lostStart, h) {
			n++
		}
	}
	return n
}

func (c *checker) leaderAct(n *simNode, st Status, what string) {
	if st.Role != RoleLeader {
		c.s.fail("check 1: n%d %s while %s", n.id, what, st.Role)
		return
	}
	if l, ok := c.ackers[st.Epoch]; ok && l != n.id {
		c.s.fail("check 1: n%d and n%d both %s in epoch %d", l, n.id, what, st.Epoch)
	}
	c.ackers[st.Epoch] = n.id
	if st.Epoch < c.fenceAcked[n.id] {
		c.s.fail("check 2: n%d %s in epoch %d after answering a fence at %d", n.id, what, st.Epoch, c.fenceAcked[n.id])
	}
}

// truncate: nothing committed that the replica holds is cut (check 7).
func (c *checker) truncate(n *simNode, t wal.Offset) {
	l := n.disk.log()
	i, _ := batchAt(l, t)
	if i > 0 && l[i-1].End() > t {
		i-- // the batch holding t goes too
	}
	for ; i < len(l) && l[i].Base < c.cw; i++ {
		if c.isCommitted(l[i]) {
			c.s.fail("check 7: n%d truncates to %d, cutting committed batch [%d,%d] e%d (committed watermark %d)", n.id, t, l[i].Base, l[i].Last, l[i].Epoch, c.cw)
			return
		}
	}
}

// append: contiguous, epochs never decrease (check 4), only E's leader
// makes records of E and they carry the oracle's CRC (check 3), and no
// append for an epoch below an answered fence (check 2).
func (c *checker) append(n *simNode, st Status, b Batch) {
	s := c.s
	l := n.disk.log()
	if b.Base != n.disk.end() {
		s.fail("check 4: n%d appends at %d, log ends at %d", n.id, b.Base, n.disk.end())
		return
	}
	if len(l) > 0 && b.Epoch < l[len(l)-1].Epoch {
		s.fail("check 4: n%d appends epoch %d after epoch %d", n.id, b.Epoch, l[len(l)-1].Epoch)
		return
	}
	if st.Role == RoleNone || st.Epoch < c.fenceAcked[n.id] {
		s.fail("check 2: n%d (%s of epoch %d) appends after answering a fence at %d", n.id, st.Role, st.Epoch, c.fenceAcked[n.id])
		return
	}
	leader, ok := s.leaderOf[b.Epoch]
	if !ok {
		s.fail("check 3: n%d appends a batch of epoch %d that etcd never had", n.id, b.Epoch)
		return
	}
	if b.Control {
		if st.Role == RoleLeader && leader != n.id {
			s.fail("check 3: n%d starts epoch %d led by n%d", n.id, b.Epoch, leader)
		}
		return
	}
	id, crcOK := decodeRecord(b.Data)
	if !crcOK || id == 0 || id > uint64(len(s.records)) {
		s.fail("check 3: n%d appends batch [%d,%d] with bad data", n.id, b.Base, b.Last)
		return
	}
	rec := s.records[id-1]
	if rec.epoch != b.Epoch || rec.base != b.Base || wal.Offset(rec.count) != b.End()-b.Base || rec.node != leader {
		s.fail("check 3: n%d appends record %d as [%d,%d] e%d; proposed to n%d at %d e%d, epoch led by n%d", n.id, id, b.Base, b.Last, b.Epoch, rec.node, rec.base, rec.epoch, leader)
	}
}

// message: what a replica reports never exceeds its synced state (checks 2, 8, 9).
func (c *checker) message(n *simNode, st Status, m Message) {
	s := c.s
	d := &n.disk
	switch m.Type {
	case MsgFenceAck:
		if m.Err != ErrNone {
			return
		}
		if d.hs.Fenced < m.Epoch && !c.consequences {
			s.fail("check 2: n%d answers a fence at %d with only %d durable", n.id, m.Epoch, d.hs.Fenced)
			return
		}
		c.fenceAcked[n.id] = max(c.fenceAcked[n.id], m.Epoch)
		if m.Offset > d.syncedEnd() || epochBelow(d.chain(d.synced), m.Offset) != m.LastEpoch {
			s.fail("check 8: n%d reports (%d,%d) to the controller; synced log ends at %d", n.id, m.LastEpoch, m.Offset, d.syncedEnd())
			return
		}
		if c.acks[m.Epoch] == nil {
			c.acks[m.Epoch] = map[NodeID][]fenceAck{}
		}
		c.acks[m.Epoch][n.id] = append(c.acks[m.Epoch][n.id], fenceAck{from: n.id, lastEpoch: m.LastEpoch, end: m.Offset, inc: m.Incarnation})
	case MsgFetch:
		if m.Offset > d.syncedEnd() || epochBelow(d.chain(d.synced), m.Offset) != m.LastEpoch {
			s.fail("check 8: n%d fetches at (%d,%d); synced log ends at %d", n.id, m.LastEpoch, m.Offset, d.syncedEnd())
		}
		if m.Epoch < c.fenceAcked[n.id] {
			s.fail("check 2: n%d follows epoch %d after answering a fence at %d", n.id, m.Epoch, c.fenceAcked[n.id])
		}
	case MsgFetchResp:
		if m.Diverging && !c.consequences {
			e, eo := endOffsetForEpoch(d.chain(d.log()), d.end(), m.DivergingEpoch)
			if e != m.DivergingEpoch || eo != m.DivergingEnd {
				s.fail("check 9: n%d answers diverging (%d,%d); its log says (%d,%d)", n.id, m.DivergingEpoch, m.DivergingEnd, e, eo)
			}
		}
	}
}

// hw: never falls on a replica; a leader's HW is committed (check 5, 6);
// a follower's HW covers only the committed log.
func (c *checker) hw(n *simNode, st Status, h wal.Offset) {
	s := c.s
	if h < n.lastHW {
		s.fail("check 6: n%d HW falls from %d to %d", n.id, n.lastHW, h)
		return
	}
	n.lastHW = h
	l := n.disk.log()
	if st.Role != RoleLeader {
		if c.consequences {
			return // a consumer reading it is the consequence (sim_reads_test.go)
		}
		if h > c.cw || !c.holdsCommitted(l, n.disk.start, h) {
			s.fail("check 5: follower n%d HW %d covers a log that is not the committed one (committed watermark %d)", n.id, h, c.cw)
		}
		return
	}
	c.leaderAct(n, st, "publishes an HW")
	own := false
	for _, b := range l {
		if b.Base >= h {
			break
		}
		if b.Epoch == st.Epoch {
			own = true
			break
		}
	}
	if !own && !c.consequences {
		s.fail("check 5: n%d publishes HW %d before its epoch %d start is below it", n.id, h, st.Epoch)
		return
	}
	if !c.holdsCommitted(l, n.disk.start, min(h, c.cw)) {
		s.fail("check 7: leader n%d's log below its HW %d differs from the committed log", n.id, h)
		return
	}
	if h > c.cw {
		i, ok := batchAt(l, c.cw)
		if !ok {
			s.fail("check 5: n%d HW %d: no batch at the committed watermark %d", n.id, h, c.cw)
			return
		}
		for ; i < len(l) && l[i].End() <= h; i++ {
			c.committed = append(c.committed, l[i].Clone())
		}
		c.cw = h
		if n := len(c.committed); n == 0 || c.committed[n-1].End() != h {
			s.fail("check 5: leader HW %d is not at a batch end", h)
			return
		}
		s.readsCommitted()
	}
	if !c.quorumHolds(h) {
		s.fail("check 5: leader n%d publishes HW %d; fewer than a quorum of synced disks hold the log below it", n.id, h)
	}
}

// released: an acknowledged record is committed (acks=all) or on the
// leader's synced disk (acks=1).
func (c *checker) released(n *simNode, st Status, t Token) {
	s := c.s
	rec := s.records[t-1]
	rec.acked, rec.ackedAt = true, s.now
	c.leaderAct(n, st, "acknowledges")
	b := Batch{Base: rec.base, Last: rec.base + wal.Offset(rec.count) - 1, Epoch: rec.epoch, Data: encodeRecord(rec.id)}
	if rec.acksAll {
		if !c.isCommitted(b) || !c.quorumHolds(c.cw) {
			s.fail("check 5: n%d acknowledges record %d at %d (acks=all) that is not committed on a quorum (watermark %d)", n.id, rec.id, rec.base, c.cw)
			return
		}
		// With MinISR above a majority, the reply also waits for MinISR
		// synced copies (the high watermark readers see does not).
		if want := s.k.cfg.MinISR; want > nReplicas/2+1 && c.holders(b.End()) < want {
			s.fail("check 5: n%d acknowledges record %d at %d (acks=all) held by %d synced disks, fewer than MinISR %d", n.id, rec.id, rec.base, c.holders(b.End()), want)
		}
		return
	}
	i, ok := batchAt(n.disk.synced, rec.base)
	if !ok || !sameBatch(n.disk.synced[i], b) {
		s.fail("n%d acknowledges record %d (acks=1) not on its synced disk", n.id, rec.id)
	}
}

// casApplied: epochs in etcd strictly increase, and the winner's answer is
// at least quorum-1 other answers of its fence round (checks 1, 8).
func (c *checker) casApplied(old, next State) {
	s := c.s
	if c.recordApplied(old, next) {
		return
	}
	if next.Epoch <= old.Epoch {
		s.fail("check 1: etcd epoch goes from %d to %d", old.Epoch, next.Epoch)
		return
	}
	if _, ok := s.leaderOf[next.Epoch]; ok {
		s.fail("check 1: epoch %d written twice", next.Epoch)
		return
	}
	if nd := s.nodes[next.Leader]; !c.holdsCommitted(nd.disk.synced, nd.disk.start, c.cw) && !c.lostSinceAck(next) {
		s.fail("check 7: n%d elected in epoch %d without the committed log (watermark %d) on its synced disk", next.Leader, next.Epoch, c.cw)
		return
	}
	acks := c.acks[next.Epoch]
	w := acks[next.Leader]
	if c.consequences {
		return
	}
	if len(w) == 0 {
		s.fail("check 8: n%d elected in epoch %d without answering its fence", next.Leader, next.Epoch)
		return
	}
	best := w[0]
	for _, a := range w[1:] {
		if upToDate(a, best) {
			best = a
		}
	}
	n := 0
	for id, as := range acks {
		if id == next.Leader {
			continue
		}
		for _, a := range as {
			if upToDate(best, a) {
				n++
				break
			}
		}
	}
	if n < nReplicas/2 {
		s.fail("check 8: n%d (%d,%d) elected in epoch %d over more up-to-date logs", next.Leader, best.lastEpoch, best.end, next.Epoch)
	}
}

// afterDiskLoss: the committed log is still on a quorum of synced disks
// (of the replicas counted: a replica that lost its whole disk is not).
func (c *checker) afterDiskLoss() {
	if !c.eligibleQuorumHolds(c.s.reg.state) {
		c.s.fail("check 7: after a crash fewer than a quorum of synced disks hold the committed log (watermark %d)", c.cw)
	}
}

// final runs once the cluster converged: every acknowledged record is on
// the leader and a quorum of synced disks; all logs are identical below
// the HW; logs agreeing at one (offset, epoch) agree below it (check 4).
func (c *checker) final() {
	s := c.s
	leader := s.nodes[s.reg.state.Leader]
	ll := leader.disk.log()
	hw := leader.r.Status().HW
	if hw < c.cw {
		s.fail("check 6: final HW %d below the committed watermark %d", hw, c.cw)
		return
	}
	for _, rec := range s.records {
		if !rec.acked || !rec.acksAll || rec.base < leader.disk.start {
			continue // not acknowledged for good, or deleted by retention
		}
		b := Batch{Base: rec.base, Last: rec.base + wal.Offset(rec.count) - 1, Epoch: rec.epoch, Data: encodeRecord(rec.id)}
		i, ok := batchAt(ll, rec.base)
		if !ok || !sameBatch(ll[i], b) {
			s.fail("check 10: acknowledged record %d at %d is not on the final leader n%d", rec.id, rec.base, leader.id)
			return
		}
	}
	if !c.quorumHolds(c.cw) {
		s.fail("check 7: final: the committed log is not on a quorum of synced disks")
		return
	}
	for _, n := range s.nodes {
		// Identical from the later of the two log starts on.
		from := max(n.disk.start, leader.disk.start)
		i, _ := batchAt(n.disk.synced, from)
		j, _ := batchAt(ll, from)
		l, lt := n.disk.synced[i:], ll[j:]
		if len(l) != len(lt) {
			s.fail("final: n%d has %d synced batches from %d, leader n%d %d", n.id, len(l), from, leader.id, len(lt))
			return
		}
		for k := range l {
			if !sameBatch(l[k], lt[k]) {
				s.fail("final: n%d differs from leader n%d at offset %d", n.id, leader.id, l[k].Base)
				return
			}
		}
	}
}

// logMatching: two logs holding a batch of the same epoch at the same
// offset hold the same batches up to it (check 4).
func (c *checker) logMatching() {
	nodes := c.s.nodes
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			// Compared from the later of the two log starts on (retention).
			from := max(nodes[i].disk.start, nodes[j].disk.start)
			a, b := nodes[i].disk.log(), nodes[j].disk.log()
			ai, _ := batchAt(a, from)
			bi, _ := batchAt(b, from)
			a, b = a[ai:], b[bi:]
			last := -1 // last index where both hold a batch of one epoch at one offset
			for k := 0; k < len(a) && k < len(b); k++ {
				if a[k].Base == b[k].Base && a[k].Epoch == b[k].Epoch {
					last = k
				}
			}
			for k := 0; k <= last; k++ {
				if !sameBatch(a[k], b[k]) {
					c.s.fail("check 4: n%d and n%d agree at offset %d epoch %d but differ at offset %d",
						nodes[i].id, nodes[j].id, a[last].Base, a[last].Epoch, a[k].Base)
					return
				}
			}
		}
	}
}
