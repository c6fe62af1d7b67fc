package replica

// This file owns the controller's election logic for one partition: when to
// elect, the fence round at a new epoch, the choice of the winner from the
// fence answers (Raft's vote, collected by the controller), and the
// compare-and-swap that publishes it. It is pure like Replica: the driver
// feeds it the state read from etcd, the live brokers (etcd leases), fence
// answers and complaints, CAS results and ticks, and carries out its Ready.
//
// Invariant: every fence round uses an epoch above every epoch this
// controller has seen in etcd or fenced before, and above any epoch a
// replica told it it is fenced at.
// Invariant: the CAS writes Epoch = the round's epoch > the state's epoch at
// Version Expect, so epochs in etcd strictly increase and one epoch has at
// most one leader.
// Invariant: the winner acked the round's fence, and its (last epoch,
// durable end) is >= that of at least quorum-1 other replicas that acked
// it: with the winner they form a quorum whose logs it contains.
// Invariant: only a vote of an eligible replica counts, for the quorum and
// as a winner: one whose answer carries the incarnation the state records
// for it (or none is recorded), or that proves it caught up in the
// state's epoch (SyncedEpoch). A replica that lost its disk holds none of
// what it once acknowledged, so counting it could elect a log missing
// committed records; without an eligible quorum the partition stays
// leaderless (Blocked) until the lost replicas come back or an operator
// forces an unclean election (ForceUnclean).
// Invariant: a CAS records the incarnation of every eligible answer, and
// a recording CAS (MsgCaughtUp) changes nothing but one replica's
// incarnation, at the epoch the replica proved it caught up in.
// Invariant: at most one CAS is outstanding.
// Invariant: draining (SetDraining) only narrows whom pick prefers; the
// winner is still an eligible replica of a fenced quorum, so a drain can
// delay an election but never elect a log the rules above would refuse. A
// draining replica wins only when no other replica can, once every replica
// answered or half the round is gone: a drain never leaves a partition
// leaderless.
//
// A Controller is not safe for concurrent use; its owner serialises calls.

import (
	"slices"

	"github.com/sluice-mq/sluice/wal"
)

// ControllerConfig tunes a Controller. Timeouts count Ticks.
type ControllerConfig struct {
	// RetryTicks: re-send fences this often during a round.
	RetryTicks int
	// RoundTicks: give up a fence round (or a CAS without answer) after
	// this long; the next round uses a new epoch.
	RoundTicks int
	// ComplaintTicks: a LeaderUnreachable counts for this long.
	ComplaintTicks int
	// PreferredTicks: wait this long under a leader before trying to move
	// leadership back to the preferred replica; doubled after each try
	// that did not elect it.
	PreferredTicks int
	// QuietTicks: a preferred replica that failed to answer a round's
	// fences within this long is not made leader by a preferred election
	// (it may be dead with its lease not yet expired, and each try fences
	// the sitting leader for nothing). 0 means 4 x PreferredTicks;
	// negative turns the rule off.
	QuietTicks int

	bugs controllerBugs // planted bugs, set only by tests
}

type controllerBugs struct {
	winnerIgnoresUpToDate  bool // elect the preferred (or first) acker regardless of logs
	votesIgnoreIncarnation bool // count a replica that lost its disk (the rule before incarnations)
}

// Controller defaults.
const (
	DefaultRoundTicks     = 20
	DefaultComplaintTicks = 20
	DefaultPreferredTicks = 50
)

func (c ControllerConfig) withDefaults() ControllerConfig {
	if c.RetryTicks == 0 {
		c.RetryTicks = DefaultRetryTicks
	}
	if c.RoundTicks == 0 {
		c.RoundTicks = DefaultRoundTicks
	}
	if c.ComplaintTicks == 0 {
		c.ComplaintTicks = DefaultComplaintTicks
	}
	if c.PreferredTicks == 0 {
		c.PreferredTicks = DefaultPreferredTicks
	}
	if c.QuietTicks == 0 {
		c.QuietTicks = 4 * c.PreferredTicks
	}
	return c
}

