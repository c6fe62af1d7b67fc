package replica

// This file owns the leader's half of replication: the epoch-start batch,
// Propose and parked replies, follower fetches (epoch check, divergence
// check, long poll), in-sync tracking, and the high watermark.
//
// Invariant: the high watermark is at most the leader's own durable end and
// at most the (quorum-1)-th largest durable end a follower reported in a
// non-diverging fetch of this epoch, so everything below it is fsynced on
// a majority, the leader included, and every election keeps it.
// Invariant: the acknowledgement point (r.acked) is computed the same way
// with minISR in place of the quorum, so r.acked <= r.hw; when minISR is
// above a majority, an acks=all reply waits for it: minISR replicas hold
// the batch durably.
// Invariant: both move only past r.epochStart: a quorum must hold this
// epoch's start batch first (Raft's commit rule, Figure 8).
// Invariant: a parked reply is released (or failed) exactly once.
//
// Guarded by the owner of the Replica.

import (
	"cmp"
	"slices"

	"github.com/sluice-mq/sluice/wal"
)

// peer is the leader's view of one follower in the current epoch.
type peer struct {
	id      NodeID
	durable wal.Offset // from its last non-diverging fetch; -1 none
	// durableInc: the incarnation that fetch carried (0: none carried).
	// A durable end speaks only for the disk it came from.
	durableInc Incarnation
	lastFetch  int64 // tick of that fetch
	fetched    bool
	// dead: the incarnation the state records for this follower, once a
	// fetch came from another one: the disk it reported durable ends from
	// is gone, so the follower counts neither in sync nor for the HW until
	// the state records its new incarnation (a late fetch of the dead
	// one does not count either). 0: none.
	dead     Incarnation
	logStart wal.Offset // from its last fetch in this epoch; -1 none

	parked        bool // a fetch at the log end is held
	parkSeq       uint64
	parkEpoch     wal.Epoch
	parkOffset    wal.Offset
	parkLastEpoch wal.Epoch
	parkHW        wal.Offset
	parkUntil     int64
}

type leaderState struct {
	epochStart wal.Offset // offset of this epoch's start batch
	peers      []peer     // the other replicas, in State.Replicas order
	// acked: acks=all replies below it are released; durable on minISR
	// replicas. It starts at 0 in each epoch (the leader cannot know how
	// many disks hold what an earlier leader committed) and, like the
	// high watermark, moves only past the epoch's start batch.
	acked wal.Offset
}

func (r *Replica) becomeLeader(e wal.Epoch) {
	r.role = RoleLeader
	r.epoch = e
	r.leader = r.cfg.ID
	r.peers = r.peers[:0]
	r.acked = 0
	for _, id := range r.state.Replicas {
		if id != r.cfg.ID {
			// Counted in sync for LagTicks from the start of the epoch, as
			// Kafka starts a leader with the whole ISR: a follower gets
			// that long to fetch before writes are refused for want of it.
			// Only the durable ends they report move the high watermark.
			r.peers = append(r.peers, peer{id: id, durable: -1, fetched: true, lastFetch: r.tick, logStart: -1})
		}
	}
	if r.cfg.ElideEpochStart && r.hw >= r.end {
		// Everything in the log is known committed (a new partition's
		// empty log, say): no older epoch's record waits on this epoch's
		// commit rule, so no epoch-start batch is needed, and a new
		// partition's first record keeps offset 0. The rule still holds:
		// the high watermark moves only past records of this epoch.
		r.epochStart = r.end - 1
		return
	}
	r.epochStart = r.end
	r.appendLocal(Batch{Base: r.end, Last: r.end, Epoch: e, Control: true})
}

// Propose appends count records carrying data (opaque) in a new batch of
// the current epoch and returns its base offset. Only the leader accepts,
// and only while minISR replicas are in sync.
func (r *Replica) Propose(count int, data []byte) (wal.Offset, error) {
	switch {
	case r.err != nil:
		return -1, r.err
	case r.role != RoleLeader:
		return -1, ErrNotLeader
	case count < 1:
		panic("replica: Propose of no records")
	case len(r.inSync()) < r.minISR():
		return -1, ErrNotEnoughReplicas
	}
	b := Batch{Base: r.end, Last: r.end + wal.Offset(count) - 1, Epoch: r.epoch, Data: slices.Clone(data)}
	r.appendLocal(b)
	r.wakeParked()
	return b.Base, nil
}

// Wait parks reply t until the high watermark (acksAll) or the leader's
// durable end (acks=1) reaches end.
func (r *Replica) Wait(end wal.Offset, t Token, acksAll bool) {
	r.park(waiter{end: end, token: t, acksAll: acksAll})
}

