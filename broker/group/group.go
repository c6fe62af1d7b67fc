package group

// This file owns the Group type, its configuration, the membership rules
// shared by every request, and the rebalance transitions (prepare, complete
// the join round, complete the sync round).
//
// Invariant: g.order holds exactly the keys of g.members, in join order.
// Invariant: g.static maps each instance id to the member id holding it, and
// every static member is in it.
// Invariant: a member has at most one parked JoinGroup and one parked SyncGroup.

import (
	"fmt"
	"slices"
	"time"
)

// State is a group's rebalance state.
type State int8

// The states of a classic group, named as Kafka's DescribeGroups reports them.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Generation numbers the completed join rounds of a group.
type Generation int32

// Ticket names a parked request; the caller picks a unique one per request.
type Ticket uint64

// Config bounds what members may ask for and how long offsets live.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (Kafka's group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OffsetsRetention is how long committed offsets outlive the group's last
	// member (Kafka's offsets.retention.minutes).
	OffsetsRetention time.Duration
	// NewMemberID makes a member id for a client id; it must never repeat.
	NewMemberID func(clientID string) string
}

// Defaults as in Kafka.
const (
	DefaultMinSessionTimeout = 6 * time.Second
	DefaultMaxSessionTimeout = 5 * time.Minute
	DefaultOffsetsRetention  = 7 * 24 * time.Hour
)

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout:
		return fmt.Errorf("group: session timeout bounds [%v, %v] are empty", c.MinSessionTimeout, c.MaxSessionTimeout)
	case c.OffsetsRetention <= 0:
		return fmt.Errorf("group: offsets retention %v must be positive", c.OffsetsRetention)
	case c.NewMemberID == nil:
		return fmt.Errorf("group: NewMemberID is required")
	}
	return nil
}

// Protocol is one assignment protocol a member supports, with its metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// MemberInfo describes a member to the leader and to DescribeGroups.
type MemberInfo struct {
	ID, InstanceID       string
	ClientID, ClientHost string
	// Metadata is the member's metadata for the group's selected protocol.
	Metadata   []byte
	Assignment []byte
}

type member struct {
	id, instanceID       string
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []Protocol
	assignment           []byte
	deadline             time.Time // session expiry unless a request is parked
	joinTicket           Ticket    // 0: no JoinGroup parked
	syncTicket           Ticket    // 0: no SyncGroup parked
}

// Completion answers a parked request; exactly one of Join and Sync is set.
type Completion struct {
	Ticket Ticket
	Join   *JoinResult
	Sync   *SyncResult
}

// Group is one consumer group. See doc.go for the state diagram.
type Group struct {
	id           string
	cfg          Config
	state        State
	stateSince   time.Time
	generation   Generation
	protocolType string
	protocol     string // selected protocol; "" unless CompletingRebalance or Stable
	leader       string

	members map[string]*member
	order   []string
	static  map[string]string    // instance id → member id
	pending map[string]time.Time // member ids given by MEMBER_ID_REQUIRED → deadline

	rebalanceDeadline time.Time // PreparingRebalance: complete the join round then
	syncDeadline      time.Time // CompletingRebalance: give up on the leader then

	offsets map[TopicPartition]Offset
	out     []Completion
}

// New returns an Empty group.
func New(id string, cfg Config, now time.Time) *Group {
	return &Group{
		id:         id,
		cfg:        cfg,
		stateSince: now,
		members:    make(map[string]*member),
		static:     make(map[string]string),
		pending:    make(map[string]time.Time),
		offsets:    make(map[TopicPartition]Offset),
	}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is the current state.
func (g *Group) State() State { return g.state }

// Generation is the current generation.
func (g *Group) Generation() Generation { return g.generation }

// ContinueFrom makes the group's generations go on after gen, the highest
// one a previous coordinator of the group handed out: the next rebalance
// takes gen+1. A lower gen changes nothing, so generations never go back.
func (g *Group) ContinueFrom(gen Generation) {
	if gen > g.generation {
		g.generation = gen
	}
}

// ProtocolType is the protocol type of the members ("consumer" for consumers).
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol is the selected protocol, "" while none is.
func (g *Group) Protocol() string { return g.protocol }

// Leader is the leader's member id, "" while there is none.
func (g *Group) Leader() string { return g.leader }

// Len is the number of members.
func (g *Group) Len() int { return len(g.members) }

// Members describes every member in join order. Metadata and assignment are
// filled only while the group is Stable, as Kafka's DescribeGroups does.
func (g *Group) Members() []MemberInfo {
	out := make([]MemberInfo, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		mi := MemberInfo{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if g.state == Stable {
			mi.Metadata = m.metadataFor(g.protocol)
			mi.Assignment = m.assignment
		}
		out = append(out, mi)
	}
	return out
}

// TakeCompletions returns the answers to parked requests produced since the
// last call, in order, and empties the outbox.
func (g *Group) TakeCompletions() []Completion {
	out := g.out
	g.out = nil
	return out
}

// MarkDead turns an Empty group Dead (it is being deleted).
func (g *Group) MarkDead(now time.Time) error {
	if g.state != Empty && g.state != Dead {
		return fmt.Errorf("group %q is %s: %w", g.id, g.state, ErrNotEmpty)
	}
	g.setState(Dead, now)
	clear(g.offsets)
	return nil
}

func (g *Group) setState(s State, now time.Time) {
	g.state = s
	g.stateSince = now
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// validateMember checks a request's member id and instance id against the
// group, as Kafka's ClassicGroup.validateMember does.
func (g *Group) validateMember(memberID, instanceID string) (*member, error) {
	if instanceID != "" {
		holder, ok := g.static[instanceID]
		switch {
		case !ok:
			return nil, fmt.Errorf("group %q: instance %q: %w", g.id, instanceID, ErrUnknownMember)
		case holder != memberID:
			return nil, fmt.Errorf("group %q: instance %q is held by %q, not %q: %w", g.id, instanceID, holder, memberID, ErrFencedInstance)
		}
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, fmt.Errorf("group %q: member %q: %w", g.id, memberID, ErrUnknownMember)
	}
	return m, nil
}

// supports reports whether a member with these protocols may be in the group
// (apart from the member except, which is being updated).
func (g *Group) supports(protocolType string, protocols []Protocol, except string) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	others := 0
	for _, m := range g.members {
		if m.id != except {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.allOthersSupport(p.Name, except) {
			return true
		}
	}
	return false
}

func (g *Group) allOthersSupport(name, except string) bool {
	for _, m := range g.members {
		if m.id == except {
			continue
		}
		if !slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name }) {
			return false
		}
	}
	return true
}

func (g *Group) addMember(m *member) {
	g.members[m.id] = m
	g.order = append(g.order, m.id)
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if len(g.members) == 1 {
		g.protocolType = m.protocolType
	}
}

// removeMember drops a member, answering its parked requests with err.
func (g *Group) removeMember(id string, err error) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	g.failParked(m, err)
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(x string) bool { return x == id })
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
}

