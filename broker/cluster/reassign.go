package cluster

// This file owns the driver of partition reassignments (reassign_core.go):
// the operator's requests (RequestReassignment, CancelReassignment,
// ListReassignments: any broker takes them and writes etcd), the
// controller's loop that carries the core's steps out, and every broker's
// catch-up marks for the partitions it hosts while a reassignment of them
// is pending. Replicas open and close as the partition state names this
// broker or stops naming it (ApplyPartitionEvent → rehost).
//
// Invariant: the controller loop writes partition states only through
// UpdatePartition at the revision it read and under the tenure's IfLeader,
// and deletes a record only at the revision it read (FinishReassignment):
// a deposed controller, or one that read a stale state or record, writes
// nothing. Every change of a replica set goes through the core.
// Invariant: a broker writes only its own catch-up marks, from its own
// replica: a follower's durable end, the leader's high watermark and log
// end, each with its log's last batch epoch, at the epoch the replica
// follows or leads.
//
// Goroutines: the controller loop (runReassigner) runs for one tenure and
// owns its reassignCore; followReassignments runs for the broker's life.
// Both only read the registry and the replicas' statuses.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
)

const (
	// reassignPoll is how often the controller looks at the pending
	// reassignments and a broker refreshes its followers' catch-up marks.
	reassignPoll = 250 * time.Millisecond
	// leaderMarkEvery is how often a leader rewrites its mark at one
	// epoch: the followers compare with a slightly old log end, which a
	// caught-up follower passes even while records keep arriving.
	leaderMarkEvery = 2 * time.Second
	// reassignWriteTimeout bounds one etcd request of the driver.
	reassignWriteTimeout = 5 * time.Second
)

// liveAZs is the live brokers' AZs by node id.
func (b *Cluster) liveAZs() map[int32]string {
	out := map[int32]string{}
	for _, bi := range b.Brokers() {
		out[bi.NodeID] = bi.AZ
	}
	return out
}

// publishedISR is the in-sync set st's leader published at st's epoch,
// nil when this broker has not seen one.
func (b *Cluster) publishedISR(st meta.PartitionState) []int32 {
	m := b.isr.seen.Load()
	if m == nil || st.Leader < 0 {
		return nil
	}
	is, ok := (*m)[st.Leader][meta.PartitionRef{TopicID: st.TopicID, Partition: st.Partition}]
	if !ok || is.Epoch != st.LeaderEpoch {
		return nil
	}
	return is.ISR
}

// partitionState is the registry's state of a partition of a topic named
// by name.
func (b *Cluster) namedPartition(name string, partition int32) (meta.PartitionState, error) {
	t := b.LookupTopic(name)
	if t == nil {
		return meta.PartitionState{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	if partition < 0 || int(partition) >= len(t.States) {
		return meta.PartitionState{}, fmt.Errorf("topic %q has no partition %d: %w", name, partition, meta.ErrPartitionNotFound)
	}
	return t.States[partition], nil
}

// RequestReassignment validates target against the partition and the live
// brokers and stores the request; the controller carries it out. Errors
// wrap meta.ErrInvalidReassignment (the rule broken, named), meta's
// not-found errors, or an etcd error.
func (b *Cluster) RequestReassignment(ctx context.Context, topic string, partition int32, target []int32) (meta.Reassignment, error) {
	st, err := b.namedPartition(topic, partition)
	if err != nil {
		return meta.Reassignment{}, err
	}
	if err := ValidateTarget(target, st.Replicas, b.liveAZs()); err != nil {
		return meta.Reassignment{}, fmt.Errorf("%w: %s-%d: %w", meta.ErrInvalidReassignment, topic, partition, err)
	}
	ref := meta.PartitionRef{TopicID: st.TopicID, Partition: partition}
	r, err := b.Store.RequestReassignment(ctx, ref, target, st.Replicas, time.Now())
	if err == nil {
		b.Logger.Info().Str("topic", topic).Int32("partition", partition).Ints32("replicas", st.Replicas).
			Ints32("target", target).Ints32("original", r.Original).Msg("partition reassignment requested")
	}
	return r, err
}

// CancelReassignment turns a pending reassignment into a move back to the
// partition's original replicas (meta.ErrNoReassignment when none).
func (b *Cluster) CancelReassignment(ctx context.Context, topic string, partition int32) (meta.Reassignment, error) {
	st, err := b.namedPartition(topic, partition)
	if err != nil {
		return meta.Reassignment{}, err
	}
	r, err := b.Store.CancelReassignment(ctx, meta.PartitionRef{TopicID: st.TopicID, Partition: partition}, time.Now())
	if err == nil {
		b.Logger.Info().Str("topic", topic).Int32("partition", partition).Ints32("original", r.Original).
			Msg("partition reassignment cancelled: moving back to the original replicas")
	}
	return r, err
}

// ListReassignments is every pending reassignment with the step it is at,
// as this broker sees the partitions.
func (b *Cluster) ListReassignments(ctx context.Context) ([]meta.ReassignmentStatus, error) {
	recs, err := b.Store.Reassignments(ctx)
	if err != nil {
		return nil, err
	}
	live := b.liveAZs()
	out := make([]meta.ReassignmentStatus, 0, len(recs))
	for _, r := range recs {
		s := meta.ReassignmentStatus{Partition: r.Partition, Target: r.Target, Original: r.Original,
			Cancelled: r.Cancelled, Requested: r.Requested, Leader: meta.NoLeader, Adding: []int32{}, Removing: []int32{}}
		t := b.LookupTopicID(r.TopicID)
		if t == nil || int(r.Partition) >= len(t.States) {
			s.Phase, s.Message = "waiting", "the partition is unknown to this broker (deleted, or not yet seen)"
			out = append(out, s)
			continue
		}
		st := t.States[r.Partition]
		s.Topic, s.Replicas, s.Leader, s.LeaderEpoch = t.Meta.Name, st.Replicas, st.Leader, st.LeaderEpoch
		for _, x := range r.Target {
			if !slices.Contains(st.Replicas, x) {
				s.Adding = append(s.Adding, x)
			}
		}
		for _, x := range st.Replicas {
			if !slices.Contains(r.Target, x) {
				s.Removing = append(s.Removing, x)
			}
		}
		step := planReassign(reassignInput{Rec: r, State: st, ISR: b.publishedISR(st), Live: live})
		s.Phase, s.Message = step.Phase, step.Why
		out = append(out, s)
	}
	return out, nil
}

// startReassigner runs the controller's reassignment loop for one tenure
// and returns a function that stops it and waits for it.
func (b *Cluster) startReassigner(ctx context.Context, ifLeader clientv3.Cmp) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.runReassigner(ctx, ifLeader)
	}()
	return func() { cancel(); <-done }
}