// park adds w to the waiters and releases what is already covered, or
// fails it at once when this replica cannot answer it (failed, or not the
// leader).
func (r *Replica) park(w waiter) {
	switch {
	case r.err != nil:
		r.rd.Failed = append(r.rd.Failed, TokenErr{Token: w.token, Err: r.err})
	case r.role != RoleLeader:
		r.rd.Failed = append(r.rd.Failed, TokenErr{Token: w.token, Err: ErrNotLeader})
	default:
		if w.lowWatermark {
			r.lowWaits++
		}
		r.waiters = append(r.waiters, w)
		r.releaseWaiters()
	}
}

func (r *Replica) releaseWaiters() {
	kept := r.waiters[:0]
	low := wal.Offset(-1)
	if r.lowWaits > 0 {
		low = r.lowWatermark()
	}
	for _, w := range r.waiters {
		if w.lowWatermark && w.end <= low {
			r.lowWaits--
			r.rd.Released = append(r.rd.Released, w.token)
		} else if !w.lowWatermark && ((w.acksAll && w.end <= r.ackPoint()) || (!w.acksAll && w.end <= r.durable)) {
			r.rd.Released = append(r.rd.Released, w.token)
		} else {
			kept = append(kept, w)
		}
	}
	r.waiters = kept
}

// inSync lists the leader and the followers that fetched recently.
func (r *Replica) inSync() []NodeID {
	ids := []NodeID{r.cfg.ID}
	for i := range r.peers {
		if r.peerInSync(&r.peers[i]) {
			ids = append(ids, r.peers[i].id)
		}
	}
	return ids
}

// Follower is the leader's view of one follower in the epoch it leads.
type Follower struct {
	ID NodeID
	// Fetched is the highest offset the follower fetched from in this
	// epoch (its log end as it reported it); -1 if it has not fetched
	// since this replica became leader, or since its new incarnation.
	Fetched wal.Offset
	InSync  bool
}

// Followers returns the log end and the followers of the epoch this
// replica leads, in State.Replicas order; nothing when it does not lead.
func (r *Replica) Followers() (wal.Offset, []Follower) {
	if r.role != RoleLeader {
		return r.end, nil
	}
	out := make([]Follower, len(r.peers))
	for i := range r.peers {
		p := &r.peers[i]
		out[i] = Follower{ID: p.id, Fetched: p.durable, InSync: r.peerInSync(p)}
	}
	return r.end, out
}

// peerInSync reports whether follower p fetched recently (from at or above
// the log start: stepFetch).
func (r *Replica) peerInSync(p *peer) bool {
	return p.fetched && (p.dead == 0 || p.dead != r.state.IncarnationOf(p.id)) && r.tick-p.lastFetch <= int64(r.cfg.LagTicks)
}

func (r *Replica) peer(id NodeID) *peer {
	for i := range r.peers {
		if r.peers[i].id == id {
			return &r.peers[i]
		}
	}
	return nil
}

// stepFetch answers a follower's fetch, or holds it at the log end.
func (r *Replica) stepFetch(m Message) {
	resp := Message{Type: MsgFetchResp, To: m.From, Epoch: m.Epoch, Seq: m.Seq, Offset: m.Offset, LastEpoch: m.LastEpoch}
	switch {
	case r.role != RoleLeader && m.Epoch < r.fenced:
		resp.Err = ErrCodeFencedLeaderEpoch
	case r.role != RoleLeader:
		resp.Err = ErrCodeNotLeader
	case m.Epoch < r.epoch:
		resp.Err = ErrCodeFencedLeaderEpoch
	case m.Epoch > r.epoch:
		resp.Err = ErrCodeUnknownLeaderEpoch
	}
	p := r.peer(m.From)
	if resp.Err == ErrNone && p == nil {
		resp.Err = ErrCodeNotLeader
	}
	if resp.Err != ErrNone {
		r.send(resp)
		return
	}
	if d, e, eo := diverges(r.epochs, r.end, m.Offset, m.LastEpoch); d && !r.cfg.bugs.skipDivergence {
		resp.Diverging, resp.DivergingEpoch, resp.DivergingEnd = true, e, eo
		resp.HW = r.hw
		r.send(resp)
		return
	}
	if r.belowLogStart(m, &resp) {
		return
	}
	if m.Offset > r.end {
		// Only reachable with the planted skipDivergence bug.
		resp.Err = ErrCodeNotLeader
		r.send(resp)
		return
	}
	// A fetch without an incarnation comes from a driver that does not
	// carry one (the broker's Kafka replica Fetch): it counts as before.
	rec := r.state.IncarnationOf(m.From)
	counts := m.Incarnation == 0 || r.state.Counts(m.From, m.Incarnation)
	if !counts {
		p.dead, p.durable = rec, -1
	}
	if counts && (rec == 0 || p.dead != rec) {
		if m.Incarnation != p.durableInc {
			// Another disk (possible while the state records none): its
			// end replaces the old one's rather than adding to it.
			p.durable, p.durableInc = -1, m.Incarnation
		}
		p.durable = max(p.durable, m.Offset)
		p.lastFetch = r.tick
		p.fetched = true
		p.logStart = m.LogStart
	}
	p.parked = true
	p.parkSeq, p.parkEpoch, p.parkOffset, p.parkLastEpoch, p.parkHW = m.Seq, m.Epoch, m.Offset, m.LastEpoch, r.hw
	p.parkUntil = r.tick + int64(r.cfg.FetchWaitTicks)
	r.commit()
	if r.lowWaits > 0 {
		r.releaseWaiters()
	}
	if p.parked && m.Offset < r.end {
		r.answerParked(p)
	}
}