func (g *Group) failParked(m *member, err error) {
	if m.joinTicket != 0 {
		g.out = append(g.out, Completion{Ticket: m.joinTicket, Join: &JoinResult{Err: err, MemberID: m.id}})
		m.joinTicket = 0
	}
	if m.syncTicket != 0 {
		g.out = append(g.out, Completion{Ticket: m.syncTicket, Sync: &SyncResult{Err: err}})
		m.syncTicket = 0
	}
}

// membersChanged reacts to a member leaving or expiring.
func (g *Group) membersChanged(now time.Time) {
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// prepareRebalance starts a join round: every member must rejoin before the
// rebalance deadline or be removed.
func (g *Group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		for _, id := range g.order {
			m := g.members[id]
			m.assignment = nil
			if m.syncTicket != 0 {
				g.out = append(g.out, Completion{Ticket: m.syncTicket, Sync: &SyncResult{Err: fmt.Errorf("group %q: %w", g.id, ErrRebalanceInProgress)}})
				m.syncTicket = 0
			}
		}
	}
	if g.state != PreparingRebalance {
		g.setState(PreparingRebalance, now)
		g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	}
	g.tryCompleteJoin(now)
}

// tryCompleteJoin ends the join round once every member and every pending
// member has rejoined.
func (g *Group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.joinTicket == 0 {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin ends the join round: members that did not rejoin are removed,
// the generation advances, a protocol and a leader are chosen and every
// parked JoinGroup is answered (the leader's with the member list).
func (g *Group) completeJoin(now time.Time) {
	for _, id := range slices.Clone(g.order) {
		if g.members[id].joinTicket == 0 {
			g.removeMember(id, fmt.Errorf("group %q: did not rejoin in time: %w", g.id, ErrUnknownMember))
		}
	}
	clear(g.pending)
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(Empty, now)
		return
	}
	g.protocol = g.selectProtocol()
	if g.leader == "" {
		g.leader = g.order[0]
	}
	g.setState(CompletingRebalance, now)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	var all []MemberInfo
	for _, id := range g.order {
		m := g.members[id]
		all = append(all, MemberInfo{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID,
			ClientHost: m.clientHost, Metadata: m.metadataFor(g.protocol)})
	}
	for _, id := range g.order {
		m := g.members[id]
		m.deadline = now.Add(m.sessionTimeout)
		res := g.joinResult(m)
		if id == g.leader {
			res.Members = all
		}
		g.out = append(g.out, Completion{Ticket: m.joinTicket, Join: &res})
		m.joinTicket = 0
	}
}

// selectProtocol picks the protocol every member supports that most members
// prefer; ties go to the earliest member's preference.
func (g *Group) selectProtocol() string {
	var candidates []string
	for _, p := range g.members[g.order[0]].protocols {
		if g.allOthersSupport(p.Name, "") {
			candidates = append(candidates, p.Name)
		}
	}
	votes := make(map[string]int)
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (g *Group) joinResult(m *member) JoinResult {
	return JoinResult{
		MemberID:     m.id,
		Generation:   g.generation,
		ProtocolType: g.protocolType,
		Protocol:     g.protocol,
		Leader:       g.leader,
	}
}

// Tick applies every deadline that has passed at now: pending member ids
// and sessions expire, the join round completes at its rebalance deadline,
// and a sync round whose leader never synced starts over.
func (g *Group) Tick(now time.Time) {
	for id, deadline := range g.pending {
		if !now.Before(deadline) {
			delete(g.pending, id)
			g.tryCompleteJoin(now)
		}
	}
	expired := false
	for _, id := range slices.Clone(g.order) {
		m := g.members[id]
		if m.joinTicket == 0 && m.syncTicket == 0 && !now.Before(m.deadline) {
			g.removeMember(id, fmt.Errorf("group %q: session of %q expired: %w", g.id, id, ErrUnknownMember))
			expired = true
		}
	}
	if expired {
		g.membersChanged(now)
	}
	switch {
	case g.state == PreparingRebalance && !now.Before(g.rebalanceDeadline):
		g.completeJoin(now)
	case g.state == CompletingRebalance && !now.Before(g.syncDeadline):
		for _, id := range slices.Clone(g.order) {
			if g.members[id].syncTicket == 0 {
				g.removeMember(id, fmt.Errorf("group %q: %q did not sync in time: %w", g.id, id, ErrUnknownMember))
			}
		}
		g.prepareRebalance(now)
	}
}