// CAS asks etcd to replace the partition state at version Expect by New.
type CAS struct {
	Expect int64
	New    State
}

// ControllerReady is the work a Controller hands its driver.
type ControllerReady struct {
	Messages []Message // fences, To a replica
	CAS      *CAS      // at most one outstanding; answer with CASResult
}

type fenceAck struct {
	from      NodeID
	lastEpoch wal.Epoch
	end       wal.Offset
	inc       Incarnation
	synced    wal.Epoch // the answer's SyncedEpoch
}

type complaint struct {
	from NodeID
	at   int64
}

// Controller elects the leader of one partition.
type Controller struct {
	cfg        ControllerConfig
	state      State
	stateKnown bool
	live       []NodeID
	draining   []NodeID  // sorted: brokers an operator is draining
	maxEpoch   wal.Epoch // highest epoch seen or fenced
	tick       int64

	electing  bool
	round     wal.Epoch
	expect    int64  // state Version the round started from
	exclude   NodeID // leader not to elect unless nobody else can win
	preferred bool   // a round to move leadership to Replicas[0]
	acks      []fenceAck
	startedAt int64
	fencedAt  int64 // last fence sending

	casOut    bool
	casSentAt int64
	recording bool // the outstanding CAS records an incarnation, no election
	unclean   bool // an operator forced an unclean election: every answer counts
	// blocked: the replicas whose answers did not count in the last round
	// that had a quorum of answers but not of eligible ones; nil otherwise.
	blocked []NodeID
	owed    bool  // a round was abandoned after fencing: elect again
	retryAt int64 // no new round before this tick

	complaints  []complaint
	leaderSince int64
	prefWait    int64
	prefAt      int64
	drainWait   int64 // like prefWait, for moving a leader off a draining broker
	drainAt     int64
	// missed: when each replica last failed to answer a round's fences
	// while counted live (a broker that died keeps its lease for a while);
	// indexed like state.Replicas.
	missed []int64

	rd ControllerReady
}

// NewController starts a controller that knows nothing yet.
func NewController(cfg ControllerConfig) *Controller {
	cfg = cfg.withDefaults()
	return &Controller{cfg: cfg, exclude: NoLeader, prefWait: int64(cfg.PreferredTicks), drainWait: int64(cfg.RetryTicks)}
}

// SetState gives the state read from etcd; older versions are ignored.
func (c *Controller) SetState(s State) {
	if c.stateKnown && s.Version <= c.state.Version {
		return
	}
	if !c.stateKnown || s.Leader != c.state.Leader || s.Epoch != c.state.Epoch {
		c.leaderSince = c.tick
		c.complaints = nil
		c.blocked = nil // someone elected
	}
	c.state = s.Clone()
	c.stateKnown = true
	c.maxEpoch = max(c.maxEpoch, s.Epoch)
	if (c.casOut || c.owed) && s.Version > c.expect {
		c.casOut = false
		c.owed = false
		c.recording = false
	}
	if c.electing && s.Version != c.expect {
		c.electing = false // the state moved under the round
	}
}

// SetLive gives the brokers holding a live etcd lease.
func (c *Controller) SetLive(ids []NodeID) {
	c.live = slices.Clone(ids)
	slices.Sort(c.live)
}

// SetDraining gives the brokers an operator is draining before a stop: a
// leader among them is moved to another eligible replica, none of them is
// elected while another replica can win, and leadership does not move back
// to a draining preferred replica.
func (c *Controller) SetDraining(ids []NodeID) {
	c.draining = slices.Clone(ids)
	slices.Sort(c.draining)
}

// PreferNow makes the next tick try to move leadership back to the
// preferred replica (an operator's preferred election) instead of waiting
// out PreferredTicks and its back-off.
func (c *Controller) PreferNow() {
	c.prefWait = 0
	c.leaderSince = min(c.leaderSince, c.tick)
	c.prefAt = c.tick - 1<<30
	c.missed = nil // an operator vouches for the preferred replica
}

