package cluster

// This file owns the broker's membership of the cluster: its registration
// under an etcd lease, the view of the live brokers that Metadata answers
// from, its candidacy for controller, and following the topics that other
// brokers create, change and delete.
//
// Invariant: a broker answers Metadata with the brokers whose registration
// leases live (itself at least, from the moment it registered), so clients
// never route to a broker the cluster considers gone for longer than the
// lease TTL.
// Invariant: the registration lease a data directory last held is recorded
// in <data-dir>/registration before the broker serves; only the broker
// holding the directory's lock reads it, so taking that lease over after a
// crash can never take over another live broker.
// Invariant: every broker opens a topic that another broker created once
// etcd reports it, and closes and deletes the local data of one deleted
// elsewhere; the local registry follows etcd, never the reverse.
//
// The live-broker and controller views are atomics written by their
// watcher goroutines (started by StartCluster, stopped through its context
// and waited for with clusterWG) and read by any connection goroutine.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// registrationFile records the lease of the data directory's last
// registration, in hex, so a restart after a crash can take it over at once
// instead of waiting for the TTL.
const registrationFile = "registration"

// controllerPoll is how often a broker re-reads who the controller is.
// Followers send their complaints about an unreachable leader to the
// controller it names, so after a controller dies this is part of the wait
// before its successor hears them and elects new leaders for the
// partitions the dead broker led (a second cost 0.5 s on average; one read
// of a single etcd key four times a second is cheap).
const controllerPoll = 250 * time.Millisecond

// topicReconcileEvery is the period of ReconcileTopics after the first.
const topicReconcileEvery = 30 * time.Second

// register puts this broker in the registry and records its lease. A
// lease recorded by the data directory's previous registration is taken
// over at once: the directory's lock proves that incarnation is gone.
func (b *Cluster) register(ctx context.Context) error {
	info := meta.BrokerInfo{
		NodeID: b.Cfg.NodeID,
		AZ:     b.Cfg.AZ,
		Kafka:  b.addrs.Kafka,
		HTTP:   node.AdvertisedHTTP(b.addrs.HTTP, b.addrs.Kafka),
		Pool:   b.Cfg.Pool,

		InterBroker: b.addrs.InterBroker,
		Listeners:   b.addrs.Listeners,
	}
	path := filepath.Join(b.Cfg.DataDir, registrationFile)
	prev, err := b.previousLease(path)
	if err != nil {
		return err
	}
	reg, err := b.Store.RegisterTakingOver(ctx, info, b.Cfg.RegistrationTTL, prev)
	if err != nil {
		return fmt.Errorf("broker: register node %d: %w", b.Cfg.NodeID, err)
	}
	lease := strconv.FormatInt(int64(reg.Info().Lease), 16)
	if err := vfs.WriteFileDurable(b.FS, path, []byte(lease+"\n")); err != nil {
		_ = reg.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("broker: record registration lease in %s: %w", path, err)
	}
	b.reg.Store(reg)
	others := slices.DeleteFunc(slices.Clone(b.Brokers()), func(x meta.BrokerInfo) bool { return x.NodeID == b.Cfg.NodeID })
	b.setLiveBrokers(append(others, reg.Info()))
	return nil
}

// keepRegistered registers again whenever the registration's lease is lost
// (the broker was cut off from etcd, or paused, for longer than its TTL).
// The partitions it leads keep their role: the epoch fences keep a deposed
// leader from committing anything (its followers promised the new epoch),
// and the watch tells it the new state as soon as it reaches etcd again.
// Stepping down here would also stop the reads below the high watermark
// that a leader whose followers (and, with embedded etcd, etcd's quorum)
// are gone must go on serving. acks=1, which no quorum protects, is
// refused meanwhile (partition.Net.LeaseHeld).
func (b *Cluster) keepRegistered(ctx context.Context) {
	for {
		reg := b.reg.Load()
		select {
		case <-ctx.Done():
			return
		case <-reg.Lost():
		}
		b.Logger.Error().Msg("registration lease lost; registering again")
		for ctx.Err() == nil {
			if err := b.register(ctx); err == nil {
				b.Logger.Info().Msg("registered again")
				break
			} else if ctx.Err() == nil {
				b.Logger.Warn().Err(err).Msg("register again; retrying")
			}
			node.SleepCtx(ctx, time.Second)
		}
	}
}

// previousLease reads the lease recorded by the data directory's previous
// registration; 0 if there is none.
func (b *Cluster) previousLease(path string) (clientv3.LeaseID, error) {
	data, err := vfs.ReadFile(b.FS, path, 64)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("broker: read %s: %w", path, err)
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(data)), 16, 64)
	if err != nil {
		// Only an optimisation is lost: the broker waits for the old lease's TTL.
		b.Logger.Warn().Err(err).Str("path", path).Msg("unreadable registration record ignored")
		return 0, nil
	}
	return clientv3.LeaseID(id), nil
}

