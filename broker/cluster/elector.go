package cluster

// This file owns the controller's driver of the election cores
// (docs/architecture.md): while this broker is the controller, one
// replica.Controller per partition, fed the partition states from etcd,
// the live brokers, the replicas' FenceAcks and LeaderUnreachables and a
// tick, and its Ready carried out: fences to the replicas through the
// transport (replication_transport.go), and the compare-and-swap that
// publishes a new leader and epoch (meta.UpdatePartition under the
// controller's IfLeader condition).
//
// Invariant: every partition state this file writes goes through
// UpdatePartition at the revision the core expects and under IfLeader, so
// a deposed controller writes nothing; the first ErrNotController ends the
// tenure's loop.
// Invariant: the core hears only the answer to the CAS it asked last
// (casSeq); an answer to one it abandoned is dropped. The client gives up
// on a write after electionCASTimeout, less than the core's round, so
// normally a partition has one write in flight; safety never rests on
// that, only on the CAS on the revision the round started from.
//
// A partition whose fence rounds get a quorum of answers but not of
// eligible ones (replicas that lost their disks and have not caught up,
// replica.Controller.Blocked) stays leaderless: the loop logs it at warn,
// naming the partition and the lost replicas, and counts it in
// sluice_partitions_offline_lost_disks; an operator may force an unclean
// election (POST /v1/admin/partitions/{topic}/{partition}/elections:unclean,
// http_admin.go), which reaches the loop through elector.force.
//
// Goroutines: the elector loop (runElections) owns every replica.Controller
// and the electorLoop; nothing else touches them, so they need no lock.
// CAS goroutines are owned by the loop (electorLoop.wg), get their
// partition state by value and answer through the results channel; the
// loop waits for them before it returns. The transport reaches the loop
// only through elector.inbox, a bounded channel, published in
// Broker.repl.elector while the loop runs.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
)

const (
	// electionCASTimeout bounds one UpdatePartition: three quarters of the
	// core's round, which abandons an unanswered CAS after RoundTicks.
	electionCASTimeout = time.Duration(replica.DefaultRoundTicks) * replicationTick * 3 / 4
	// electionLoadRetry is the pause between failed reads of the partition
	// states at the start of a tenure.
	electionLoadRetry = time.Second
	// electionReadTimeout bounds one read of partition states.
	electionReadTimeout = node.ElectionReadTimeout
)

// Results of a CAS, as metric labels; index into repl.elections.
const (
	electionWritten  = "written"  // the new leader and epoch are in etcd
	electionConflict = "conflict" // the state moved since the round began
	electionFailed   = "failed"   // etcd error or timeout: outcome unknown
	electionDeposed  = "deposed"  // refused: this broker is no longer the controller
)

var electionResults = [...]string{electionWritten, electionConflict, electionFailed, electionDeposed}

func (r *replication) countElection(result string) {
	for i, x := range electionResults {
		if x == result {
			r.elections[i].Add(1)
		}
	}
}

// elector is what the transport sees of a running elector loop.
type elector struct {
	inbox  chan envelope     // bounded; envelopes To replica.ControllerNode
	force  chan forceUnclean // an operator's unclean elections (http_admin.go)
	prefer chan preferNow    // an operator's preferred elections (drain.go)
}

// forceUnclean asks the loop to force an unclean election of key; the
// loop answers on done (buffered) with nil or errUnknownPartition.
type forceUnclean struct {
	key  PartitionKey
	done chan error
}

