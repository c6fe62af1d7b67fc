package group

// This file owns the member requests: JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup, following Kafka's classic group coordinator.
//
// Invariant: every request that names a member refreshes that member's
// session deadline only after it has been validated.

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// JoinRequest is one JoinGroup.
type JoinRequest struct {
	MemberID, InstanceID string
	ClientID, ClientHost string
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	ProtocolType         string
	Protocols            []Protocol
	// RequireKnownMemberID: a new dynamic member first gets ErrMemberIDRequired
	// with an id to rejoin with (JoinGroup v4+).
	RequireKnownMemberID bool
}

// JoinResult answers a JoinGroup. Members is set only for the leader.
type JoinResult struct {
	Err          error
	MemberID     string
	Generation   Generation
	ProtocolType string
	Protocol     string
	Leader       string
	Members      []MemberInfo
}

// SyncRequest is one SyncGroup. Assignments are read only from the leader.
type SyncRequest struct {
	MemberID, InstanceID string
	Generation           Generation
	// ProtocolType and Protocol, when not empty, must match the group's (v5+).
	ProtocolType, Protocol string
	Assignments            map[string][]byte
}

// SyncResult answers a SyncGroup.
type SyncResult struct {
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Join handles a JoinGroup. It answers at once (parked false), or parks the
// request under ticket and answers through TakeCompletions (parked true); in
// that case the answer may already be in the outbox.
func (g *Group) Join(now time.Time, ticket Ticket, req JoinRequest) (res JoinResult, parked bool) {
	fail := func(err error) (JoinResult, bool) {
		return JoinResult{Err: fmt.Errorf("group %q: join: %w", g.id, err), MemberID: req.MemberID}, false
	}
	switch {
	case g.state == Dead:
		return fail(ErrDead)
	case req.SessionTimeout < g.cfg.MinSessionTimeout || req.SessionTimeout > g.cfg.MaxSessionTimeout:
		return fail(fmt.Errorf("%v outside [%v, %v]: %w", req.SessionTimeout, g.cfg.MinSessionTimeout, g.cfg.MaxSessionTimeout, ErrInvalidSessionTimeout))
	case !g.supports(req.ProtocolType, req.Protocols, req.MemberID):
		return fail(fmt.Errorf("protocol type %q with %d protocols: %w", req.ProtocolType, len(req.Protocols), ErrInconsistentProtocol))
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout // JoinGroup v0 has none
	}
	if req.MemberID == "" {
		return g.joinUnknown(now, ticket, req)
	}
	if _, ok := g.pending[req.MemberID]; ok && req.InstanceID == "" {
		delete(g.pending, req.MemberID)
		g.addMember(newMember(req.MemberID, req))
		return g.parkJoin(now, ticket, req.MemberID)
	}
	m, err := g.validateMember(req.MemberID, req.InstanceID)
	if err != nil {
		return fail(err)
	}
	return g.rejoin(now, ticket, m, req)
}

func newMember(id string, req JoinRequest) *member {
	m := &member{id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost}
	m.update(req)
	return m
}

func (m *member) update(req JoinRequest) {
	m.sessionTimeout = req.SessionTimeout
	m.rebalanceTimeout = req.RebalanceTimeout
	m.protocolType = req.ProtocolType
	m.protocols = slices.Clone(req.Protocols)
}

// sameProtocols reports whether a rejoin changes nothing the leader uses.
func (m *member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// joinUnknown handles a JoinGroup without a member id.
func (g *Group) joinUnknown(now time.Time, ticket Ticket, req JoinRequest) (JoinResult, bool) {
	id := g.cfg.NewMemberID(req.ClientID)
	if req.InstanceID != "" {
		if old, ok := g.static[req.InstanceID]; ok {
			return g.replaceStatic(now, ticket, g.members[old], id, req)
		}
		g.addMember(newMember(id, req))
		return g.parkJoin(now, ticket, id)
	}
	if req.RequireKnownMemberID {
		g.pending[id] = now.Add(req.SessionTimeout)
		return JoinResult{Err: fmt.Errorf("group %q: join: %w", g.id, ErrMemberIDRequired), MemberID: id}, false
	}
	g.addMember(newMember(id, req))
	return g.parkJoin(now, ticket, id)
}

// replaceStatic gives a static member's instance id to a new member id; the
// old id is fenced from now on.
func (g *Group) replaceStatic(now time.Time, ticket Ticket, old *member, id string, req JoinRequest) (JoinResult, bool) {
	g.failParked(old, fmt.Errorf("group %q: instance %q rejoined as %q: %w", g.id, req.InstanceID, id, ErrFencedInstance))
	m := *old
	m.id = id
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	changed := !m.sameProtocols(req.Protocols)
	m.update(req)
	delete(g.members, old.id)
	g.members[id] = &m
	g.order[slices.Index(g.order, old.id)] = id
	g.static[req.InstanceID] = id
	wasLeader := g.leader == old.id
	if wasLeader {
		g.leader = id
	}
	if g.state == Stable && !changed && !wasLeader {
		// Nothing the leader assigned from changed: keep the assignment.
		m.deadline = now.Add(m.sessionTimeout)
		return g.joinResult(&m), false
	}
	return g.parkJoin(now, ticket, id)
}

// rejoin handles a JoinGroup from a known member.
func (g *Group) rejoin(now time.Time, ticket Ticket, m *member, req JoinRequest) (JoinResult, bool) {
	switch g.state {
	case PreparingRebalance:
		m.update(req)
		return g.parkJoin(now, ticket, m.id)
	case CompletingRebalance, Stable:
		if m.sameProtocols(req.Protocols) && (g.state == CompletingRebalance || m.id != g.leader) {
			// A retry of a join whose answer was lost: answer it again.
			m.deadline = now.Add(m.sessionTimeout)
			res := g.joinResult(m)
			if m.id == g.leader {
				for _, mi := range g.Members() {
					mi.Metadata = g.members[mi.ID].metadataFor(g.protocol)
					mi.Assignment = nil
					res.Members = append(res.Members, mi)
				}
			}
			return res, false
		}
		m.update(req)
		return g.parkJoin(now, ticket, m.id)
	}
	return JoinResult{Err: fmt.Errorf("group %q is %s: %w", g.id, g.state, ErrUnknownMember), MemberID: m.id}, false
}

// parkJoin parks the member's join (replacing an older one) and moves the
// group into or along a rebalance.
func (g *Group) parkJoin(now time.Time, ticket Ticket, id string) (JoinResult, bool) {
	m := g.members[id]
	if m.joinTicket != 0 {
		g.out = append(g.out, Completion{Ticket: m.joinTicket, Join: &JoinResult{
			Err: fmt.Errorf("group %q: replaced by a newer join: %w", g.id, ErrRebalanceInProgress), MemberID: id}})
	}
	m.joinTicket = ticket
	g.prepareRebalance(now)
	return JoinResult{}, true
}

// Sync handles a SyncGroup, answering at once or parking it under ticket
// until the leader's assignment arrives.
func (g *Group) Sync(now time.Time, ticket Ticket, req SyncRequest) (res SyncResult, parked bool) {
	fail := func(err error) (SyncResult, bool) {
		return SyncResult{Err: fmt.Errorf("group %q: sync: %w", g.id, err)}, false
	}
	if g.state == Dead {
		return fail(ErrDead)
	}
	m, err := g.validateMember(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
		return fail(err)
	case req.Generation != g.generation:
		return fail(fmt.Errorf("generation %d, group is at %d: %w", req.Generation, g.generation, ErrIllegalGeneration))
	case req.ProtocolType != "" && req.ProtocolType != g.protocolType,
		req.Protocol != "" && req.Protocol != g.protocol:
		return fail(fmt.Errorf("protocol %s/%s, group uses %s/%s: %w", req.ProtocolType, req.Protocol, g.protocolType, g.protocol, ErrInconsistentProtocol))
	}
	switch g.state {
	case PreparingRebalance:
		return fail(ErrRebalanceInProgress)
	case Stable:
		m.deadline = now.Add(m.sessionTimeout)
		return g.syncResult(m), false
	case CompletingRebalance:
		m.deadline = now.Add(m.sessionTimeout)
		if m.syncTicket != 0 {
			g.out = append(g.out, Completion{Ticket: m.syncTicket, Sync: &SyncResult{
				Err: fmt.Errorf("group %q: replaced by a newer sync: %w", g.id, ErrRebalanceInProgress)}})
		}
		m.syncTicket = 0
		if m.id == g.leader {
			g.completeSync(now, req.Assignments)
			return g.syncResult(m), false
		}
		m.syncTicket = ticket
		return SyncResult{}, true
	}
	return fail(ErrUnknownMember)
}

func (g *Group) syncResult(m *member) SyncResult {
	return SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}
}

// completeSync stores the leader's assignment, makes the group Stable and
// answers every parked SyncGroup.
func (g *Group) completeSync(now time.Time, assignments map[string][]byte) {
	g.setState(Stable, now)
	for _, id := range g.order {
		m := g.members[id]
		m.assignment = assignments[id]
		if m.syncTicket != 0 {
			res := g.syncResult(m)
			g.out = append(g.out, Completion{Ticket: m.syncTicket, Sync: &res})
			m.syncTicket = 0
		}
	}
}

// Heartbeat handles a Heartbeat: nil, or why the member must act.
func (g *Group) Heartbeat(now time.Time, memberID, instanceID string, gen Generation) error {
	if g.state == Dead {
		return fmt.Errorf("group %q: heartbeat: %w", g.id, ErrDead)
	}
	if g.state == Empty {
		return fmt.Errorf("group %q: heartbeat: group is empty: %w", g.id, ErrUnknownMember)
	}
	m, err := g.validateMember(memberID, instanceID)
	if err != nil {
		return fmt.Errorf("group %q: heartbeat: %w", g.id, err)
	}
	if gen != g.generation {
		return fmt.Errorf("group %q: heartbeat: generation %d, group is at %d: %w", g.id, gen, g.generation, ErrIllegalGeneration)
	}
	m.deadline = now.Add(m.sessionTimeout)
	if g.state == PreparingRebalance {
		return fmt.Errorf("group %q: heartbeat: %w", g.id, ErrRebalanceInProgress)
	}
	return nil
}

// Leave removes a member (by member id, or by instance id for a static
// member) and rebalances the rest.
func (g *Group) Leave(now time.Time, memberID, instanceID string) error {
	if g.state == Dead {
		return fmt.Errorf("group %q: leave: %w", g.id, ErrDead)
	}
	if instanceID == "" {
		if _, ok := g.pending[memberID]; ok {
			delete(g.pending, memberID)
			g.tryCompleteJoin(now)
			return nil
		}
	}
	if instanceID != "" && memberID == "" {
		// LeaveGroup v3+ may name a static member by its instance id alone.
		memberID = g.static[instanceID]
	}
	m, err := g.validateMember(memberID, instanceID)
	if err != nil {
		return fmt.Errorf("group %q: leave: %w", g.id, err)
	}
	g.removeMember(m.id, fmt.Errorf("group %q: %q left: %w", g.id, m.id, ErrUnknownMember))
	g.membersChanged(now)
	return nil
}