// Deregister ends the registration at shutdown, so the cluster stops
// routing to this broker at once rather than after the lease TTL.
func (b *Cluster) Deregister(ctx context.Context) {
	reg := b.reg.Load()
	if reg == nil {
		return
	}
	if err := reg.Close(ctx); err != nil {
		b.Logger.Warn().Err(err).Msg("Deregister; the lease will expire")
	}
}

// StartCluster starts the watchers of the live brokers, the controller and
// the topics; they stop when ctx ends and are waited for by clusterWG.
func (b *Cluster) StartCluster(ctx context.Context) {
	brokers := b.Store.WatchBrokers(ctx)
	topics := b.Store.WatchTopics(ctx)
	partitions := b.Store.WatchPartitions(ctx)
	b.startReplicationTransport(ctx)
	b.startFetchers(ctx)
	b.startInSync(ctx)
	for _, run := range []func(){
		func() { b.keepRegistered(ctx) },
		func() { b.tickPartitions(ctx) },
		func() { b.followController(ctx) },
		func() { b.followDrains(ctx) },
		func() { b.followReassignments(ctx) },
		func() {
			b.ReconcilePartitionStates(ctx)
			for ev := range partitions {
				b.ApplyPartitionEvent(ev)
			}
		},
		func() {
			for bs := range brokers {
				b.setLiveBrokers(bs)
			}
		},
		func() {
			// Anti-entropy besides the watch: a topic that failed to open
			// (an etcd read timed out) is opened on a later pass.
			b.ReconcileTopics(ctx)
			t := time.NewTicker(topicReconcileEvery)
			defer t.Stop()
			for {
				select {
				case ev, ok := <-topics:
					if !ok {
						return
					}
					b.applyTopicEvent(ctx, ev)
				case <-t.C:
					b.ReconcileTopics(ctx)
				}
			}
		},
	} {
		b.clusterWG.Add(1)
		go func() {
			defer b.clusterWG.Done()
			run()
		}()
	}
}

// setLiveBrokers publishes the registry's view, sorted by node id. The
// broker itself stays in the view while its own registration lives, even
// if a watch event raced ahead.
func (b *Cluster) setLiveBrokers(bs []meta.BrokerInfo) {
	bs = slices.Clone(bs)
	if reg := b.reg.Load(); reg != nil && !slices.ContainsFunc(bs, func(x meta.BrokerInfo) bool { return x.NodeID == b.Cfg.NodeID }) {
		select {
		case <-reg.Lost():
		default:
			bs = append(bs, reg.Info())
		}
	}
	slices.SortFunc(bs, func(x, y meta.BrokerInfo) int { return cmp.Compare(x.NodeID, y.NodeID) })
	b.liveBrokers.Store(&bs)
}

// brokers returns the live brokers, sorted by node id.
func (b *Cluster) Brokers() []meta.BrokerInfo {
	if p := b.liveBrokers.Load(); p != nil {
		return *p
	}
	return nil
}

// RegistrationLease is the lease of this broker's live registration, 0
// while it has none: what keys that must go with the broker are bound to.
func (b *Cluster) RegistrationLease() clientv3.LeaseID {
	reg := b.reg.Load()
	if reg == nil {
		return 0
	}
	select {
	case <-reg.Lost():
		return 0
	default:
		return reg.Info().Lease
	}
}

// controllerID is the node id of the controller, or -1 while none is known.
func (b *Cluster) ControllerID() int32 { return b.controller.Load() }

