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
// Invariant: at most one CAS is outstanding.
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
	winnerIgnoresUpToDate bool // elect the preferred (or first) acker regardless of logs
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
	owed      bool  // a round was abandoned after fencing: elect again
	retryAt   int64 // no new round before this tick

	complaints  []complaint
	leaderSince int64
	prefWait    int64
	prefAt      int64
	// missed: when each replica last failed to answer a round's fences
	// while counted live (a broker that died keeps its lease for a while);
	// indexed like state.Replicas.
	missed []int64

	rd ControllerReady
}

// NewController starts a controller that knows nothing yet.
func NewController(cfg ControllerConfig) *Controller {
	cfg = cfg.withDefaults()
	return &Controller{cfg: cfg, exclude: NoLeader, prefWait: int64(cfg.PreferredTicks)}
}

// SetState gives the state read from etcd; older versions are ignored.
func (c *Controller) SetState(s State) {
	if c.stateKnown && s.Version <= c.state.Version {
		return
	}
	if !c.stateKnown || s.Leader != c.state.Leader || s.Epoch != c.state.Epoch {
		c.leaderSince = c.tick
		c.complaints = nil
	}
	c.state = s.Clone()
	c.stateKnown = true
	c.maxEpoch = max(c.maxEpoch, s.Epoch)
	if (c.casOut || c.owed) && s.Version > c.expect {
		c.casOut = false
		c.owed = false
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

// Step takes a FenceAck or a LeaderUnreachable.
func (c *Controller) Step(m Message) {
	switch m.Type {
	case MsgFenceAck:
		c.stepFenceAck(m)
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
	c.acks = append(c.acks, fenceAck{from: m.From, lastEpoch: m.LastEpoch, end: m.Offset})
	c.decide()
}

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
	if ok {
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
			c.owed = true
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
	case s.Leader != s.Replicas[0] && c.isLive(s.Replicas[0]) && !c.complained(s.Replicas[0]) &&
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

// eligible reports whether a may win: its log is at least that of quorum-1
// other acking replicas.
func (c *Controller) eligible(a fenceAck) bool {
	n := 0
	for _, b := range c.acks {
		if b.from != a.from && upToDate(a, b) {
			n++
		}
	}
	return n >= c.quorum()-1
}

// decide picks the winner once a quorum answered, and sends the CAS.
func (c *Controller) decide() {
	if len(c.acks) < c.quorum() {
		return
	}
	s := c.state
	w, ok := c.pick()
	if !ok {
		return // wait for more answers, or the round's end
	}
	if c.preferred {
		if w == s.Replicas[0] {
			c.prefWait = int64(c.cfg.PreferredTicks)
		} else {
			c.prefWait *= 2
		}
	}
	for i, id := range s.Replicas {
		if _, acked := c.ack(id); !acked && c.isLive(id) {
			c.noteMissed(i)
		}
	}
	next := s.Clone()
	next.Epoch, next.Leader, next.Version = c.round, w, s.Version+1
	c.casOut = true
	c.casSentAt = c.tick
	c.rd.CAS = &CAS{Expect: c.expect, New: next}
}

// pick chooses the winner among the acks: the preferred replica if
// eligible; in a preferred round otherwise the sitting leader if eligible;
// otherwise the greatest eligible log (ties to replica order). The excluded
// leader wins only when nobody else can, once every replica answered or
// half the round is gone.
func (c *Controller) pick() (NodeID, bool) {
	s := c.state
	if c.cfg.bugs.winnerIgnoresUpToDate {
		if a, ok := c.ack(s.Replicas[0]); ok {
			return a.from, true
		}
		return c.acks[0].from, true
	}
	ok := func(id NodeID) bool {
		a, found := c.ack(id)
		return found && id != c.exclude && c.eligible(a)
	}
	if ok(s.Replicas[0]) {
		return s.Replicas[0], true
	}
	if pref := s.Replicas[0]; pref != c.exclude && c.isLive(pref) && c.tick-c.startedAt < int64(max(1, c.cfg.RoundTicks/4)) {
		if _, acked := c.ack(pref); !acked {
			// The preferred replica is live and its answer is likely on
			// its way: a short wait saves moving the leadership back to
			// it right after (a new partition's first election, say).
			return NoLeader, false
		}
	}
	if c.preferred && s.Leader != NoLeader && ok(s.Leader) {
		return s.Leader, true
	}
	best, found := fenceAck{}, false
	for _, id := range s.Replicas {
		if a, _ := c.ack(id); ok(id) && (!found || !upToDate(best, a)) {
			best, found = a, true
		}
	}
	if found {
		return best.from, true
	}
	late := c.tick-c.startedAt >= int64(c.cfg.RoundTicks/2)
	if a, has := c.ack(c.exclude); has && (len(c.acks) == len(s.Replicas) || late) && c.eligible(a) {
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
