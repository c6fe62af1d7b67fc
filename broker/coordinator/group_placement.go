package coordinator

// This file owns which broker coordinates which consumer group, and this
// broker's tenure over the groups it coordinates.
//
// Placement is rendezvous (highest-random-weight) hashing of (group id,
// node id) over the live brokers (b.brokers(), from the etcd registry
// watch): every broker computes the same coordinator from the same view,
// and when a broker leaves only its own groups move. A lone broker
// coordinates every group.
//
// Tenure: before it serves a group, the coordinator takes the group's etcd
// claim (meta.ClaimGroup: <prefix>group-claims/<tenant>/<group>, bound to
// this broker's registration lease) and only then reads the group's
// committed offsets and its last generation (meta.GroupGeneration: the
// group's generations go on from there, and each new one is stored before a
// member learns it, coordinator.go's deliver); every write it makes for the
// group (offset commits, generations, deletes) is conditioned on that claim
// (meta.GroupClaim.If). A claim still
// held by another broker (a deposed coordinator that has not let go yet)
// answers COORDINATOR_LOAD_IN_PROGRESS until it is free. When the placement
// moves a group away, or a fenced write shows the claim is gone, the group is
// released: its runner leaves the map, its parked requests end with
// NOT_COORDINATOR, and the claim is deleted (or has expired with the lease).
//
// Invariant: an offset write for a group succeeds only while this broker
// holds the claim it read the group's offsets under, so two brokers that
// both believe they coordinate a group cannot both commit, and a new
// coordinator's offsets include every commit its predecessor acknowledged.
// Invariant: a groupRunner serves requests only between a successful claim
// (claim.Revision != 0) and its release; a released runner never serves again.
//
// The placement loop (placeLoop) is owned by the coordinator: started in
// startCoordinator, stopped and waited for in stopCoordinator. It acts on a
// runner only under that runner's lock.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

var (
	// ErrNotCoordinator: the group is placed on another broker, or this
	// broker's claim on it is gone. Clients look the coordinator up again.
	ErrNotCoordinator = fmt.Errorf("this broker is not the group's coordinator: %w", kerr.NotCoordinator)
	// ErrCoordinatorLoading: the group is placed here but its claim is still
	// held elsewhere, or this broker has not registered yet. Clients retry.
	ErrCoordinatorLoading = fmt.Errorf("this broker is taking the group over: %w", kerr.CoordinatorLoadInProgress)
)

// rendezvousScore is the weight of node for groupID; the highest wins.
func rendezvousScore(groupID string, node int32) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(groupID))
	x := h.Sum64() ^ (uint64(uint32(node)) * 0x9e3779b97f4a7c15)
	// splitmix64's finaliser: FNV alone mixes the node id in too weakly.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// PlaceGroup picks the coordinator of groupID among brokers: the highest
// rendezvous score, ties to the lower node id. false if brokers is empty.
func PlaceGroup(groupID string, brokers []meta.BrokerInfo) (meta.BrokerInfo, bool) {
	var best meta.BrokerInfo
	var bestScore uint64
	found := false
	for _, bi := range brokers {
		s := rendezvousScore(groupID, bi.NodeID)
		if !found || s > bestScore || (s == bestScore && bi.NodeID < best.NodeID) {
			best, bestScore, found = bi, s, true
		}
	}
	return best, found
}

// checkPlacement fails with ErrNotCoordinator unless groupID is placed here.
func (c *Coordinator) checkPlacement(groupID string) error {
	if co := c.cluster.GroupCoordinator(groupID); co.NodeID != c.nodeID {
		return fmt.Errorf("group %q is coordinated by node %d: %w", groupID, co.NodeID, ErrNotCoordinator)
	}
	return nil
}

