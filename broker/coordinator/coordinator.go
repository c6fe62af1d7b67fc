package coordinator

// This file owns the group coordinator's runtime: one group.Group state
// machine per group id, each behind its own lock, a ticker that feeds the
// clock to every group, and the Go API (Join, Sync, Heartbeat, Leave) that
// the Kafka handlers and the HTTP API share. Which groups this broker
// coordinates, and its claim on each, is group_placement.go's: every group
// request passes through locked, which answers NOT_COORDINATOR for a group
// placed elsewhere and takes the group's claim (loading its committed
// offsets) before it first serves it.
//
// Locks: coordinator.mu guards the groups map only; groupRunner.mu guards
// one group's state machine and its waiters, and is held across that group's
// etcd writes so that a commit's check and its write see the same
// generation. Lock order: groupRunner.mu before coordinator.mu; never wait
// for a parked reply while holding either.
//
// Invariant: a parked JoinGroup or SyncGroup has a waiter channel (capacity
// 1) registered before the group's outbox is drained, so its answer is
// never lost; the waiting side also gives up when its context ends or the
// coordinator stops, so a parked request never outlives the broker.
// Invariant: a group leaves the map only after it is marked Dead or
// released, under its lock; a parked request also ends when its group is
// released (gone), with NOT_COORDINATOR.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// etcdTimeout bounds one etcd call made while holding a group's lock.
const etcdTimeout = 10 * time.Second

// Cluster is what the coordinator needs of the broker around it.
type Cluster interface {
	// Registration is this broker's registration once it has registered.
	Registration() (*meta.Registration, bool)
	// GroupCoordinator is the broker that coordinates groupID in this
	// broker's view; GroupPlacementBrokers the brokers groups are placed on.
	GroupCoordinator(groupID string) meta.BrokerInfo
	GroupPlacementBrokers() []meta.BrokerInfo
	// PartitionRange is the log start and high watermark of a partition at
	// its leader, which may be another broker.
	PartitionRange(ctx context.Context, t *node.Topic, index int32) (logStart, hw int64, err error)
}

// Coordinator runs the consumer groups this broker coordinates.
type Coordinator struct {
	node    *node.Node
	cluster Cluster
	store   *meta.Store
	nodeID  int32
	cfg     node.CoordinatorConfig
	gcfg    group.Config
	logger  zerolog.Logger
	// offsets writes committed offsets: b.Store. It is read after a
	// request has taken mu (runner), so a test may swap in a fault double
	// under mu before its group requests.
	offsets OffsetWriter

	ticket atomic.Uint64
	placed chan struct{} // closed once the placement loop has taken over this broker's groups
	done   chan struct{} // closed by stop: parked waits end
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	groups map[string]*groupRunner // guarded by mu
}

// groupRunner is one group and the requests parked on it.
type groupRunner struct {
	mu      sync.Mutex
	g       *group.Group                             // guarded by mu
	waiters map[group.Ticket]chan<- group.Completion // guarded by mu
	// claim is this broker's claim on the group; Revision 0 until acquire
	// took it (group_placement.go). Guarded by mu.
	claim meta.GroupClaim
	// exists: the group was created by a request or has committed offsets;
	// a runner made only to look a group up is dropped again. Guarded by mu.
	exists bool
	// released: this broker no longer coordinates the group; gone is closed
	// at the same moment. Guarded by mu.
	released bool
	gone     chan struct{}
	// savedGen is the highest generation stored in etcd for the group
	// (meta.SaveGroupGenerationFenced); a completion carrying a higher one is
	// delivered only after that one is stored. Guarded by mu.
	savedGen group.Generation
	// commitRev is the revision of the group's commit key after this
	// broker's last offset commit (meta.CommitOffsetsFenced), read when
	// the group was acquired. Guarded by mu.
	commitRev int64
	// rebalances counts the generations deliver stored and handed out
	// (metrics.go); atomic, so a scrape takes no lock.
	rebalances atomic.Uint64
}

func newGroupRunner(id string, cfg group.Config, now time.Time) *groupRunner {
	return &groupRunner{g: group.New(id, cfg, now), waiters: make(map[group.Ticket]chan<- group.Completion),
		gone: make(chan struct{})}
}