func (c *Controller) isDraining(id NodeID) bool {
	_, ok := slices.BinarySearch(c.draining, id)
	return ok
}

// canLeadInstead reports whether a live replica other than id, not
// draining, could take the leadership.
func (c *Controller) canLeadInstead(id NodeID) bool {
	for _, r := range c.state.Replicas {
		if r != id && c.isLive(r) && !c.isDraining(r) {
			return true
		}
	}
	return false
}

// Step takes a FenceAck, a LeaderUnreachable or a CaughtUp.
func (c *Controller) Step(m Message) {
	switch m.Type {
	case MsgFenceAck:
		c.stepFenceAck(m)
	case MsgCaughtUp:
		c.stepCaughtUp(m)
	case MsgLeaderUnreachable:
		if !c.stateKnown || m.Epoch != c.state.Epoch {
			return
		}
		if m.LastEpoch > c.state.Epoch && !c.electing && !c.casOut {
			// Fenced by a round that elected nobody (perhaps a previous
			// controller's): only a new round lets the sender serve.
			c.maxEpoch = max(c.maxEpoch, m.LastEpoch)
			c.owed = true
		}
		c.complaints = slices.DeleteFunc(c.complaints, func(x complaint) bool { return x.from == m.From })
		c.complaints = append(c.complaints, complaint{from: m.From, at: c.tick})
		c.maybeElect()
	}
}

func (c *Controller) stepFenceAck(m Message) {
	if m.Err == ErrCodeFencedLeaderEpoch {
		c.maxEpoch = max(c.maxEpoch, m.Epoch)
		if c.electing && !c.casOut && m.Epoch >= c.round {
			c.electing = false // a newer round is needed
			c.owed = true
			c.maybeElect()
		}
		return
	}
	if !c.electing || c.casOut || m.Epoch != c.round || !slices.Contains(c.state.Replicas, m.From) {
		return
	}
	c.acks = slices.DeleteFunc(c.acks, func(a fenceAck) bool { return a.from == m.From })
	c.acks = append(c.acks, fenceAck{from: m.From, lastEpoch: m.LastEpoch, end: m.Offset, inc: m.Incarnation, synced: m.SyncedEpoch})
	c.decide()
}

// stepCaughtUp records the new incarnation of a replica that lost its
// disk and has caught up with the leader of the state's epoch, so it
// counts again (in votes, and for its leader's high watermark).
func (c *Controller) stepCaughtUp(m Message) {
	s := c.state
	if !c.stateKnown || c.electing || c.casOut || c.owed || m.Epoch != s.Epoch || s.Leader == NoLeader ||
		m.Incarnation == 0 || !slices.Contains(s.Replicas, m.From) || s.IncarnationOf(m.From) == m.Incarnation {
		return // not now, stale, or already recorded; the replica repeats it
	}
	next := s.Clone()
	next.Version = s.Version + 1
	next.Incarnations = recordIncarnation(next, m.From, m.Incarnation)
	c.casOut, c.recording = true, true
	c.casSentAt = c.tick
	c.expect = s.Version
	c.rd.CAS = &CAS{Expect: s.Version, New: next}
}

// recordIncarnation returns s's incarnations with id's set to inc.
func recordIncarnation(s State, id NodeID, inc Incarnation) []Incarnation {
	incs := make([]Incarnation, len(s.Replicas))
	copy(incs, s.Incarnations)
	for i, r := range s.Replicas {
		if r == id {
			incs[i] = inc
		}
	}
	return incs
}

// ForceUnclean makes the next decision (this round's, or a new one's)
// count every answer, eligible or not: an operator's choice to bring a
// partition back whose eligible replicas are gone, accepting the loss of
// whatever only they held. It holds until an election is written.
func (c *Controller) ForceUnclean() {
	c.unclean = true
	if c.electing && !c.casOut {
		c.decide()
		return
	}
	if !c.electing && !c.casOut {
		c.owed = true
		c.retryAt = c.tick
		c.maybeElect()
	}
}

