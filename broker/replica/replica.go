package replica

// This file owns the Replica type: its configuration, the partition state it
// learns from etcd and the role that state gives it, ticks, fences, and the
// Ready/Advance hand-off to its driver. leader.go and follower.go hold the
// two roles' halves of replication.
//
// Invariant: r.fenced >= r.hs.Fenced; r.hs is what the driver reported
// durable, r.fenced what this replica has promised (the durable value once
// the pending HardState lands).
// Invariant: the replica leads or follows only an epoch e with
// e == r.fenced (nothing newer promised) and r.hs.Fenced >= e (durable), and
// it never leads an epoch it recovered with (r.recovered): a leader that
// crashed may have served records it then lost.
// Invariant: a FenceAck for e leaves only once HardState{Fenced >= e} is
// durable, and reports the durable log (its end and last epoch).
// Invariant: r.hw never decreases; r.durable <= r.end.
// Invariant: appends carry non-decreasing epochs, none below r.fenced when
// created or accepted by this replica.
//
// A Replica is not safe for concurrent use: the partition's owner goroutine
// (or the simulator) serialises every call. It does no I/O, starts no
// goroutine and reads no clock.

import (
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/wal"
)

// Config tunes a Replica. Timeouts count Ticks.
type Config struct {
	ID NodeID
	// MinISR: in-sync replicas (leader included) needed to accept a write
	// and durable copies (leader included) an acks=all reply waits for; 0
	// or less than a majority means a majority. The high watermark, what
	// readers see and every election keeps, needs a majority whatever
	// MinISR is.
	MinISR int
	// LagTicks: a follower is in sync while it fetched within this many ticks.
	LagTicks int
	// FetchWaitTicks: how long the leader holds a fetch at its log end.
	FetchWaitTicks int
	// RetryTicks: pause before re-sending a fetch after an error, and
	// between repeated notices to the controller.
	RetryTicks int
	// UnreachableTicks: a follower that got no good answer from its leader
	// for this long tells the controller.
	UnreachableTicks int
	// ElideEpochStart: a new leader whose whole log is known committed
	// (its high watermark is at its end, as in a new partition) appends no
	// epoch-start batch, so a new partition's first record is at offset 0.
	// The commit rule is unchanged: the high watermark passes only records
	// of the leader's own epoch.
	ElideEpochStart bool
	// Incarnation of the data directory the log lives in (State.Incarnations):
	// stamped on every message, so the controller and the leader can tell
	// a replica that lost its disk from the one they counted on.
	Incarnation Incarnation

	bugs bugs // planted bugs, set only by tests
}

// bugs are deliberate faults the simulator's checker must catch.
type bugs struct {
	hwIgnoresEpochStart bool // commit before the epoch-start batch is on a quorum
	acksOnQuorum        bool // release acks=all at the majority's HW, not minISR's
	skipDivergence      bool // serve a diverging follower without truncating it
	ackFenceEarly       bool // answer a fence before it is durable
	followerHWUnmatched bool // adopt the leader's HW from any answer, past the matched prefix
	serveBelowLogStart  bool // serve (and count in sync) a fetch below the log start
}

// Defaults for a zero Config field.
const (
	DefaultLagTicks         = 10
	DefaultFetchWaitTicks   = 5
	DefaultRetryTicks       = 2
	DefaultUnreachableTicks = 10
)

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.LagTicks, DefaultLagTicks)
	def(&c.FetchWaitTicks, DefaultFetchWaitTicks)
	def(&c.RetryTicks, DefaultRetryTicks)
	def(&c.UnreachableTicks, DefaultUnreachableTicks)
	return c
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	if c.ID < 0 {
		return fmt.Errorf("replica: node id %d is negative", c.ID)
	}
	if c.MinISR < 0 || c.LagTicks < 0 || c.FetchWaitTicks < 0 || c.RetryTicks < 0 || c.UnreachableTicks < 0 {
		return fmt.Errorf("replica: negative setting in %+v", c)
	}
	return nil
}