// runReassigner carries out the pending reassignments' steps until ctx
// ends or a write finds this broker deposed.
func (b *Cluster) runReassigner(ctx context.Context, ifLeader clientv3.Cmp) {
	log := b.NodeLog.With().Str("component", "reassigner").Logger()
	core := newReassignCore(time.Now)
	t := time.NewTicker(reassignPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, reassignWriteTimeout)
		recs, err := b.Store.Reassignments(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Debug().Err(err).Msg("read pending reassignments; trying again")
			}
			continue
		}
		pending := map[meta.PartitionRef]bool{}
		live := b.liveAZs()
		for _, r := range recs {
			pending[r.Ref()] = true
			if !b.reassignStep(ctx, core, r, live, ifLeader) {
				log.Warn().Msg("reassignment write refused: this broker is no longer the controller; reassigner stopping")
				return
			}
		}
		core.Forget(pending)
	}
}

// reassignStep takes one partition's next step; false when the write
// found this broker deposed.
func (b *Cluster) reassignStep(ctx context.Context, core *reassignCore, r meta.Reassignment, live map[int32]string, ifLeader clientv3.Cmp) bool {
	log := b.NodeLog.With().Str("component", "reassigner").Int32("partition", r.Partition).Logger()
	wctx, cancel := context.WithTimeout(ctx, reassignWriteTimeout)
	defer cancel()
	t := b.LookupTopicID(r.TopicID)
	if t == nil || int(r.Partition) >= len(t.States) {
		// The topic is gone (or not yet seen here): a record of a deleted
		// topic is finished; one of a topic not yet seen waits.
		if states, err := b.Store.Partitions(wctx, r.TopicID); err == nil && len(states) == 0 {
			err := b.Store.FinishReassignment(wctx, r, ifLeader)
			log.Info().Err(err).Msg("reassignment of a deleted topic's partition dropped")
			return !errors.Is(err, meta.ErrNotController)
		}
		return true
	}
	st := t.States[r.Partition]
	log = log.With().Str("topic", t.Meta.Name).Logger()
	step := core.Next(reassignInput{Rec: r, State: st, ISR: b.publishedISR(st), Live: live})
	var err error
	switch step.Kind {
	case stepWait:
		return true
	case stepFinish:
		err = b.Store.FinishReassignment(wctx, r, ifLeader)
		if err == nil {
			log.Info().Ints32("replicas", st.Replicas).Bool("cancelled", r.Cancelled).Int32("leader", st.Leader).
				Msg("partition reassignment done")
		}
	case stepWrite:
		next := st
		next.Replicas = step.Replicas
		next.Incarnations = incarnationsFor(st, step.Replicas)
		if !step.KeepLeader {
			next.Leader = meta.NoLeader // the elector fences the new set at a new epoch
		}
		_, err = b.Store.UpdatePartition(wctx, next, ifLeader)
		if err == nil {
			log.Info().Ints32("from", st.Replicas).Ints32("to", step.Replicas).Int32("leader", st.Leader).
				Int32("epoch", st.LeaderEpoch).Str("phase", step.Phase).Msg("reassignment step: " + step.Why)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, meta.ErrNotController):
		return false
	case errors.Is(err, meta.ErrConflict):
		log.Debug().Err(err).Msg("reassignment step lost its compare-and-swap; deciding again from the new state")
	default:
		log.Warn().Err(err).Str("step", step.Why).Msg("reassignment step failed; trying again")
	}
	return true
}