// Blocked lists the replicas whose answers did not count in the last
// round that had a quorum of answers but too few eligible ones (they lost
// their disks and have not caught up): the partition stays leaderless
// until they do, or an unclean election is forced. Nil when not blocked.
func (c *Controller) Blocked() []NodeID { return slices.Clone(c.blocked) }

// CASResult answers the outstanding CAS: applied or not, and the state now
// in etcd (when known; a zero Version means unknown).
func (c *Controller) CASResult(ok bool, current State) {
	if !c.casOut {
		return
	}
	c.casOut = false
	c.electing = false
	if current.Version > 0 {
		c.SetState(current)
	}
	if c.recording {
		c.recording = false
		return // no election was asked for; the replica repeats its notice
	}
	if ok {
		c.unclean = false
		c.owed = false
	} else {
		c.owed = true
		c.retryAt = c.tick + int64(c.cfg.RetryTicks)
	}
}

// Tick advances the controller's clock by one tick.
func (c *Controller) Tick() {
	c.tick++
	switch {
	case c.casOut:
		if c.tick-c.casSentAt > int64(c.cfg.RoundTicks) {
			c.casOut = false // no answer: a new round will CAS again
			c.electing = false
			c.owed = !c.recording
			c.recording = false
			c.retryAt = c.tick
		}
	case c.electing:
		if c.tick-c.startedAt > int64(c.cfg.RoundTicks) {
			c.electing = false
			c.owed = true
			c.retryAt = c.tick + int64(c.cfg.RetryTicks)
		} else {
			if c.tick-c.fencedAt >= int64(c.cfg.RetryTicks) {
				c.sendFences()
			}
			c.decide()
		}
	}
	c.maybeElect()
}

// HasReady reports whether Ready has work.
func (c *Controller) HasReady() bool { return len(c.rd.Messages) > 0 || c.rd.CAS != nil }

// Ready returns the pending work; then call Advance.
func (c *Controller) Ready() ControllerReady { return c.rd }

// Advance acknowledges the last Ready.
func (c *Controller) Advance() { c.rd = ControllerReady{} }

func (c *Controller) quorum() int { return len(c.state.Replicas)/2 + 1 }

func (c *Controller) isLive(id NodeID) bool {
	_, ok := slices.BinarySearch(c.live, id)
	return ok
}

// maybeElect starts a round when the partition needs a leader, or when
// leadership should go back to the preferred replica.
func (c *Controller) maybeElect() {
	if !c.stateKnown || c.electing || c.casOut || c.tick < c.retryAt || len(c.state.Replicas) == 0 {
		return
	}
	s := c.state
	c.complaints = slices.DeleteFunc(c.complaints, func(x complaint) bool {
		return c.tick-x.at > int64(c.cfg.ComplaintTicks)
	})
	resigned, followers := false, 0
	for _, x := range c.complaints {
		if x.from == s.Leader {
			resigned = true
		} else {
			followers++
		}
	}
	n := len(s.Replicas)
	switch {
	case s.Leader == NoLeader || c.owed:
		c.startRound(NoLeader, false)
	case !c.isLive(s.Leader) || resigned || followers > n-c.quorum():
		c.startRound(s.Leader, false)
	case c.isDraining(s.Leader) && c.canLeadInstead(s.Leader) && c.tick-c.drainAt >= c.drainWait:
		// Moving off a draining broker: if the round elects it again
		// (nobody else was eligible), wait twice as long before the next
		// try, as a preferred move does, so its produce is not paused by a
		// fence every round.
		c.drainAt = c.tick
		c.startRound(s.Leader, false)
	case s.Leader != s.Replicas[0] && c.isLive(s.Replicas[0]) && !c.isDraining(s.Replicas[0]) && !c.complained(s.Replicas[0]) &&
		c.tick-c.leaderSince >= c.prefWait && c.tick-c.prefAt >= c.prefWait && !c.missedRecently(0):
		c.prefAt = c.tick
		c.startRound(NoLeader, true)
	}
}