// acquire makes gr servable: it takes the group's claim and loads the
// group's committed offsets (read after the claim, so no commit of a
// predecessor is missed). gr.mu is held; gr is fresh (never served).
func (c *Coordinator) acquire(ctx context.Context, gr *groupRunner) error {
	id := gr.g.ID()
	if err := c.checkPlacement(id); err != nil {
		return err
	}
	reg, ok := c.cluster.Registration()
	if !ok {
		return fmt.Errorf("group %q: not registered yet: %w", id, ErrCoordinatorLoading)
	}
	wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	claim, err := c.store.ClaimGroup(wctx, c.cfg.Tenant, id, c.nodeID, reg.Info().Lease)
	if errors.Is(err, meta.ErrGroupClaimed) {
		return fmt.Errorf("group %q: %w: %w", id, ErrCoordinatorLoading, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", node.ErrCoordinatorUnavailable, err)
	}
	// Let go rather than hold a claim no runner knows of; the next request
	// or placement pass claims and loads again.
	notLoaded := func(what string, err error) error {
		if rerr := c.store.ReleaseGroup(wctx, claim); rerr != nil {
			c.logger.Warn().Err(rerr).Str("group", id).Msg("release claim of a group not loaded; the placement loop retries")
		}
		return fmt.Errorf("%w: load %s of group %q: %w", node.ErrCoordinatorUnavailable, what, id, err)
	}
	stored, err := c.store.GroupOffsets(wctx, c.cfg.Tenant, id)
	if err != nil {
		return notLoaded("offsets", err)
	}
	gen, err := c.store.GroupGeneration(wctx, c.cfg.Tenant, id)
	if err != nil {
		return notLoaded("generation", err)
	}
	commitRev, err := c.store.GroupCommitRevision(wctx, c.cfg.Tenant, id)
	if err != nil {
		return notLoaded("commit revision", err)
	}
	gr.g.ContinueFrom(group.Generation(gen))
	gr.savedGen = group.Generation(gen)
	gr.commitRev = commitRev
	set := make(map[group.TopicPartition]group.Offset, len(stored))
	for _, o := range stored {
		t := c.node.LookupTopicID(o.TopicID)
		if t == nil {
			continue // a deleted topic's offsets are ignored
		}
		set[group.TopicPartition{Topic: t.Meta.Name, Partition: o.Partition}] = group.Offset{
			Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
			Generation: group.Generation(o.Generation), CommitTime: o.CommitTime, TopicID: o.TopicID,
		}
	}
	gr.g.SetOffsets(set)
	gr.claim = claim
	gr.exists = gr.exists || len(set) > 0
	c.logger.Info().Str("group", id).Int64("claim", claim.Revision).Int("offsets", len(set)).Msg("coordinating group")
	return nil
}

// release ends this broker's tenure over gr: it leaves the map, its parked
// requests end with NOT_COORDINATOR, and its claim is deleted. gr.mu is held.
func (c *Coordinator) release(ctx context.Context, gr *groupRunner, why string) {
	if gr.released {
		return
	}
	gr.released = true
	close(gr.gone)
	c.forget(gr.g.ID(), gr)
	if gr.claim.Revision == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	if err := c.store.ReleaseGroup(wctx, gr.claim); err != nil {
		c.logger.Warn().Err(err).Str("group", gr.g.ID()).Msg("release group claim; it ends with this broker's lease")
	}
	c.logger.Info().Str("group", gr.g.ID()).Str("why", why).Msg("no longer coordinating group")
}

// fenced turns a write refused by the claim's condition into
// ErrNotCoordinator, releasing the group; gr.mu is held.
func (c *Coordinator) fenced(ctx context.Context, gr *groupRunner, err error) error {
	if !errors.Is(err, meta.ErrFenced) {
		return fmt.Errorf("%w: %w", node.ErrCoordinatorUnavailable, err)
	}
	c.release(ctx, gr, "claim lost")
	return fmt.Errorf("group %q: %w: %w", gr.g.ID(), ErrNotCoordinator, err)
}

// placeLoop keeps this broker's tenures matching the placement: whenever
// the view of live brokers changes it releases the groups placed elsewhere
// and takes over the groups with committed offsets placed here (so offsets
// expire and ListGroups lists them even before a client asks); groups it
// could not take yet are retried every tick.
func (c *Coordinator) placeLoop(ctx context.Context) {
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	seen, retry, first := "", false, true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, ok := c.cluster.Registration(); !ok {
			continue
		}
		view := viewOf(c.cluster.GroupPlacementBrokers())
		if view == seen && !retry && !first {
			continue
		}
		listed, all := c.reconcile(ctx)
		if first && listed {
			// Even if a predecessor still holds some groups, ListGroups
			// need not wait for them: it lists what is here, as Kafka does.
			close(c.placed)
			first = false
		}
		retry, seen = !all, view
	}
}