// serving reports whether gr is this broker's to serve; gr.mu is held.
func (gr *groupRunner) serving() bool {
	return gr.claim.Revision != 0 && !gr.released && gr.g.State() != group.Dead
}

// Start runs the coordinator of the broker whose state is n, in cluster.
// Its loops run until Stop.
func Start(ctx context.Context, n *node.Node, cluster Cluster) *Coordinator {
	cfg := n.Cfg.Coordinator
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coordinator{
		node:    n,
		cluster: cluster,
		store:   n.Store,
		nodeID:  n.Cfg.NodeID,
		cfg:     cfg,
		gcfg:    cfg.GroupConfig(),
		logger:  n.NodeLog.With().Str("component", "coordinator").Logger(),
		placed:  make(chan struct{}),
		done:    make(chan struct{}),
		groups:  make(map[string]*groupRunner),
	}
	c.offsets = n.Store
	n.M.Reg.MustRegister(newMetricsCollector(c))
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = cancel
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.tickLoop(loopCtx)
	}()
	go func() {
		defer c.wg.Done()
		c.placeLoop(loopCtx)
	}()
	return c
}

// Stop ends the coordinator's loops; parked requests end too.
func (c *Coordinator) Stop() {
	if c.stop == nil {
		return
	}
	c.stop()
	c.wg.Wait()
	close(c.done)
}

func (c *Coordinator) now() time.Time { return c.cfg.Now() }

// WrapOffsets replaces the writer of committed offsets by wrap's answer
// for the current one: the seam through which tests put a fault double
// between the coordinator and etcd. Requests read the writer after taking
// the coordinator's lock, so the swap is safe while they run.
func (c *Coordinator) WrapOffsets(wrap func(OffsetWriter) OffsetWriter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsets = wrap(c.offsets)
}

// GroupState is the claim and generation of a group this broker holds;
// ok is false when it does not hold the group.
func (c *Coordinator) GroupState(id string) (claim meta.GroupClaim, gen group.Generation, ok bool) {
	gr := c.runner(id, false)
	if gr == nil {
		return meta.GroupClaim{}, -1, false
	}
	gr.mu.Lock()
	defer gr.mu.Unlock()
	return gr.claim, gr.g.Generation(), true
}

// runner returns the group's runner, creating an Empty group if create.
func (c *Coordinator) runner(id string, create bool) *groupRunner {
	c.mu.Lock()
	defer c.mu.Unlock()
	gr := c.groups[id]
	if gr == nil && create {
		gr = newGroupRunner(id, c.gcfg, c.now())
		c.groups[id] = gr
	}
	return gr
}

// forget removes a Dead or released group's runner from the map; the
// caller holds gr.mu.
func (c *Coordinator) forget(id string, gr *groupRunner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[id] == gr {
		delete(c.groups, id)
	}
}

// locked runs fn on the live group id under its lock, creating the group if
// create; without create, an unknown group is node.ErrGroupNotFound. A group
// placed on another broker is ErrNotCoordinator; one this broker has not
// served yet is first acquired (claimed and loaded; ErrCoordinatorLoading
// while another broker still holds it).
func (c *Coordinator) locked(ctx context.Context, id string, create bool, fn func(gr *groupRunner) error) error {
	if id == "" {
		return fmt.Errorf("%w: empty", node.ErrInvalidGroupID)
	}
	if err := c.checkPlacement(id); err != nil {
		return err
	}
	for {
		gr := c.runner(id, true)
		gr.mu.Lock()
		if gr.released || gr.g.State() == group.Dead {
			c.forget(id, gr)
			gr.mu.Unlock()
			continue // deleted or released meanwhile: use a fresh one
		}
		if gr.claim.Revision == 0 {
			if err := c.acquire(ctx, gr); err != nil {
				c.release(ctx, gr, "not taken over") // holds nothing: only leaves the map
				gr.mu.Unlock()
				return err
			}
		}
		if create && !gr.exists {
			// A new group: its tenant's groups quota (POLICY_VIOLATION:
			// not retriable, so a client stops and shows the message;
			// GROUP_AUTHORIZATION_FAILED would send people to the ACLs).
			if err := c.node.CheckNewGroup(ctx, c.cfg.Tenant, id); err != nil {
				_ = gr.g.MarkDead(c.now())
				c.release(ctx, gr, "over its tenant's groups quota")
				gr.mu.Unlock()
				return err
			}
			gr.exists = true
		}
		if !gr.exists {
			// Only looked up: nothing to keep, nor a claim to hold.
			_ = gr.g.MarkDead(c.now())
			c.release(ctx, gr, "no such group")
			gr.mu.Unlock()
			return fmt.Errorf("group %q: %w", id, node.ErrGroupNotFound)
		}
		err := fn(gr)
		if derr := c.deliver(ctx, gr); derr != nil && err == nil {
			// A result fn computed may carry the generation that could
			// not be stored: the caller must not hand it out.
			err = derr
		}
		gr.mu.Unlock()
		return err
	}
}