func (c *Controller) complained(id NodeID) bool {
	return slices.ContainsFunc(c.complaints, func(x complaint) bool { return x.from == id })
}

func (c *Controller) startRound(exclude NodeID, preferred bool) {
	c.maxEpoch++
	c.round = c.maxEpoch
	c.expect = c.state.Version
	c.exclude = exclude
	c.preferred = preferred
	c.acks = nil
	c.electing = true
	c.startedAt = c.tick
	c.sendFences()
}

func (c *Controller) sendFences() {
	c.fencedAt = c.tick
	for _, id := range c.state.Replicas {
		if !slices.ContainsFunc(c.acks, func(a fenceAck) bool { return a.from == id }) {
			c.rd.Messages = append(c.rd.Messages, Message{Type: MsgFence, From: ControllerNode, To: id, Epoch: c.round})
		}
	}
}

// upToDate reports whether a's log is at least b's: Raft's rule.
func upToDate(a, b fenceAck) bool {
	return a.lastEpoch > b.lastEpoch || (a.lastEpoch == b.lastEpoch && a.end >= b.end)
}

// votes reports whether a's answer counts: its incarnation is the one the
// state records (or none is), or it proves it caught up in the state's
// epoch, or an unclean election was forced.
func (c *Controller) votes(a fenceAck) bool {
	return c.unclean || c.cfg.bugs.votesIgnoreIncarnation || c.state.Counts(a.from, a.inc) ||
		(a.synced != 0 && a.synced == c.state.Epoch)
}

// voters is how many answers count.
func (c *Controller) voters() int {
	n := 0
	for _, a := range c.acks {
		if c.votes(a) {
			n++
		}
	}
	return n
}

// eligible reports whether a may win: it votes and its log is at least
// that of quorum-1 other voting replicas (in an unclean election, of every
// other answer).
func (c *Controller) eligible(a fenceAck) bool {
	if !c.votes(a) {
		return false
	}
	n := 0
	for _, b := range c.acks {
		if b.from != a.from && c.votes(b) && upToDate(a, b) {
			n++
		}
	}
	if c.unclean {
		return n == len(c.acks)-1
	}
	return n >= c.quorum()-1
}

// uncleanReady: a forced unclean round decides once every live replica
// answered, or half the round is gone, with at least one answer.
func (c *Controller) uncleanReady() bool {
	if len(c.acks) == 0 {
		return false
	}
	if c.tick-c.startedAt >= int64(c.cfg.RoundTicks/2) {
		return true
	}
	for _, id := range c.state.Replicas {
		if _, acked := c.ack(id); !acked && c.isLive(id) {
			return false
		}
	}
	return true
}

// decide picks the winner once a quorum answered, and sends the CAS.
func (c *Controller) decide() {
	if c.unclean {
		if !c.uncleanReady() {
			return
		}
	} else if len(c.acks) < c.quorum() {
		return
	} else if c.voters() < c.quorum() {
		// A quorum answered, but some lost their disks: wait for more
		// answers; the partition stays leaderless meanwhile.
		c.blocked = c.blocked[:0]
		for _, a := range c.acks {
			if !c.votes(a) {
				c.blocked = append(c.blocked, a.from)
			}
		}
		return
	}
	s := c.state
	w, ok := c.pick()
	if !ok {
		return // wait for more answers, or the round's end
	}
	c.blocked = nil
	if c.isDraining(w) {
		c.drainWait = min(2*max(c.drainWait, 1), int64(c.cfg.PreferredTicks)*16)
	} else {
		c.drainWait = int64(c.cfg.RetryTicks)
	}
	if c.preferred {
		if w == s.Replicas[0] {
			c.prefWait = int64(c.cfg.PreferredTicks)
		} else {
			c.prefWait = max(2*c.prefWait, int64(c.cfg.PreferredTicks))
		}
	}
	for i, id := range s.Replicas {
		if _, acked := c.ack(id); !acked && c.isLive(id) {
			c.noteMissed(i)
		}
	}
	next := s.Clone()
	next.Epoch, next.Leader, next.Version = c.round, w, s.Version+1
	for _, a := range c.acks {
		if a.inc != 0 && c.votes(a) {
			next.Incarnations = recordIncarnation(next, a.from, a.inc)
		}
	}
	c.casOut = true
	c.casSentAt = c.tick
	c.rd.CAS = &CAS{Expect: c.expect, New: next}
}