// answerParked answers p's held fetch with the log from its offset.
func (r *Replica) answerParked(p *peer) {
	p.parked = false
	r.send(Message{
		Type: MsgFetchResp, To: p.id, Epoch: p.parkEpoch, Seq: p.parkSeq,
		Offset: p.parkOffset, LastEpoch: p.parkLastEpoch,
		HW: r.hw, ReadFrom: p.parkOffset, ReadTo: r.end, LogStart: r.logStart,
	})
}

// ExpireFetch answers follower from's fetch seq at once if the leader
// still holds it. The driver calls it when the request that carried the
// fetch must be answered (its MaxWait passed): an answer given later, at
// the park's own deadline, would reach no one, and a follower whose every
// fetch is held until its request gives up never learns a high watermark
// that moved while none of its fetches was held.
func (r *Replica) ExpireFetch(from NodeID, seq uint64) {
	if r.err != nil || r.role != RoleLeader {
		return
	}
	if p := r.peer(from); p != nil && p.parked && p.parkSeq == seq {
		r.answerParked(p)
	}
}

// wakeParked answers the held fetches that new data or a new HW concerns.
func (r *Replica) wakeParked() {
	for i := range r.peers {
		p := &r.peers[i]
		if p.parked && (r.end > p.parkOffset || r.hw != p.parkHW) {
			r.answerParked(p)
		}
	}
}

func (r *Replica) leaderTick() {
	for i := range r.peers {
		p := &r.peers[i]
		if p.parked && r.tick >= p.parkUntil {
			r.answerParked(p)
		}
	}
	if r.lowWaits > 0 {
		// A follower that left the in-sync set no longer holds the low
		// watermark back.
		r.releaseWaiters()
	}
}

// recount follows a new state of the epoch led: a follower whose new
// incarnation the controller recorded counts again, from its next fetch,
// unless its durable end already came from that incarnation (the state
// recorded the very disk it has been fetching with, as after a new
// partition's first catch-up).
func (r *Replica) recount(old State) {
	if r.role != RoleLeader {
		return
	}
	for i := range r.peers {
		p := &r.peers[i]
		if inc := r.state.IncarnationOf(p.id); inc != old.IncarnationOf(p.id) && (inc == 0 || inc != p.durableInc) {
			p.durable = -1 // the new incarnation reports afresh
		}
	}
}

// commit moves the high watermark to what a quorum of replicas, the leader
// included, hold durably, and the acknowledgement point to what minISR of
// them hold, each once it covers this epoch's start batch. With
// min.insync.replicas above a majority the two differ: a leader that lost
// one of three replicas still serves every record a majority holds (any
// election keeps them) while it acknowledges none it cannot give minISR
// copies.
func (r *Replica) commit() {
	moved := false
	if cand := r.durableOn(r.quorum()); r.committable(cand, r.hw) {
		r.hw = cand
		r.rd.HWChanged = true
		r.wakeParked()
		moved = true
	}
	if cand := r.durableOn(r.minISR()); r.committable(cand, r.acked) {
		r.acked = cand
		moved = true
	}
	if moved {
		r.releaseWaiters()
	}
}

// durableOn is the largest offset the leader and q-1 followers reported
// durable in this epoch (-1: fewer than q-1 followers reported).
func (r *Replica) durableOn(q int) wal.Offset {
	if q <= 1 {
		return r.durable
	}
	if len(r.peers) < q-1 {
		return -1
	}
	ends := make([]wal.Offset, 0, len(r.peers))
	for _, p := range r.peers {
		ends = append(ends, p.durable)
	}
	slices.SortFunc(ends, func(a, b wal.Offset) int { return cmp.Compare(b, a) })
	return min(r.durable, ends[q-2])
}

// committable reports whether a watermark at cur may move to cand.
func (r *Replica) committable(cand, cur wal.Offset) bool {
	return cand > cur && (cand > r.epochStart || r.cfg.bugs.hwIgnoresEpochStart)
}

// ackPoint is where acks=all replies are released: the high watermark
// unless MinISR asks for more copies than a majority. (r.acked restarts at
// 0 in each epoch, while the high watermark a replica recovers with already
// covers its committed log: a retried batch of a lone broker's recovered
// log, say, is answered at once.)
func (r *Replica) ackPoint() wal.Offset {
	if r.minISR() <= r.quorum() || r.cfg.bugs.acksOnQuorum {
		return r.hw
	}
	return r.acked
}