// waiter is a parked produce reply.
type waiter struct {
	end     wal.Offset
	token   Token
	acksAll bool
	// lowWatermark: released when the low watermark reaches end
	// (WaitLowWatermark), not the high watermark.
	lowWatermark bool
}

// Replica is the replication core of one partition on one broker.
type Replica struct {
	cfg Config
	err error // sticky storage failure

	hs        HardState // durable
	fenced    wal.Epoch // promised
	recovered wal.Epoch // never led by this incarnation

	epochs  []EpochEntry // of the whole log, durable or not
	end     wal.Offset
	durable wal.Offset
	hw      wal.Offset

	state      State // newest by Version
	stateKnown bool
	role       Role
	epoch      wal.Epoch // led or followed
	leader     NodeID
	tick       int64

	ackEpoch    wal.Epoch // fence to answer once durable; 0 none
	resignEpoch wal.Epoch // named leader of an epoch it cannot lead; 0 none
	resignAt    int64
	idleSince   int64 // tick the replica last lost its role
	// syncedEpoch: the last epoch whose leader's high watermark, past the
	// epoch's start, this incarnation held durably (MsgCaughtUp).
	syncedEpoch wal.Epoch
	caughtUpAt  int64 // last MsgCaughtUp sent

	leaderState
	followerState

	waiters  []waiter
	lowWaits int // waiters with lowWatermark set
	rd       Ready

	logStart   wal.Offset // the log's start, as the driver reported it (SetLogStart)
	fetchStart wal.Offset // the lowest offset a follower may fetch from
}

// New starts a replica on a recovered, synced log: its hard state, epoch
// chain, end offset, and a high watermark known to be committed (clamped to
// end). It serves nothing until SetState names its role.
func New(cfg Config, hs HardState, epochs []EpochEntry, end, hw wal.Offset) *Replica {
	r := &Replica{
		cfg:       cfg.withDefaults(),
		hs:        hs,
		fenced:    hs.Fenced,
		recovered: hs.Fenced,
		epochs:    slices.Clone(truncateChain(epochs, end)),
		end:       end,
		durable:   end,
		hw:        min(hw, end),
		leader:    NoLeader,
		rd:        Ready{Truncate: -1},
	}
	return r
}

// SetState gives the partition state read from etcd. Stale or repeated
// states (Version not above the last one) are ignored.
func (r *Replica) SetState(s State) {
	if r.stateKnown && s.Version <= r.state.Version {
		return
	}
	old := r.state
	r.state = s.Clone()
	r.stateKnown = true
	r.recount(old)
	r.applyState()
}

// applyState takes the role the known state gives, if the promises allow.
func (r *Replica) applyState() {
	if r.err != nil || !r.stateKnown {
		return
	}
	s := r.state
	me := r.cfg.ID
	r.resignEpoch = 0
	switch {
	case !slices.Contains(s.Replicas, me) || s.Leader == NoLeader || s.Epoch < r.fenced:
		// Not ours, leaderless, or a newer election is under way.
		r.stepDown()
	case s.Leader == me:
		if r.role == RoleLeader && r.epoch == s.Epoch {
			return
		}
		r.stepDown()
		switch {
		case s.Epoch <= r.recovered || s.Epoch > r.fenced || !s.Counts(me, r.cfg.Incarnation):
			// Led (perhaps) before a restart, named without a fence
			// answer, or elected for a disk this replica no longer has
			// (its answer came from the incarnation the state records):
			// let the controller elect again.
			r.resignEpoch = s.Epoch
			r.resignAt = r.tick
			r.sendResign()
		case r.hs.Fenced >= s.Epoch:
			r.becomeLeader(s.Epoch)
		}
		// Otherwise the fence is not durable yet; HardStateDurable retries.
	default:
		if r.role == RoleFollower && r.epoch == s.Epoch && r.leader == s.Leader {
			return
		}
		r.stepDown()
		r.becomeFollower(s.Epoch, s.Leader)
	}
}