// pick chooses the winner among the acks: the preferred replica if
// eligible; in a preferred round otherwise the sitting leader if eligible;
// otherwise the greatest eligible log (ties to replica order). A draining
// replica is passed over in each of these. A draining replica, and then
// the excluded leader, win only when nobody else can, once every replica
// answered or half the round is gone.
func (c *Controller) pick() (NodeID, bool) {
	s := c.state
	if c.cfg.bugs.winnerIgnoresUpToDate {
		if a, ok := c.ack(s.Replicas[0]); ok {
			return a.from, true
		}
		return c.acks[0].from, true
	}
	ok := func(id NodeID, drainingToo bool) bool {
		a, found := c.ack(id)
		return found && id != c.exclude && (drainingToo || !c.isDraining(id)) && c.eligible(a)
	}
	if ok(s.Replicas[0], false) {
		return s.Replicas[0], true
	}
	if pref := s.Replicas[0]; pref != c.exclude && !c.isDraining(pref) && c.isLive(pref) && c.tick-c.startedAt < int64(max(1, c.cfg.RoundTicks/4)) {
		if _, acked := c.ack(pref); !acked {
			// The preferred replica is live and its answer is likely on
			// its way: a short wait saves moving the leadership back to
			// it right after (a new partition's first election, say).
			return NoLeader, false
		}
	}
	if c.preferred && s.Leader != NoLeader && ok(s.Leader, false) {
		return s.Leader, true
	}
	greatest := func(drainingToo bool) (NodeID, bool) {
		best, found := fenceAck{}, false
		for _, id := range s.Replicas {
			if a, _ := c.ack(id); ok(id, drainingToo) && (!found || !upToDate(best, a)) {
				best, found = a, true
			}
		}
		return best.from, found
	}
	if w, found := greatest(false); found {
		return w, true
	}
	late := c.tick-c.startedAt >= int64(c.cfg.RoundTicks/2)
	if len(c.acks) != len(s.Replicas) && !late {
		return NoLeader, false
	}
	if w, found := greatest(true); found {
		return w, true
	}
	if a, has := c.ack(c.exclude); has && c.eligible(a) {
		return a.from, true
	}
	return NoLeader, false
}

// noteMissed records that replica i (of state.Replicas) did not answer a
// round it was fenced in.
func (c *Controller) noteMissed(i int) {
	if len(c.missed) != len(c.state.Replicas) {
		c.missed = make([]int64, len(c.state.Replicas))
		for j := range c.missed {
			c.missed[j] = -1 << 62
		}
	}
	c.missed[i] = c.tick
}

// missedRecently reports whether replica i failed to answer a round within
// QuietTicks: moving the leadership to a replica that may be dead (its
// lease not yet expired) would fence the sitting leader for nothing, a
// pause of produce each time.
func (c *Controller) missedRecently(i int) bool {
	return c.cfg.QuietTicks > 0 && len(c.missed) == len(c.state.Replicas) && c.tick-c.missed[i] < int64(c.cfg.QuietTicks)
}

func (c *Controller) ack(id NodeID) (fenceAck, bool) {
	for _, a := range c.acks {
		if a.from == id {
			return a, true
		}
	}
	return fenceAck{}, false
}

// Status reports the controller's view, for tests and metrics.
func (c *Controller) Status() (s State, electing bool, round wal.Epoch) {
	return c.state.Clone(), c.electing, c.round
}