// incarnationsFor is st's recorded incarnations re-indexed for replicas:
// a replica that stays keeps its own, a new one is unknown (0).
func incarnationsFor(st meta.PartitionState, replicas []int32) []uint64 {
	if len(st.Incarnations) == 0 {
		return nil
	}
	out := make([]uint64, len(replicas))
	for i, id := range replicas {
		if j := slices.Index(st.Replicas, id); j >= 0 && j < len(st.Incarnations) {
			out[i] = st.Incarnations[j]
		}
	}
	return out
}

// followReassignments writes this broker's catch-up marks for the
// partitions it hosts while a reassignment of them is pending, every
// reassignPoll, until ctx ends.
func (b *Cluster) followReassignments(ctx context.Context) {
	t := time.NewTicker(reassignPoll)
	defer t.Stop()
	leaderAt := map[meta.PartitionRef]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, reassignWriteTimeout)
		b.writeMarks(rctx, leaderAt)
		cancel()
	}
}

// writeMarks is one round of followReassignments.
func (b *Cluster) writeMarks(ctx context.Context, leaderAt map[meta.PartitionRef]time.Time) {
	recs, err := b.Store.Reassignments(ctx)
	if err != nil || len(recs) == 0 {
		clear(leaderAt)
		return
	}
	for _, r := range recs {
		t := b.LookupTopicID(r.TopicID)
		if t == nil || int(r.Partition) >= len(t.Partitions) || t.Partitions[r.Partition] == nil {
			continue
		}
		// The status keeps role and epoch current, not the offsets: those
		// come from the log and the high watermark.
		p := t.Partitions[r.Partition]
		s := p.ReplicaStatus()
		l := p.Log()
		mark := meta.SyncedMark{Epoch: int32(s.Epoch), LastEpoch: int32(l.LastEpoch())}
		switch s.Role {
		case replica.RoleFollower:
			mark.End = int64(l.DurableEnd())
		case replica.RoleLeader:
			hw, _ := p.HighWatermark()
			mark.End, mark.LogEnd = int64(hw), int64(l.EndOffset())
		default:
			continue
		}
		old, had := r.Synced[b.Cfg.NodeID]
		switch {
		case had && old == mark:
			continue
		case s.Role == replica.RoleLeader && had && old.Epoch == mark.Epoch && time.Since(leaderAt[r.Ref()]) < leaderMarkEvery:
			continue
		}
		if err := b.Store.MarkSynced(ctx, r.Ref(), b.Cfg.NodeID, mark); err != nil {
			b.Logger.Debug().Err(err).Str("topic", t.Meta.Name).Int32("partition", r.Partition).Msg("write reassignment catch-up mark")
			continue
		}
		if s.Role == replica.RoleLeader {
			leaderAt[r.Ref()] = time.Now()
		}
	}
}

// rehost opens this broker's replica of a partition the new state st
// names it a replica of, or closes one it no longer does. The caller
// holds AdminMu and has registered st.
func (b *Cluster) rehost(st meta.PartitionState) {
	t := b.LookupTopicID(st.TopicID)
	if t == nil || int(st.Partition) >= len(t.Partitions) {
		return
	}
	hosted, named := t.Partitions[st.Partition] != nil, slices.Contains(st.Replicas, b.Cfg.NodeID)
	switch {
	case named && !hosted:
		if err := b.HostPartition(t, st.Partition); err != nil {
			b.Logger.Error().Err(err).Str("topic", t.Meta.Name).Int32("partition", st.Partition).
				Msg("open a replica this broker was made part of; tried again at the partition's next state change or restart")
		}
	case !named && hosted:
		b.UnhostPartition(t, st.Partition)
	}
}