// followController campaigns for controller and, meanwhile, keeps the
// controller id current for Metadata.
func (b *Cluster) followController(ctx context.Context) {
	b.controller.Store(-1)
	b.clusterWG.Add(1)
	go func() {
		defer b.clusterWG.Done()
		b.isolationLoop(ctx)
	}()
	b.clusterWG.Add(1)
	go func() {
		defer b.clusterWG.Done()
		b.campaign(ctx)
	}()
	t := time.NewTicker(controllerPoll)
	defer t.Stop()
	for {
		if id, _, err := b.Store.ControllerID(ctx); err == nil {
			b.controller.Store(id)
		} else if ctx.Err() == nil {
			b.Logger.Debug().Err(err).Msg("read controller id")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// campaign stands for controller until ctx ends; after losing the post it
// stands again.
func (b *Cluster) campaign(ctx context.Context) {
	for ctx.Err() == nil {
		c, err := b.Store.Campaign(ctx, b.Cfg.NodeID, b.Cfg.ControllerTTL)
		if err != nil {
			if ctx.Err() == nil {
				b.Logger.Warn().Err(err).Msg("controller campaign failed; retrying")
				node.SleepCtx(ctx, time.Second)
			}
			continue
		}
		b.controller.Store(b.Cfg.NodeID)
		resigned := b.runController(ctx, c)
		if ctx.Err() != nil || resigned {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := c.Resign(rctx); err != nil {
				b.Logger.Debug().Err(err).Msg("resign controller")
			}
			cancel()
		}
		if resigned {
			// Stand again only once another broker had time to win.
			node.SleepCtx(ctx, b.Cfg.ControllerTTL)
		}
	}
}

// runController does the controller's work until its tenure ends; true
// when it ends because this broker steps aside (isolation.go).
func (b *Cluster) runController(ctx context.Context, c *meta.Controller) bool {
	select {
	case <-b.ctlResign: // a signal from an earlier tenure
	default:
	}
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.runElections(ectx, c)
	}()
	defer func() { <-done }()
	select {
	case <-ctx.Done():
	case <-c.Lost():
		b.Logger.Warn().Int64("epoch", c.Epoch()).Msg("controller tenure lost")
	case <-b.ctlResign:
		b.Logger.Warn().Int64("epoch", c.Epoch()).Msg("controller steps aside")
		stop()
		return true
	}
	return false
}

// applyTopicEvent makes the local registry follow a topic change in etcd,
// whichever broker made it. Changes this broker made itself are already
// applied and are recognised by their revision.
func (b *Cluster) applyTopicEvent(ctx context.Context, ev meta.TopicEvent) {
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	t := ev.Topic
	local := b.LookupTopic(t.Name)
	switch {
	case ev.Kind == meta.EventDelete:
		if local != nil && local.Meta.ID == t.ID {
			b.DropTopic(ctx, local)
		}
	case local == nil || local.Meta.ID != t.ID:
		if local != nil {
			// Deleted and recreated while this broker's watch lagged.
			b.DropTopic(ctx, local)
		}
		states, err := b.PartitionStates(ctx, t)
		if err == nil {
			err = b.OpenTopic(t, states)
		}
		if err != nil {
			b.Logger.Error().Err(err).Str("topic", t.Name).Msg("open topic created by another broker")
		}
	case t.Revision > local.Meta.Revision:
		if err := b.AdoptTopic(ctx, local, t); err != nil {
			b.Logger.Error().Err(err).Str("topic", t.Name).Msg("apply topic change made by another broker")
		}
	}
}

// place assigns the replicas of n new partitions of topic over the live
// brokers of its tenant's pool (broker/controller, placement.go); rf -1
// asks for the default, which counts the AZs of the whole cluster.
func (b *Cluster) place(ctx context.Context, topic string, n, rf int) ([][]int32, error) {
	brokers := b.PlacementBrokers()
	if rf == -1 {
		rf = b.DefaultReplicationFactor(brokers)
	}
	tenant, err := b.tenantPlacement(ctx, topic)
	if err != nil {
		return nil, err
	}
	assign, err := controller.PlaceForTenant(brokers, tenant, n, rf, b.placementLoad())
	switch {
	case errors.Is(err, controller.ErrInvalidReplicationFactor):
		return nil, fmt.Errorf("%w: %w", node.ErrInvalidReplication, err)
	case errors.Is(err, controller.ErrInvalidPartitions):
		return nil, fmt.Errorf("%w: %w", node.ErrInvalidPartitions, err)
	case err != nil:
		return nil, err
	}
	return toInt32s(assign), nil
}

// placeMore assigns replicas to the partitions t gains in growing to count,
// with t's replication factor.
func (b *Cluster) placeMore(ctx context.Context, t *node.Topic, count int) ([][]int32, error) {
	brokers := b.PlacementBrokers()
	tenant, err := b.tenantPlacement(ctx, t.Meta.Name)
	if err != nil {
		return nil, err
	}
	existing := make([][]controller.NodeID, len(t.States))
	for i, st := range t.States {
		for _, id := range st.Replicas {
			existing[i] = append(existing[i], controller.NodeID(id))
		}
	}
	assign, err := controller.AddTenantPartitions(brokers, tenant, existing, count-len(existing), b.placementLoad())
	switch {
	case errors.Is(err, controller.ErrInvalidReplicationFactor):
		return nil, fmt.Errorf("%w: %w", node.ErrInvalidReplication, err)
	case errors.Is(err, controller.ErrInvalidPartitions):
		return nil, fmt.Errorf("%w: %w", node.ErrInvalidPartitions, err)
	case err != nil:
		return nil, err
	}
	return toInt32s(assign), nil
}

// placementBrokers is the live brokers as placement sees them.
func (b *Cluster) PlacementBrokers() []controller.Broker {
	live := b.Brokers()
	if len(live) == 0 {
		live = []meta.BrokerInfo{{NodeID: b.Cfg.NodeID, AZ: b.Cfg.AZ, Pool: b.Cfg.Pool}}
	}
	brokers := make([]controller.Broker, len(live))
	for i, bi := range live {
		brokers[i] = controller.Broker{ID: controller.NodeID(bi.NodeID), AZ: bi.AZ, Pool: bi.Pool}
	}
	return brokers
}

func toInt32s(assign [][]controller.NodeID) [][]int32 {
	out := make([][]int32, len(assign))
	for i, rs := range assign {
		out[i] = make([]int32, len(rs))
		for j, id := range rs {
			out[i][j] = int32(id)
		}
	}
	return out
}

// placementLoad counts the replicas and preferred leaderships each broker
// already holds, so new partitions even it out.
func (b *Cluster) placementLoad() controller.Load {
	load := controller.Load{}
	for _, t := range b.SortedTopics() {
		assign := make([][]controller.NodeID, len(t.States))
		for i, st := range t.States {
			for _, id := range st.Replicas {
				assign[i] = append(assign[i], controller.NodeID(id))
			}
		}
		load.Add(assign)
	}
	return load
}

// ApplyPartitionEvent gives a hosted replica the partition state etcd now
// holds (a new leader or epoch) and keeps the registry's copy for Metadata.
// States older than the one known, and keys of partitions the topic does
// not have, are ignored.
func (b *Cluster) ApplyPartitionEvent(ev meta.PartitionEvent) {
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	st := ev.State
	key := PartitionKey{TopicID: st.TopicID, Partition: st.Partition}
	if ev.Kind == meta.EventDelete {
		delete(b.PendingStates, key) // the topic watch removes deleted topics
		return
	}
	t := b.LookupTopicID(st.TopicID)
	if t == nil || st.Partition < 0 || int(st.Partition) >= len(t.States) {
		// A topic (or partition) this broker is still opening: its states
		// were read before this change, which must not be lost
		// (mergePendingStates applies it when the topic is registered).
		if old, ok := b.PendingStates[key]; st.Partition >= 0 && (!ok || st.Revision > old.Revision) {
			b.PendingStates[key] = st
		}
		return
	}
	if st.Revision <= t.States[st.Partition].Revision {
		return
	}
	nt := *t
	nt.States = slices.Clone(t.States)
	nt.States[st.Partition] = st
	b.ReplaceTopic(&nt)
	if p := t.Partitions[st.Partition]; p != nil {
		p.SetState(node.CoreState(st))
	}
	b.rehost(st) // a reassignment added or removed this broker (reassign.go)
}

// ReconcilePartitionStates reads every known topic's partition states once
// and applies those newer than this broker's view. The partition watch
// reports changes after its own first read, which comes after the topics
// were opened at start; a leader elected in between (often: the controller
// reacts to this broker's registration) would otherwise stay unknown here
// until the partition's next change, and its replica would follow the old
// leader for as long.
func (b *Cluster) ReconcilePartitionStates(ctx context.Context) {
	for _, t := range b.SortedTopics() {
		states, err := b.Store.Partitions(ctx, t.Meta.ID)
		if err != nil {
			if ctx.Err() == nil {
				b.Logger.Warn().Err(err).Str("topic", t.Meta.Name).Msg("re-read partition states after the watch started")
			}
			continue
		}
		for _, st := range states {
			b.ApplyPartitionEvent(meta.PartitionEvent{Kind: meta.EventPut, State: st})
		}
	}
}

// ReconcileTopics makes the local topics those of etcd once the topic
// watch has started. The broker opened its topics (LoadTopics) before it
// registered and before the watch read its starting point; a topic created
// or deleted in between is in neither, so without this a broker never
// hosts its replicas of a topic created while it started: it answers no
// fence for them, and once another replica fails the partition has no
// quorum and stays leaderless. A topic that is local but not listed was
// deleted (it existed in etcd before it was opened); one created here
// after the listing is not among the local topics read before it.
//
// It runs again every topicReconcileEvery.
func (b *Cluster) ReconcileTopics(ctx context.Context) {
	before := b.SortedTopics()
	var listed []meta.Topic
	for {
		ts, err := b.Store.Topics(ctx)
		if err == nil {
			listed = ts
			break
		}
		if ctx.Err() != nil {
			return
		}
		b.Logger.Warn().Err(err).Msg("re-read topics after the watch started; retrying")
		node.SleepCtx(ctx, time.Second)
	}
	ids := make(map[[16]byte]bool, len(listed))
	for _, t := range listed {
		ids[t.ID] = true
		if l := b.LookupTopic(t.Name); l == nil || l.Meta.ID != t.ID {
			b.Logger.Info().Str("topic", t.Name).Msg("opening a topic the watch did not deliver (created while this broker started, or its opening failed)")
		}
		b.applyTopicEvent(ctx, meta.TopicEvent{Kind: meta.EventPut, Topic: t})
	}
	for _, t := range before {
		if !ids[t.Meta.ID] {
			b.applyTopicEvent(ctx, meta.TopicEvent{Kind: meta.EventDelete, Topic: t.Meta})
		}
	}
}

// tickPartitions drives the replica cores' clocks, and then offers the
// in-sync sets of the partitions this broker leads for publication.
func (b *Cluster) tickPartitions(ctx context.Context) {
	t := time.NewTicker(replicationTick)
	defer t.Stop()
	// The in-sync sets are compared no more often than they may be
	// written (isr_publish.go): every core's status is read each time.
	offerEvery := max(1, int(isrPublishEvery/replicationTick))
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !b.ticksHeld.Load() {
				for _, p := range b.AllPartitions() {
					p.Tick()
				}
			}
			if n%offerEvery == 0 {
				b.offerInSync()
			}
		}
	}
}