// deliver hands the group's completions to their waiters; gr.mu is held.
// A generation no member has been told yet is stored in etcd first, under
// the claim, so the group's next coordinator goes on counting above it. If
// a try's outcome is unknown it is tried again, fenced (retryFenced). If
// it cannot be stored, nobody learns it: the completions are dropped and
// the group is released (its waiters get NOT_COORDINATOR and rejoin, at this
// broker or the next coordinator, which reads the stored generation).
func (c *Coordinator) deliver(ctx context.Context, gr *groupRunner) error {
	if gen := gr.g.Generation(); gen > gr.savedGen {
		err := c.retryFenced(ctx, gr, "generation save", func(ctx context.Context, token string) (int64, error) {
			return c.offsets.SaveGroupGenerationFenced(ctx, gr.claim, int32(gen), gr.commitRev, token)
		})
		if err != nil {
			gr.g.TakeCompletions()
			c.logger.Warn().Err(err).Str("group", gr.g.ID()).Int32("generation", int32(gen)).Msg("generation not stored; releasing the group")
			c.release(ctx, gr, "generation not stored")
			return fmt.Errorf("group %q: store generation %d: %w: %w", gr.g.ID(), gen, ErrNotCoordinator, err)
		}
		gr.rebalances.Add(uint64(gen - gr.savedGen))
		gr.savedGen = gen
	}
	for _, comp := range gr.g.TakeCompletions() {
		if ch, ok := gr.waiters[comp.Ticket]; ok {
			ch <- comp
			delete(gr.waiters, comp.Ticket)
		}
	}
	return nil
}

// park registers a waiter for ticket; gr.mu is held.
func (gr *groupRunner) park(t group.Ticket) <-chan group.Completion {
	ch := make(chan group.Completion, 1)
	gr.waiters[t] = ch
	return ch
}

func (c *Coordinator) nextTicket() group.Ticket { return group.Ticket(c.ticket.Add(1)) }

// wait returns a parked request's completion, or an error when ctx ends,
// the group is released (gone) or the coordinator stops first.
func (c *Coordinator) wait(ctx context.Context, ch <-chan group.Completion, gone <-chan struct{}) (group.Completion, error) {
	select {
	case comp := <-ch:
		return comp, nil
	case <-gone:
		return group.Completion{}, fmt.Errorf("group released while the request waited: %w", ErrNotCoordinator)
	case <-ctx.Done():
		return group.Completion{}, fmt.Errorf("%w: %w", node.ErrCoordinatorUnavailable, ctx.Err())
	case <-c.done:
		return group.Completion{}, fmt.Errorf("%w: shutting down", node.ErrCoordinatorUnavailable)
	}
}

