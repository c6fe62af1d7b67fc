package replica

// The simulator's consumer-visible reads. In the broker a consumer reads a
// partition from its leader and (KIP-392) from a follower, in either case
// below that replica's own high watermark and out of the log as its page
// cache holds it. Here one reader per replica reads, at times drawn from
// its own source (so no other subsystem's draws move), every batch its
// replica's disk holds below the replica's present HW, and remembers each
// (offset, batch) it saw, with which replica served it, when, and under
// which HW. A record a consumer saw must be the committed record at its
// offset for ever: the checker fails the run the moment a truncation
// removes a read offset from the replica that served it, and compares
// every read with the committed log once the committed watermark covers it.
//
// Invariant: every batch a reader saw is, once the committed watermark
// passes its end, the committed batch at its offset (judged at once when
// the watermark is already past it, else when the watermark passes).
// Invariant: no truncation of a replica's log removes an offset a reader saw
// on that log. A lost disk or a full restart below the leader's log start is
// a new log, not a truncation: it forgets what was read on the old one (the
// reads stay judged against the committed log).
// Invariant: a read that no committed watermark ever covered fails the run
// at its end: the converged logs hold only committed records.

import (
	"fmt"
	"math/rand/v2"

	"github.com/sluice-mq/sluice/wal"
)

// simRead is one batch a reader saw.
type simRead struct {
	node NodeID
	role Role
	at   int64
	hw   wal.Offset // the serving replica's HW when it was read
	b    Batch
}

// simReads is the readers' state, one reader per replica.
type simReads struct {
	r     *rand.Rand
	every int64 // mean gap between two reads of one replica
	// seen: per replica, what its present log served, by offset; its last
	// batch's end is where the next read starts (what was read is checked
	// already and stays put unless truncated, which fails the run).
	seen    [nReplicas][]simRead
	pending []simRead // read above the committed watermark, awaiting it
}

// initReads draws the readers' pace and starts one reader per replica.
func (s *sim) initReads(r *rand.Rand) {
	s.reads.r = r
	s.reads.every = tickUnits + r.Int64N(10*tickUnits)
	for i := range s.nodes {
		s.scheduleRead(s.nodes[i])
	}
}

func (s *sim) scheduleRead(n *simNode) {
	s.after(1+s.reads.r.Int64N(2*s.reads.every), "read", int(n.id), func() {
		s.readReplica(n)
		s.scheduleRead(n)
	})
}

// readReplica is a consumer's fetch from n: every batch its log holds below
// its HW that this reader has not seen yet.
func (s *sim) readReplica(n *simNode) {
	if s.done || !n.up || s.paused(n.pausedUntil) {
		return
	}
	st := n.r.Status()
	if st.Err != nil {
		return // a failed replica serves nothing until it is reopened
	}
	rs := &s.reads
	from := n.disk.start
	if seen := rs.seen[n.id]; len(seen) > 0 {
		from = max(from, seen[len(seen)-1].b.End())
	}
	l := n.disk.log()
	i, _ := batchAt(l, from)
	for ; i < len(l) && l[i].End() <= st.HW; i++ {
		rd := simRead{node: n.id, role: st.Role, at: s.now, hw: st.HW, b: l[i]}
		rs.seen[n.id] = append(rs.seen[n.id], rd)
		if !s.judgeRead(rd) {
			return
		}
	}
}

// judgeRead compares rd with the committed log if the committed watermark
// covers it, and keeps it for later otherwise; false: the run failed.
func (s *sim) judgeRead(rd simRead) bool {
	c := &s.chk
	if rd.b.End() > c.cw {
		s.reads.pending = append(s.reads.pending, rd)
		return true
	}
	if c.isCommitted(rd.b) {
		return true
	}
	want := "nothing"
	if i, ok := batchAt(c.committed, rd.b.Base); ok {
		cb := c.committed[i]
		want = fmt.Sprintf("[%d,%d] e%d", cb.Base, cb.Last, cb.Epoch)
	}
	s.fail("reads: n%d (%s, HW %d) served batch [%d,%d] e%d to a consumer at t=%d; the committed log holds %s there (committed watermark %d)",
		rd.node, rd.role, rd.hw, rd.b.Base, rd.b.Last, rd.b.Epoch, rd.at, want, c.cw)
	return false
}

// readsCommitted judges the pending reads the committed watermark now
// covers.
func (s *sim) readsCommitted() {
	rs := &s.reads
	kept := rs.pending[:0]
	var due []simRead
	for _, rd := range rs.pending {
		if rd.b.End() <= s.chk.cw {
			due = append(due, rd)
		} else {
			kept = append(kept, rd)
		}
	}
	rs.pending = kept
	for _, rd := range due {
		if !s.judgeRead(rd) {
			return
		}
	}
}

// readsTruncated fails the run if cutting n's log at t removes an offset a
// consumer read on it (a batch holding t goes whole).
func (s *sim) readsTruncated(n *simNode, t wal.Offset) {
	seen := s.reads.seen[n.id]
	for i := range seen {
		if rd := seen[i]; rd.b.End() > t {
			s.fail("reads: n%d truncates its log to %d, removing batch [%d,%d] e%d that it served to a consumer at t=%d as %s with HW %d",
				n.id, t, rd.b.Base, rd.b.Last, rd.b.Epoch, rd.at, rd.role, rd.hw)
			return
		}
	}
}

// readsForget: n's log was replaced (a lost disk, a full restart at its
// leader's log start); what was read on the old one stays judged.
func (s *sim) readsForget(n *simNode) { s.reads.seen[n.id] = nil }

// readsFinal: at convergence every read is covered by the committed
// watermark; one that is not was of a record that never got committed.
func (s *sim) readsFinal() {
	s.readsCommitted()
	if s.done && s.failure != "" {
		return
	}
	for _, rd := range s.reads.pending {
		s.fail("reads: n%d (%s, HW %d) served batch [%d,%d] e%d to a consumer at t=%d; it was never committed (final committed watermark %d)",
			rd.node, rd.role, rd.hw, rd.b.Base, rd.b.Last, rd.b.Epoch, rd.at, s.chk.cw)
		return
	}
}