// ForceUnclean asks this broker's elector loop to force an unclean
// election of key. handled is false when this broker runs no elector (it
// is not the controller); err is ctx's when the loop did not take or
// answer the request in time, or errUnknownPartition.
func (b *Cluster) ForceUnclean(ctx context.Context, key PartitionKey) (handled bool, err error) {
	e := b.repl.elector.Load()
	if e == nil {
		return false, nil
	}
	f := forceUnclean{key: key, done: make(chan error, 1)}
	select {
	case e.force <- f:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	select {
	case err := <-f.done:
		return true, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// errUnknownPartition: the elector follows no such partition.
var errUnknownPartition = errors.New("the controller knows no such partition")

// electedPartition is the loop's state for one partition.
type electedPartition struct {
	ctrl   *replica.Controller
	round  wal.Epoch // the last round logged as started
	cause  string    // why that round started, as inferred from the state
	casSeq uint64    // the CAS the core waits for; 0: none
	// roundVersion is the state version the last round started from, and
	// roundsAtVersion how many rounds started from it: a second one means
	// the first elected nobody, which is logged at info (once).
	roundVersion    int64
	roundsAtVersion int
	// since is when the first round from roundVersion started, and
	// fromEpoch and fromLeader the state it started from: the one info line
	// of an election ("leader elected") reports them.
	since      time.Time
	fromEpoch  wal.Epoch
	fromLeader replica.NodeID
	// blocked: the replicas the core last reported as keeping it from
	// electing (replica.Controller.Blocked), as logged.
	blocked []replica.NodeID
	// recording: the CAS in flight records an incarnation, elects nobody.
	recording bool
}

// casOutcome is the answer of a CAS goroutine to the loop.
type casOutcome struct {
	key     PartitionKey
	seq     uint64
	ok      bool
	current meta.PartitionState // the state in etcd when known (Revision > 0)
	deposed bool
	err     error
}

// electorLoop is the state of one tenure's elector loop; only the loop
// goroutine touches it.
type electorLoop struct {
	b        *Cluster
	log      zerolog.Logger
	ifLeader clientv3.Cmp
	parts    map[PartitionKey]*electedPartition
	live     []replica.NodeID // sorted
	draining []replica.NodeID // sorted: brokers with a drain mark (drain.go)
	results  chan casOutcome
	seq      uint64
	wg       sync.WaitGroup // CAS goroutines
	nBlocked int64          // partitions with blocked != nil; published in repl.offline
}

// runElections elects partition leaders while this broker is controller
// c. It returns when ctx ends, when c is lost, when a CAS is refused
// because c was deposed, or when the metadata store closes.
func (b *Cluster) runElections(ctx context.Context, c *meta.Controller) {
	defer b.startReassigner(ctx, c.IfLeader())() // reassign.go
	b.electLoop(ctx, c.IfLeader(), c.Lost(), c.Epoch())
}

// electLoop is runElections with the tenure's parts taken apart: ifLeader
// guards every write and lost ends the loop (nil: never).
func (b *Cluster) electLoop(ctx context.Context, ifLeader clientv3.Cmp, lost <-chan struct{}, epoch int64) {
	ctx, cancel := context.WithCancel(ctx)
	l := &electorLoop{
		b:        b,
		log:      b.NodeLog.With().Str("component", "elector").Int64("controller_epoch", epoch).Logger(),
		ifLeader: ifLeader,
		parts:    map[PartitionKey]*electedPartition{},
		live:     liveNodes(b.Brokers()),
		draining: b.drainingNodes(),
		results:  make(chan casOutcome, 64),
	}
	defer func() {
		cancel()
		l.wg.Wait()
		b.repl.offline.Store(0) // another controller reports them now
	}()
	watch := b.Store.WatchPartitions(ctx)
	if !l.load(ctx, lost) {
		return
	}
	e := &elector{inbox: make(chan envelope, electorInbox), force: make(chan forceUnclean), prefer: make(chan preferNow)}
	b.repl.elector.Store(e)
	defer b.repl.elector.CompareAndSwap(e, nil)
	l.log.Info().Int("partitions", len(l.parts)).Ints32("live", toInt32IDs(l.live)).Msg("elector started")

	t := time.NewTicker(replicationTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			l.log.Info().Msg("elector stopped: controller tenure lost")
			return
		case ev, ok := <-watch:
			if !ok {
				return // the store is closing
			}
			l.apply(ctx, ev)
		case env := <-e.inbox:
			l.step(ctx, env)
		case f := <-e.force:
			l.forceUnclean(ctx, f)
		case p := <-e.prefer:
			l.preferNow(ctx, p)
		case r := <-l.results:
			if !l.casDone(ctx, r) {
				return
			}
		case <-t.C:
			l.tick(ctx)
		}
	}
}

// load reads every partition state at the start of the tenure, retrying
// until it succeeds or the tenure ends.
func (l *electorLoop) load(ctx context.Context, lost <-chan struct{}) bool {
	for {
		rctx, cancel := context.WithTimeout(ctx, electionReadTimeout)
		states, _, err := l.b.Store.AllPartitions(rctx)
		cancel()
		if err == nil {
			for _, st := range states {
				l.apply(ctx, meta.PartitionEvent{Kind: meta.EventPut, State: st})
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		l.log.Error().Err(err).Msg("elector: read partition states; retrying")
		timer := time.NewTimer(electionLoadRetry)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-lost:
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// apply follows one change of a partition state in etcd.
func (l *electorLoop) apply(ctx context.Context, ev meta.PartitionEvent) {
	key := PartitionKey{TopicID: ev.State.TopicID, Partition: ev.State.Partition}
	if ev.Kind == meta.EventDelete {
		if p := l.parts[key]; p != nil && p.blocked != nil {
			l.nBlocked--
			l.b.repl.offline.Store(l.nBlocked)
		}
		delete(l.parts, key)
		return
	}
	p := l.parts[key]
	if p == nil {
		p = &electedPartition{ctrl: replica.NewController(replica.ControllerConfig{})}
		p.ctrl.SetLive(l.live)
		p.ctrl.SetDraining(l.draining)
		l.parts[key] = p
	}
	p.ctrl.SetState(replicaStateOf(ev.State))
	l.flush(ctx, key, p)
}

// forceUnclean makes the partition's next decision count every answer.
func (l *electorLoop) forceUnclean(ctx context.Context, f forceUnclean) {
	p := l.parts[f.key]
	if p == nil {
		f.done <- errUnknownPartition
		return
	}
	l.partLog(l.log.Warn(), f.key).Ints32("lost_replicas", toInt32IDs(p.blocked)).
		Msg("unclean election forced by an operator: the most complete log among the replicas that answer wins; what only the lost replicas held is gone")
	p.ctrl.ForceUnclean()
	l.flush(ctx, f.key, p)
	f.done <- nil
}

// step hands a FenceAck or LeaderUnreachable to its partition's core.
func (l *electorLoop) step(ctx context.Context, env envelope) {
	p := l.parts[env.Key]
	if p == nil {
		l.b.dropEnvelope(env, dropNoPartition)
		return
	}
	if st, _, _ := p.ctrl.Status(); !slices.Contains(st.Replicas, env.Msg.From) {
		// Only a replica's answers and complaints count (the core checks
		// a FenceAck's sender, but not one that says it is fenced, nor a
		// complaint).
		l.b.dropEnvelope(env, dropNotReplica)
		return
	}
	p.ctrl.Step(env.Msg)
	l.flush(ctx, env.Key, p)
}

// tick refreshes the live brokers and ticks every partition's core.
func (l *electorLoop) tick(ctx context.Context) {
	if live := liveNodes(l.b.Brokers()); !slices.Equal(live, l.live) {
		l.log.Info().Ints32("live", toInt32IDs(live)).Ints32("was", toInt32IDs(l.live)).Msg("live brokers changed")
		l.live = live
		for _, p := range l.parts {
			p.ctrl.SetLive(live)
		}
	}
	if d := l.b.drainingNodes(); !slices.Equal(d, l.draining) {
		l.log.Info().Ints32("draining", toInt32IDs(d)).Ints32("was", toInt32IDs(l.draining)).Msg("draining brokers changed")
		l.draining = d
		for _, p := range l.parts {
			p.ctrl.SetDraining(d)
		}
	}
	for key, p := range l.parts {
		p.ctrl.Tick()
		l.flush(ctx, key, p)
	}
}

// flush carries out a core's Ready: fences to the replicas, and the CAS.
func (l *electorLoop) flush(ctx context.Context, key PartitionKey, p *electedPartition) {
	l.noteBlocked(key, p)
	if !p.ctrl.HasReady() {
		return
	}
	rd := p.ctrl.Ready()
	st, electing, round := p.ctrl.Status()
	if electing && round != p.round {
		p.round = round
		p.cause = electionCause(st, l.live)
		l.b.repl.rounds.Add(1)
		if st.Version != p.roundVersion || p.since.IsZero() {
			p.roundVersion, p.roundsAtVersion = st.Version, 0
			p.since, p.fromEpoch, p.fromLeader = time.Now(), st.Epoch, st.Leader
		}
		p.roundsAtVersion++
		// An election is one info line, when its leader is written
		// (casDone). A partition that cannot elect (no quorum live) starts
		// a round every few seconds: its second round from one state is
		// logged at info, the first and the later ones at debug.
		ev, msg := l.log.Debug(), "election round started: fencing the replicas"
		if p.roundsAtVersion == 2 {
			ev, msg = l.log.Info(), "election round started again: the last one elected nobody (fewer than a quorum of replicas answered, or the write failed)"
		}
		l.partLog(ev, key).Int32("old_epoch", int32(st.Epoch)).Int32("old_leader", int32(st.Leader)).
			Int32("epoch", int32(round)).Str("cause", p.cause).Int("round", p.roundsAtVersion).
			Int64("electing_ms", time.Since(p.since).Milliseconds()).Msg(msg)
	}
	for _, m := range rd.Messages {
		l.b.sendToReplica(int32(m.To), envelope{Key: key, Msg: m})
	}
	if rd.CAS != nil {
		l.startCAS(ctx, key, p, *rd.CAS, st)
	}
	p.ctrl.Advance()
}

// noteBlocked logs a partition that cannot elect for lost disks, and its
// recovery, and keeps the offline gauge.
func (l *electorLoop) noteBlocked(key PartitionKey, p *electedPartition) {
	now := p.ctrl.Blocked()
	if slices.Equal(now, p.blocked) {
		return
	}
	switch {
	case p.blocked == nil:
		l.nBlocked++
	case now == nil:
		l.nBlocked--
	}
	p.blocked = now
	l.b.repl.offline.Store(l.nBlocked)
	if now == nil {
		l.partLog(l.log.Info(), key).Msg("partition no longer blocked by replicas that lost their disks")
		return
	}
	l.partLog(l.log.Warn(), key).Ints32("lost_replicas", toInt32IDs(now)).
		Msg("partition offline: a quorum answered the fence, but these replicas lost their disks and have not caught up, " +
			"so no eligible quorum holds the committed log; it stays leaderless until they catch up or more replicas return " +
			"(an unclean election can be forced: POST /v1/admin/partitions/{topic}/{partition}/elections:unclean)")
}

// partLog adds the partition's names to a log event.
func (l *electorLoop) partLog(ev *zerolog.Event, key PartitionKey) *zerolog.Event {
	if t := l.b.LookupTopicID(key.TopicID); t != nil {
		ev = ev.Str("topic", t.Meta.Name)
	}
	return ev.Str("topic_id", node.UUIDString(key.TopicID)).Int32("partition", key.Partition)
}

// startCAS writes the core's choice to etcd on a goroutine of its own.
func (l *electorLoop) startCAS(ctx context.Context, key PartitionKey, p *electedPartition, cas replica.CAS, old replica.State) {
	l.seq++
	p.casSeq = l.seq
	next := metaStateOf(key, cas.New)
	next.Revision = cas.Expect
	p.recording = cas.New.Epoch == old.Epoch
	// Debug: the outcome (casDone) is the line at info.
	if p.recording {
		l.partLog(l.log.Debug(), key).Int32("epoch", next.LeaderEpoch).Uints64("incarnations", next.Incarnations).
			Msg("recording the new incarnation of a replica that lost its disk and has caught up: it counts again")
	} else {
		l.partLog(l.log.Debug(), key).Int32("old_epoch", int32(old.Epoch)).Int32("old_leader", int32(old.Leader)).
			Int32("epoch", next.LeaderEpoch).Int32("leader", next.Leader).Str("cause", p.cause).
			Msg("electing leader: a quorum answered the fence")
	}
	seq := l.seq
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		res := l.b.writeElection(ctx, key, next, l.ifLeader)
		res.seq = seq
		select {
		case l.results <- res:
		case <-ctx.Done():
		}
	}()
}

// writeElection is one CAS: it writes next if the partition is still at
// next.Revision and ifLeader holds, and says what is in etcd otherwise.
func (b *Cluster) writeElection(ctx context.Context, key PartitionKey, next meta.PartitionState, ifLeader clientv3.Cmp) casOutcome {
	res := casOutcome{key: key}
	cctx, cancel := context.WithTimeout(ctx, electionCASTimeout)
	defer cancel()
	written, err := b.Store.UpdatePartition(cctx, next, ifLeader)
	switch {
	case err == nil:
		res.ok, res.current = true, written
		return res
	case errors.Is(err, meta.ErrNotController):
		res.deposed, res.err = true, err
		return res
	}
	res.err = err
	// Conflict, a partition gone or an etcd error: tell the core what is
	// stored now, if it can be read in time.
	rctx, rcancel := context.WithTimeout(ctx, electionReadTimeout)
	defer rcancel()
	states, rerr := b.Store.Partitions(rctx, key.TopicID)
	if rerr != nil {
		return res
	}
	for _, st := range states {
		if st.Partition == key.Partition {
			res.current = st
		}
	}
	return res
}

// casDone hands a CAS answer to its partition's core. It reports false when
// the CAS was refused because this broker is no longer the controller.
func (l *electorLoop) casDone(ctx context.Context, r casOutcome) bool {
	if r.deposed {
		l.b.repl.countElection(electionDeposed)
		l.partLog(l.log.Warn(), r.key).Err(r.err).Msg("election refused: this broker is no longer the controller; elector stopping")
		return false
	}
	p := l.parts[r.key]
	if p == nil || p.casSeq != r.seq {
		l.partLog(l.log.Debug(), r.key).Err(r.err).Bool("ok", r.ok).Msg("answer to an abandoned election CAS ignored")
		return true
	}
	p.casSeq = 0
	var cur replica.State
	if r.current.Revision > 0 {
		cur = replicaStateOf(r.current)
	}
	switch {
	case r.ok && p.recording:
		l.partLog(l.log.Info(), r.key).Uints64("incarnations", r.current.Incarnations).Msg("replica incarnation recorded")
	case r.ok:
		// The one info line of an election.
		l.b.repl.countElection(electionWritten)
		l.partLog(l.log.Info(), r.key).Int32("epoch", r.current.LeaderEpoch).Int32("leader", r.current.Leader).
			Int32("old_epoch", int32(p.fromEpoch)).Int32("old_leader", int32(p.fromLeader)).Str("cause", p.cause).
			Int("rounds", p.roundsAtVersion).Int64("duration_ms", time.Since(p.since).Milliseconds()).
			Msg("leader elected")
		p.since = time.Time{}
	case errors.Is(r.err, meta.ErrConflict):
		// Another writer moved the state; the next round, if any, says so.
		l.b.repl.countElection(electionConflict)
		l.partLog(l.log.Debug(), r.key).Err(r.err).Msg("election lost its compare-and-swap: the state moved; electing again if needed")
	default:
		l.b.repl.countElection(electionFailed)
		l.partLog(l.log.Warn(), r.key).Err(r.err).Msg("election write failed; electing again")
	}
	p.ctrl.CASResult(r.ok, cur)
	l.flush(ctx, r.key, p)
	return true
}

// electionCause infers why a round started from the state it started
// from; the core does not say.
func electionCause(s replica.State, live []replica.NodeID) string {
	isLive := func(id replica.NodeID) bool { _, ok := slices.BinarySearch(live, id); return ok }
	switch {
	case s.Leader == replica.NoLeader:
		return "no leader"
	case !isLive(s.Leader):
		return "leader not live"
	case len(s.Replicas) > 0 && s.Leader != s.Replicas[0] && isLive(s.Replicas[0]):
		return "moving leadership to the preferred replica, or replicas complained"
	}
	return "replicas reported the leader unreachable, or an earlier round elected nobody"
}

// liveNodes is the sorted node ids of bs.
func liveNodes(bs []meta.BrokerInfo) []replica.NodeID {
	ids := make([]replica.NodeID, len(bs))
	for i, bi := range bs {
		ids[i] = replica.NodeID(bi.NodeID)
	}
	slices.Sort(ids)
	return ids
}

func toInt32IDs(ids []replica.NodeID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// replicaStateOf is a state read from etcd as the cores see it; the etcd
// mod revision is the core's Version.
func replicaStateOf(st meta.PartitionState) replica.State {
	s := replica.State{Epoch: wal.Epoch(st.LeaderEpoch), Leader: replica.NodeID(st.Leader), Version: st.Revision}
	if st.Leader == meta.NoLeader {
		s.Leader = replica.NoLeader
	}
	s.Replicas = make([]replica.NodeID, len(st.Replicas))
	for i, id := range st.Replicas {
		s.Replicas[i] = replica.NodeID(id)
	}
	s.Incarnations = node.IncarnationsOf(st.Incarnations)
	return s
}

// metaStateOf is a core's state for partition key as etcd stores it; its
// Revision is s.Version, which the caller sets to the revision to CAS on.
func metaStateOf(key PartitionKey, s replica.State) meta.PartitionState {
	st := meta.PartitionState{
		TopicID: key.TopicID, Partition: key.Partition,
		Leader: int32(s.Leader), LeaderEpoch: int32(s.Epoch), Revision: s.Version,
	}
	if s.Leader == replica.NoLeader {
		st.Leader = meta.NoLeader
	}
	st.Replicas = make([]int32, len(s.Replicas))
	for i, id := range s.Replicas {
		st.Replicas[i] = int32(id)
	}
	if len(s.Incarnations) > 0 {
		st.Incarnations = make([]uint64, len(s.Incarnations))
		for i, x := range s.Incarnations {
			st.Incarnations[i] = uint64(x)
		}
	}
	return st
}

// ElectionsWritten counts the elections this broker's elector wrote to
// etcd while it was the controller.
func (b *Cluster) ElectionsWritten() uint64 { return b.repl.elections[0].Load() }