// startJoin registers a JoinGroup and returns the wait for its answer, so a
// Kafka handler can park the reply without blocking its reader.
func (c *Coordinator) StartJoin(groupID string, req group.JoinRequest) func(context.Context) group.JoinResult {
	var res group.JoinResult
	var ch <-chan group.Completion
	var gone <-chan struct{}
	err := c.locked(context.Background(), groupID, true, func(gr *groupRunner) error {
		t := c.nextTicket()
		var parked bool
		if res, parked = gr.g.Join(c.now(), t, req); parked {
			ch, gone = gr.park(t), gr.gone
		}
		return nil
	})
	if err != nil {
		return func(context.Context) group.JoinResult { return group.JoinResult{Err: err, MemberID: req.MemberID} }
	}
	if ch == nil {
		return func(context.Context) group.JoinResult { return res }
	}
	return func(ctx context.Context) group.JoinResult {
		comp, err := c.wait(ctx, ch, gone)
		if err != nil {
			return group.JoinResult{Err: err, MemberID: req.MemberID}
		}
		return *comp.Join
	}
}

// Join runs a JoinGroup and waits for its answer; the answer's Err is
// group.ErrMemberIDRequired (with MemberID set), another group error, or nil.
func (c *Coordinator) Join(ctx context.Context, groupID string, req group.JoinRequest) group.JoinResult {
	return c.StartJoin(groupID, req)(ctx)
}

// startSync registers a SyncGroup and returns the wait for its answer.
func (c *Coordinator) StartSync(groupID string, req group.SyncRequest) func(context.Context) group.SyncResult {
	var res group.SyncResult
	var ch <-chan group.Completion
	var gone <-chan struct{}
	err := c.locked(context.Background(), groupID, false, func(gr *groupRunner) error {
		t := c.nextTicket()
		var parked bool
		if res, parked = gr.g.Sync(c.now(), t, req); parked {
			ch, gone = gr.park(t), gr.gone
		}
		return nil
	})
	if err != nil {
		return func(context.Context) group.SyncResult { return group.SyncResult{Err: unknownGroupAsMember(err)} }
	}
	if ch == nil {
		return func(context.Context) group.SyncResult { return res }
	}
	return func(ctx context.Context) group.SyncResult {
		comp, err := c.wait(ctx, ch, gone)
		if err != nil {
			return group.SyncResult{Err: err}
		}
		return *comp.Sync
	}
}

// Sync runs a SyncGroup and waits for the member's assignment.
func (c *Coordinator) Sync(ctx context.Context, groupID string, req group.SyncRequest) group.SyncResult {
	return c.StartSync(groupID, req)(ctx)
}

// Heartbeat keeps a member's session alive; group.ErrRebalanceInProgress
// tells it to rejoin.
func (c *Coordinator) Heartbeat(groupID, memberID, instanceID string, gen group.Generation) error {
	return unknownGroupAsMember(c.locked(context.Background(), groupID, false, func(gr *groupRunner) error {
		return gr.g.Heartbeat(c.now(), memberID, instanceID, gen)
	}))
}

// Leave removes a member (by member id, or instance id for a static member).
func (c *Coordinator) Leave(groupID, memberID, instanceID string) error {
	return unknownGroupAsMember(c.locked(context.Background(), groupID, false, func(gr *groupRunner) error {
		return gr.g.Leave(c.now(), memberID, instanceID)
	}))
}

// unknownGroupAsMember answers a member request to a group that does not
// exist as Kafka does: the member is unknown.
func unknownGroupAsMember(err error) error {
	if err != nil && errors.Is(err, node.ErrGroupNotFound) {
		return fmt.Errorf("%w: %w", group.ErrUnknownMember, err)
	}
	return err
}

// tickLoop feeds the clock to every group and, less often, removes expired
// offsets and empty groups.
func (c *Coordinator) tickLoop(ctx context.Context) {
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	lastCheck := c.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := c.now()
		check := now.Sub(lastCheck) >= c.cfg.RetentionCheckInterval
		if check {
			lastCheck = now
		}
		for _, gr := range c.snapshot() {
			gr.mu.Lock()
			if gr.serving() {
				gr.g.Tick(now)
				_ = c.deliver(ctx, gr) // a failure released the group and is logged
				if check {
					c.expire(ctx, gr, now)
				}
			}
			gr.mu.Unlock()
		}
	}
}

func (c *Coordinator) snapshot() []*groupRunner {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*groupRunner, 0, len(c.groups))
	for _, gr := range c.groups {
		out = append(out, gr)
	}
	return out
}