// awaitLeaders waits (up to d) until every partition of the topic has an
// elected leader, and this broker's replicas lead the epochs they were
// elected for, so that a client producing right after CreateTopics is not
// refused. A partition is created without a leader epoch of its own: the
// controller elects its first leader through the fences of docs/architecture.md,
// which takes a few etcd round trips.
func (b *Cluster) awaitLeaders(ctx context.Context, id [16]byte, d time.Duration) {
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t := b.LookupTopicID(id)
		if t == nil || b.LeadersElected(t) {
			return
		}
		node.SleepCtx(ctx, 5*time.Millisecond)
	}
}

func (b *Cluster) LeadersElected(t *node.Topic) bool {
	for i, st := range t.States {
		if st.LeaderEpoch < 1 || st.Leader < 0 {
			return false
		}
		if st.Leader != b.Cfg.NodeID || t.Partitions[i] == nil {
			continue
		}
		rs := t.Partitions[i].ReplicaStatus()
		if rs.Role != replica.RoleLeader || int32(rs.Epoch) != st.LeaderEpoch {
			return false
		}
	}
	return true
}

// StartupLeaderWait bounds how long a starting broker waits to lead again
// the partitions etcd names it the leader of, before it reports ready.
const StartupLeaderWait = 10 * time.Second

