package replica

// This file owns the follower's half of replication: fetching from the
// leader once everything appended is durable, truncating on divergence,
// appending what the leader sends, adopting its high watermark, and telling
// the controller when the leader stays unreachable.
//
// Invariant: a fetch leaves only when r.durable == r.end, so its Offset is
// the follower's durable end. An answer is taken only while it answers a
// fetch from the present log end and last epoch (echoed in Offset and
// LastEpoch): an answer to an older fetch that a retry replaced still
// counts, so slow networks do not starve the follower.
// Invariant: r.matched is the end of the prefix known to equal the
// leader's log (from its last non-diverging answer that its core judged);
// the follower's high watermark is at most min(leader HW, durable,
// matched). An Unjudged answer, or one whose range does not start at the
// fetch offset, moves neither matched nor the leader HW the follower knows:
// only the leader's core has compared the follower's log with its own.
// Invariant: a follower follows epoch e only once HardState{Fenced >= e} is
// durable, so after a restart it never goes back to a lower epoch.
//
// Guarded by the owner of the Replica.

import "github.com/sluice-mq/sluice/wal"

type followerState struct {
	fetchOut    bool // a fetch is outstanding
	truncating  bool // a truncation is out; Truncated gives the new end
	fetchSeq    uint64
	fetchSentAt int64
	retryAt     int64 // no fetch before this tick (after an error)
	lastHeard   int64 // last good answer from the leader
	complainAt  int64 // last LeaderUnreachable sent
	leaderHW    wal.Offset
	matched     wal.Offset
}

func (r *Replica) becomeFollower(e wal.Epoch, leader NodeID) {
	r.role = RoleFollower
	r.epoch = e
	r.leader = leader
	r.fetchOut = false
	r.retryAt = 0
	r.lastHeard = r.tick
	r.complainAt = r.tick
	r.leaderHW = 0
	r.matched = 0
	if r.fenced < e {
		r.fenced = e
		r.rd.HardState = &HardState{Fenced: e}
	}
	r.maybeFetch()
}

// maybeFetch sends the next fetch if one may go now.
func (r *Replica) maybeFetch() {
	if r.role != RoleFollower || r.fetchOut || r.truncating || r.hs.Fenced < r.epoch || r.durable != r.end || r.tick < r.retryAt {
		return
	}
	r.fetchSeq++
	r.fetchOut = true
	r.fetchSentAt = r.tick
	r.send(Message{
		Type: MsgFetch, To: r.leader, Epoch: r.epoch, Seq: r.fetchSeq,
		Offset: r.end, LastEpoch: epochBelow(r.epochs, r.end), LogStart: r.logStart,
	})
}

func (r *Replica) followerTick() {
	r.noteCaughtUp() // repeated until the state records this incarnation
	if r.fetchOut && r.tick-r.fetchSentAt > int64(r.cfg.FetchWaitTicks+2*r.cfg.RetryTicks) {
		r.fetchOut = false // lost: ask again
	}
	r.maybeFetch()
	if r.tick-r.lastHeard >= int64(r.cfg.UnreachableTicks) && r.tick-r.complainAt >= int64(r.cfg.RetryTicks) {
		r.complainAt = r.tick
		r.send(Message{Type: MsgLeaderUnreachable, To: ControllerNode, Epoch: r.epoch, LastEpoch: r.fenced})
	}
}