// stepDown leaves the current role; a leader fails its parked replies.
func (r *Replica) stepDown() {
	if r.role == RoleLeader {
		r.failWaiters(ErrNotLeader)
		r.peers = nil
	}
	if r.role != RoleNone {
		r.idleSince = r.tick
	}
	r.role = RoleNone
	r.leader = NoLeader
	r.fetchOut = false
}

func (r *Replica) failWaiters(err error) {
	for _, w := range r.waiters {
		r.rd.Failed = append(r.rd.Failed, TokenErr{Token: w.token, Err: err})
	}
	r.waiters = nil
	r.lowWaits = 0
}

func (r *Replica) sendResign() {
	r.send(Message{Type: MsgLeaderUnreachable, To: ControllerNode, Epoch: r.resignEpoch, LastEpoch: r.fenced})
}

// Step hands the replica one network message.
func (r *Replica) Step(m Message) {
	if r.err != nil {
		return
	}
	switch m.Type {
	case MsgFence:
		r.stepFence(m)
	case MsgFetch:
		r.stepFetch(m)
	case MsgFetchResp:
		r.stepFetchResp(m)
	case MsgState:
		r.SetState(m.State)
	}
}

// stepFence promises m.Epoch: persist it, stop the lower epoch's role, and
// answer once durable.
func (r *Replica) stepFence(m Message) {
	switch {
	case m.Epoch < r.fenced:
		r.send(Message{Type: MsgFenceAck, To: ControllerNode, Epoch: r.fenced, Err: ErrCodeFencedLeaderEpoch})
		return
	case m.Epoch > r.fenced:
		r.fenced = m.Epoch
		r.rd.HardState = &HardState{Fenced: m.Epoch}
		if r.role != RoleNone && r.epoch < m.Epoch {
			r.stepDown()
		}
		r.resignEpoch = 0
	}
	r.ackEpoch = m.Epoch
	if r.hs.Fenced >= m.Epoch || r.cfg.bugs.ackFenceEarly {
		r.sendFenceAck()
	}
}

func (r *Replica) sendFenceAck() {
	r.send(Message{
		Type:      MsgFenceAck,
		To:        ControllerNode,
		Epoch:     r.ackEpoch,
		LastEpoch: epochBelow(r.epochs, r.durable),
		Offset:    r.durable,
		// Proof of catching up, for a replica the state does not record.
		SyncedEpoch: r.syncedEpoch,
	})
	r.ackEpoch = 0
}

// Tick advances the replica's clock by one tick.
func (r *Replica) Tick() {
	r.tick++
	if r.err != nil {
		return
	}
	switch r.role {
	case RoleLeader:
		r.leaderTick()
	case RoleFollower:
		r.followerTick()
	}
	if r.resignEpoch != 0 && r.tick-r.resignAt >= int64(r.cfg.RetryTicks) {
		r.resignAt = r.tick
		r.sendResign()
	}
	r.idleTick()
}

// idleTick: a replica of a partition that has a leader but left without a
// role for UnreachableTicks (fenced by a round that elected nobody, say)
// tells the controller, which elects again once enough replicas say so.
func (r *Replica) idleTick() {
	s := r.state
	if r.role != RoleNone || !r.stateKnown || s.Leader == NoLeader || !slices.Contains(s.Replicas, r.cfg.ID) {
		return
	}
	if r.tick-r.idleSince >= int64(r.cfg.UnreachableTicks) && r.tick-r.resignAt >= int64(r.cfg.RetryTicks) {
		r.resignAt = r.tick
		r.send(Message{Type: MsgLeaderUnreachable, To: ControllerNode, Epoch: s.Epoch, LastEpoch: r.fenced})
	}
}