// AwaitOwnLeadership waits (up to d) until a controller is known and this
// broker leads, at a new epoch, every partition etcd names it the leader
// of. A restarted replica never leads the epoch it recovered with
// (broker/replica), so each needs an election first; waiting for it keeps a
// restarted lone broker from answering NOT_LEADER_OR_FOLLOWER to its first
// clients.
func (b *Cluster) AwaitOwnLeadership(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		// A controller known, too: Metadata names it, and clients send
		// admin requests (CreateTopics) there; -1 sends some of them to
		// ":0" (kafka-go did, in a CI run).
		done := b.ControllerID() > 0
		for _, t := range b.SortedTopics() {
			for i, st := range t.States {
				p := t.Partitions[i]
				if p == nil || st.Leader != b.Cfg.NodeID {
					continue
				}
				if rs := p.ReplicaStatus(); rs.Role != replica.RoleLeader || int32(rs.Epoch) != st.LeaderEpoch {
					done = false
				}
			}
		}
		if done {
			return
		}
		node.SleepCtx(ctx, 5*time.Millisecond)
	}
	b.Logger.Warn().Int64("waited_ms", d.Milliseconds()).Int32("controller", b.ControllerID()).Msg("some partitions this broker led are not led again yet, or no controller is known; serving anyway")
}

// interBrokerAddr is the address to dial a live broker's inter-broker
// listener at (where it registered it, unless Config.PeerInterBroker routes
// that node elsewhere), or "" when the broker is not live or registered
// none.
func (b *Cluster) InterBrokerAddr(id int32) string {
	for _, bi := range b.Brokers() {
		if bi.NodeID == id {
			if addr, ok := b.Cfg.PeerInterBroker[id]; ok {
				return addr
			}
			return bi.InterBroker
		}
	}
	return ""
}