// stepFetchResp takes the leader's answer to the outstanding fetch.
func (r *Replica) stepFetchResp(m Message) {
	if r.role != RoleFollower || r.truncating || m.From != r.leader || m.Epoch != r.epoch ||
		m.Offset != r.end || m.LastEpoch != epochBelow(r.epochs, r.end) || r.durable != r.end {
		return // stale, duplicated or not ours
	}
	r.fetchOut = false
	if r.cfg.bugs.followerHWUnmatched && !m.Unjudged {
		r.leaderHW = max(r.leaderHW, m.HW)
		r.followerHW()
	}
	if m.Err != ErrNone {
		r.retryAt = r.tick + int64(r.cfg.RetryTicks)
		return
	}
	r.lastHeard = r.tick
	if m.Unjudged {
		// The leader is there but did not look at this fetch (its core was
		// busy when the answer of a multi-partition fetch left): ask again.
		r.maybeFetch()
		return
	}
	if m.Diverging {
		_, own := endOffsetForEpoch(r.epochs, r.end, m.DivergingEpoch)
		r.truncate(min(m.DivergingEnd, own))
		r.maybeFetch()
		return
	}
	if m.ReadFrom != r.end {
		r.maybeFetch()
		return
	}
	appended := false
	for _, b := range m.Batches {
		if !r.appendLocal(b) {
			break // not contiguous, or an epoch going back: refetch
		}
		appended = true
	}
	r.matched = r.end
	r.leaderHW = max(r.leaderHW, m.HW)
	r.followerHW()
	if !appended {
		r.maybeFetch()
	}
	// Otherwise Durable sends the next fetch.
}

// truncate cuts the log to t (durable once the driver has done it).
func (r *Replica) truncate(t wal.Offset) {
	if t >= r.end {
		return
	}
	kept := r.rd.Appends[:0]
	for _, b := range r.rd.Appends {
		if b.Base < t {
			if b.End() > t {
				panic("replica: truncation inside a pending batch")
			}
			kept = append(kept, b)
		}
	}
	r.rd.Appends = kept
	if len(kept) == 0 && (r.rd.Truncate < 0 || t < r.rd.Truncate) {
		r.rd.Truncate = t
		r.truncating = true
	}
	r.cut(t)
}

// Truncated reports the log's end after the driver did Ready.Truncate: at
// most the offset asked, lower when that fell inside a batch.
func (r *Replica) Truncated(end wal.Offset) {
	r.truncating = false
	if r.err != nil {
		return
	}
	r.cut(end)
	r.maybeFetch()
}

// cut forgets the log from t on.
func (r *Replica) cut(t wal.Offset) {
	if t >= r.end {
		return
	}
	r.end = t
	r.durable = min(r.durable, t)
	r.matched = min(r.matched, t)
	r.epochs = truncateChain(r.epochs, t)
}

// followerHW adopts the leader's high watermark over the matched, durable
// prefix.
func (r *Replica) followerHW() {
	held := r.matched
	if r.cfg.bugs.followerHWUnmatched {
		held = r.durable
	}
	if cand := min(r.leaderHW, r.durable, held); cand > r.hw {
		r.hw = cand
		r.rd.HWChanged = true
	}
	r.noteCaughtUp()
}

// noteCaughtUp: a follower whose durable log matches its leader's through
// the leader's epoch start and through the last high watermark the leader
// sent holds everything committed: the leader held all that was committed
// before its epoch when elected, and what it committed since is below its
// HW. One the state does not record (it lost its disk) tells the
// controller, which records its incarnation so that it counts again.
func (r *Replica) noteCaughtUp() {
	if r.role != RoleFollower {
		return
	}
	start := wal.Offset(-1)
	for _, e := range r.epochs {
		if e.Epoch == r.epoch {
			start = e.Start
		}
	}
	// With no batch of this epoch yet (a leader that appended no
	// epoch-start batch) the start is not known here: no proof.
	held := min(r.durable, r.matched)
	if start < 0 || held <= start || held < r.leaderHW {
		return
	}
	r.syncedEpoch = r.epoch
	if r.state.IncarnationOf(r.cfg.ID) != r.cfg.Incarnation && r.cfg.Incarnation != 0 &&
		(r.caughtUpAt == 0 || r.tick-r.caughtUpAt >= int64(r.cfg.RetryTicks)) {
		r.caughtUpAt = r.tick
		r.send(Message{Type: MsgCaughtUp, To: ControllerNode, Epoch: r.epoch, HW: r.leaderHW})
	}
}