// Durable reports that the driver's log is durable up to end.
func (r *Replica) Durable(end wal.Offset) {
	if r.err != nil {
		return
	}
	end = min(end, r.end)
	if end <= r.durable {
		return
	}
	r.durable = end
	switch r.role {
	case RoleLeader:
		r.commit()
		r.releaseWaiters()
	case RoleFollower:
		r.followerHW()
		r.maybeFetch()
	}
}

// HardStateDurable reports that hs is durable.
func (r *Replica) HardStateDurable(hs HardState) {
	if r.err != nil || hs.Fenced <= r.hs.Fenced {
		return
	}
	r.hs = hs
	if r.ackEpoch != 0 && r.hs.Fenced >= r.ackEpoch {
		r.sendFenceAck()
	}
	r.applyState()
	r.maybeFetch()
}

// Fail stops the replica after a storage failure: parked replies fail with
// err and nothing more is done until the driver reopens it with New.
func (r *Replica) Fail(err error) {
	if r.err != nil {
		return
	}
	r.err = fmt.Errorf("replica: storage failed: %w", err)
	r.failWaiters(r.err)
	r.role = RoleNone
	r.peers = nil
	r.fetchOut = false
}

// HasReady reports whether Ready has work.
func (r *Replica) HasReady() bool {
	rd := &r.rd
	return rd.Truncate >= 0 || rd.HardState != nil || len(rd.Appends) > 0 || len(rd.Messages) > 0 ||
		rd.HWChanged || len(rd.Released) > 0 || len(rd.Failed) > 0
}

// Ready returns the pending work; the driver does it and calls Advance
// before any other call.
func (r *Replica) Ready() Ready {
	rd := r.rd
	rd.HW = r.hw
	return rd
}

// Advance acknowledges the last Ready.
func (r *Replica) Advance() { r.rd = Ready{Truncate: -1} }

// SetMinISR changes Config.MinISR (min.insync.replicas altered at run
// time). A higher value refuses the next Propose while too few replicas are
// in sync and holds acks=all replies to the stricter rule; a lower one may
// release at once what the followers already hold.
func (r *Replica) SetMinISR(n int) {
	r.cfg.MinISR = max(n, 0)
	if r.err == nil && r.role == RoleLeader {
		r.commit()
	}
}

// Status returns a snapshot for Metadata.
func (r *Replica) Status() Status {
	st := Status{
		Role: r.role, Epoch: r.epoch, Leader: r.leader, Fenced: r.fenced,
		HW: r.hw, End: r.end, Durable: r.durable, Err: r.err,
	}
	if r.role == RoleLeader {
		st.InSync = r.inSync()
	}
	return st
}

// EndOffsetForEpoch serves OffsetForLeaderEpoch (KIP-320): the largest
// epoch <= e in this log and the offset where it ends.
func (r *Replica) EndOffsetForEpoch(e wal.Epoch) (wal.Epoch, wal.Offset) {
	return endOffsetForEpoch(r.epochs, r.end, e)
}

func (r *Replica) send(m Message) {
	m.From = r.cfg.ID
	m.Incarnation = r.cfg.Incarnation
	r.rd.Messages = append(r.rd.Messages, m)
}

// quorum is a majority of the replicas.
func (r *Replica) quorum() int { return len(r.state.Replicas)/2 + 1 }

// minISR is the in-sync count needed to accept a write and the durable
// count an acks=all reply waits for.
func (r *Replica) minISR() int { return max(r.cfg.MinISR, r.quorum()) }

// appendLocal appends b at the log end.
func (r *Replica) appendLocal(b Batch) bool {
	if b.Base != r.end {
		return false
	}
	c, ok := extendChain(r.epochs, b)
	if !ok {
		return false
	}
	r.epochs = c
	r.end = b.End()
	r.rd.Appends = append(r.rd.Appends, b)
	return true
}