// placedWait bounds how long ListGroups waits for the first placement pass.
const placedWait = 5 * time.Second

// awaitPlaced waits until the placement loop has taken over this broker's
// groups once (so ListGroups lists them), or fails with ErrCoordinatorLoading.
func (c *Coordinator) AwaitPlaced(ctx context.Context) error {
	t := time.NewTimer(placedWait)
	defer t.Stop()
	select {
	case <-c.placed:
		return nil
	case <-ctx.Done():
	case <-t.C:
	case <-c.done:
	}
	return fmt.Errorf("groups not loaded yet: %w", ErrCoordinatorLoading)
}

// viewOf names a broker list by its members' incarnations.
func viewOf(bs []meta.BrokerInfo) string {
	var sb strings.Builder
	for _, bi := range bs {
		fmt.Fprintf(&sb, "%d@%d,", bi.NodeID, bi.Incarnation)
	}
	return sb.String()
}

// reconcile releases groups placed elsewhere and claims no runner serves
// (a release whose delete failed), and takes the groups with committed
// offsets placed here. It reports whether it could list those groups, and
// whether every one was taken.
func (c *Coordinator) reconcile(ctx context.Context) (listed, all bool) {
	orphansGone := c.releaseOrphanClaims(ctx)
	for _, gr := range c.snapshot() {
		gr.mu.Lock()
		if !gr.released && c.checkPlacement(gr.g.ID()) != nil {
			c.release(ctx, gr, "placed on another broker")
		}
		gr.mu.Unlock()
	}
	lctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	groups, err := c.store.OffsetGroups(lctx, c.cfg.Tenant)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn().Err(err).Msg("list groups with committed offsets; will retry")
		}
		return false, false
	}
	all = orphansGone
	for _, id := range groups {
		if c.checkPlacement(id) != nil {
			continue
		}
		err := c.locked(ctx, id, false, func(*groupRunner) error { return nil })
		if err != nil && !errors.Is(err, node.ErrGroupNotFound) && !errors.Is(err, ErrNotCoordinator) {
			c.logger.Debug().Err(err).Str("group", id).Msg("group not taken over yet; will retry")
			all = false
		}
	}
	return true, all
}

// releaseOrphanClaims deletes the claims this broker's lease holds that no
// serving runner holds; it reports whether there were none left.
func (c *Coordinator) releaseOrphanClaims(ctx context.Context) bool {
	reg, ok := c.cluster.Registration()
	if !ok {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	claims, err := c.store.GroupClaims(lctx, c.cfg.Tenant)
	if err != nil {
		if ctx.Err() == nil {
			c.logger.Warn().Err(err).Msg("list group claims; will retry")
		}
		return false
	}
	clean := true
	for _, cl := range claims {
		if cl.Lease != reg.Info().Lease {
			continue
		}
		held := false
		if gr := c.runner(cl.Group, false); gr != nil {
			gr.mu.Lock()
			held = gr.claim.Revision == cl.Revision && !gr.released
			gr.mu.Unlock()
		}
		if held {
			continue
		}
		if err := c.store.ReleaseGroup(lctx, cl); err != nil {
			c.logger.Warn().Err(err).Str("group", cl.Group).Msg("release orphan group claim; will retry")
			clean = false
		}
	}
	return clean
}

// claimCond is the condition every write for gr carries; gr.mu is held.
func (gr *groupRunner) claimCond() clientv3.Cmp { return gr.claim.If() }
