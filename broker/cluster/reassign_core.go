package cluster

// This file owns the pure core of partition reassignment (KIP-455's
// shape): given a pending request (meta/reassign.go), the partition state
// in etcd, the leader's published in-sync set and the replicas' catch-up
// marks, it says the one next write, if any. The driver (reassign.go)
// reads the inputs, carries the step out and tells the core; the core
// reads no clock but the one it is given.
//
// A move from replicas O to target T goes through single-member changes:
//
//	O ─ add t1 ─▶ O+t1 ─ add t2 ─▶ … O∪T ─ (every T caught up) ─ remove o1 ─▶ … T ─ order as T ─▶ done
//
// Each change writes the new replica set with no leader, at the same
// leader epoch; the elector (elector.go) then fences the new set at a new
// epoch and elects, as after any leader loss. A leader that is removed so
// hands over by that election; a new replica starts empty, fetches from
// the leader and, below its local log start, restarts there (the rest is
// in object storage), so only the local tail is copied.
//
// Invariant: every replica-set change the core asks for differs from the
// stored set by exactly one member (or only in order), and is asked only
// while the state has a leader (the last change has been fenced by an
// election over its own set) and once a quorum of the stored set, the
// leader included, reported catch-up marks at the state's epoch at or past
// the log end the leader reported at that epoch (everything committed
// under an earlier set is now on a quorum of this one: Raft's rule that a
// change waits for the last one to commit). Single-member changes keep
// every quorum of the old set and every quorum of the new one overlapping
// (Raft's single-server membership change), so no election after a change
// can miss a record committed before it. The model test
// (reassign_core_test.go) shows both rules are needed: without the second,
// two adds in a row elect a log missing committed records.
// Invariant: a replica leaves the set only once every target replica is
// in the leader's published in-sync set at the state's epoch, and every
// target follower reported, at that epoch, a durable end at or past the
// log end the leader reported: the new replicas have copied the tail.
// Invariant: the record is finished (deleted) only when the stored set is
// the target, in the target's order.
// Invariant: the core asks for at most one write per partition at a time:
// after a step at some state revision it waits for a newer revision (or
// the finish), or for retryAfter to pass when the write's outcome is
// unknown.

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// reassignRetry is how long the core waits for a state newer than the one
// it wrote from before it asks for the write again.
const reassignRetry = 5 * time.Second

// stepKind is what a reassignment step does.
type stepKind uint8

const (
	stepWait   stepKind = iota // nothing to write now; Why says what it waits for
	stepWrite                  // write Replicas (with no leader, or Keep the leader: a reorder)
	stepFinish                 // delete the record: the state is the target
)

// reassignStep is the core's answer for one partition.
type reassignStep struct {
	Kind     stepKind
	Replicas []int32 // stepWrite: the new replica set
	// KeepLeader (stepWrite): only the order changes; the leader and its
	// epoch stay, no election is needed.
	KeepLeader bool
	Phase      string // "adding", "catching-up", "removing", "reordering", "done", "waiting"
	Why        string
}

// reassignInput is what one decision needs.
type reassignInput struct {
	Rec   meta.Reassignment
	State meta.PartitionState
	// ISR is the leader's published in-sync set at State's epoch, nil
	// when unknown.
	ISR []int32
	// Live is the live brokers' AZs by node id.
	Live map[int32]string
}

// planReassign is the pure decision of the next step.
func planReassign(in reassignInput) reassignStep { return planReassignWith(in, false) }

// planReassignWith is planReassign; the model test plants the bug of
// skipping the wait for the last change to settle.
func planReassignWith(in reassignInput, skipSettle bool) reassignStep {
	st, target := in.State, in.Rec.Target
	if st.Leader == meta.NoLeader {
		return reassignStep{Kind: stepWait, Phase: "waiting", Why: "the partition has no leader: an election is under way"}
	}
	if why := unsettled(in); why != "" && !skipSettle {
		return reassignStep{Kind: stepWait, Phase: "waiting", Why: why}
	}
	for _, x := range target {
		if slices.Contains(st.Replicas, x) {
			continue
		}
		if _, live := in.Live[x]; !live {
			return reassignStep{Kind: stepWait, Phase: "adding", Why: fmt.Sprintf("broker %d, to be added, is not live", x)}
		}
		return reassignStep{Kind: stepWrite, Replicas: append(slices.Clone(st.Replicas), x), Phase: "adding",
			Why: fmt.Sprintf("adding replica %d", x)}
	}
	var removing []int32
	for _, x := range st.Replicas {
		if !slices.Contains(target, x) {
			removing = append(removing, x)
		}
	}
	if len(removing) > 0 {
		if why := notCaughtUp(in); why != "" {
			return reassignStep{Kind: stepWait, Phase: "catching-up", Why: why}
		}
		// A follower first: the leader goes last, so leadership moves once.
		x := removing[0]
		for _, r := range removing {
			if r != st.Leader {
				x = r
				break
			}
		}
		next := slices.DeleteFunc(slices.Clone(st.Replicas), func(id int32) bool { return id == x })
		why := fmt.Sprintf("removing replica %d", x)
		if x == st.Leader {
			why = fmt.Sprintf("removing replica %d, the leader: an election among the others takes over", x)
		}
		return reassignStep{Kind: stepWrite, Replicas: next, Phase: "removing", Why: why}
	}
	if !slices.Equal(st.Replicas, target) {
		return reassignStep{Kind: stepWrite, Replicas: slices.Clone(target), KeepLeader: true, Phase: "reordering",
			Why: "the replicas are the target's; writing the target's order (its first is the preferred leader)"}
	}
	return reassignStep{Kind: stepFinish, Phase: "done", Why: "the replicas are the target"}
}

// leaderMark is the leader's mark at the state's epoch, if it wrote one.
func leaderMark(in reassignInput) (meta.SyncedMark, bool) {
	m, ok := in.Rec.Synced[in.State.Leader]
	return m, ok && m.Epoch == in.State.LeaderEpoch
}

// holds reports whether replica x reported, at the state's epoch, a
// durable end at or past the leader's reported log end, with the same
// last batch epoch as the leader's (so its log is the leader's up to there).
func holds(in reassignInput, x int32, lead meta.SyncedMark) bool {
	if x == in.State.Leader {
		return true
	}
	m, ok := in.Rec.Synced[x]
	return ok && m.Epoch == in.State.LeaderEpoch && m.LastEpoch == lead.LastEpoch && m.End >= lead.LogEnd
}

// unsettled says why the stored set may not change yet, "" if it may: a
// quorum of it must hold the leader's log as the leader last reported it.
func unsettled(in reassignInput) string {
	st := in.State
	lead, ok := leaderMark(in)
	if !ok {
		return fmt.Sprintf("the leader (%d) has not reported its log at epoch %d", st.Leader, st.LeaderEpoch)
	}
	n := 0
	for _, x := range st.Replicas {
		if holds(in, x, lead) {
			n++
		}
	}
	if q := len(st.Replicas)/2 + 1; n < q {
		return fmt.Sprintf("%d of replicas %v hold the leader's log up to %d at epoch %d; the last change needs %d before the next",
			n, st.Replicas, lead.LogEnd, st.LeaderEpoch, q)
	}
	return ""
}

// notCaughtUp says which target replica is not yet caught up, "" if all are.
func notCaughtUp(in reassignInput) string {
	lead, _ := leaderMark(in)
	for _, x := range in.Rec.Target {
		if x == in.State.Leader {
			continue
		}
		if in.ISR == nil || !slices.Contains(in.ISR, x) {
			return fmt.Sprintf("replica %d is not in the leader's in-sync set", x)
		}
		if !holds(in, x, lead) {
			return fmt.Sprintf("replica %d is copying the leader's local tail (reported %d of the leader's %d)", x, in.Rec.Synced[x].End, lead.LogEnd)
		}
	}
	return ""
}

// ValidateTarget checks a requested target against the partition's
// replicas and the live brokers (node id → AZ): as many replicas as now
// (the replication factor does not change), each a live broker, at most
// one per AZ. The error says which rule failed, naming the brokers.
func ValidateTarget(target, current []int32, live map[int32]string) error {
	if err := meta.ValidateReplicaList(target); err != nil {
		return err
	}
	if len(target) != len(current) {
		return fmt.Errorf("the partition has %d replicas and the target %d: a reassignment keeps the replication factor", len(current), len(target))
	}
	byAZ := map[string]int32{}
	for _, id := range target {
		az, ok := live[id]
		if !ok {
			return fmt.Errorf("broker %d is not a live broker of the cluster", id)
		}
		if other, dup := byAZ[az]; dup {
			return fmt.Errorf("brokers %d and %d are both in AZ %q: a partition has at most one replica per AZ", other, id, az)
		}
		byAZ[az] = id
	}
	return nil
}

// reassignCore decides the steps of every pending reassignment and keeps
// which step it asked last, so a write is not repeated before its effect
// could be seen.
type reassignCore struct {
	now   func() time.Time
	asked map[meta.PartitionRef]askedStep
	plan  func(reassignInput) reassignStep // planReassign; a planted bug in tests
}

type askedStep struct {
	stateRev int64 // the state revision the step was decided from
	recRev   int64 // the record revision
	at       time.Time
}

func newReassignCore(now func() time.Time) *reassignCore {
	return &reassignCore{now: now, asked: map[meta.PartitionRef]askedStep{}, plan: planReassign}
}

// Next is the step to carry out for in now; stepWait while an earlier
// step's effect is not yet visible (the same state and record revisions,
// less than reassignRetry ago).
func (c *reassignCore) Next(in reassignInput) reassignStep {
	ref := in.Rec.Ref()
	step := c.plan(in)
	if step.Kind == stepWait {
		return step
	}
	if a, ok := c.asked[ref]; ok && a.stateRev == in.State.Revision && a.recRev == in.Rec.Revision && c.now().Sub(a.at) < reassignRetry {
		return reassignStep{Kind: stepWait, Phase: step.Phase, Why: step.Why + " (written; waiting for the new state)"}
	}
	c.asked[ref] = askedStep{stateRev: in.State.Revision, recRev: in.Rec.Revision, at: c.now()}
	return step
}

// Forget drops what the core kept of partitions no longer pending.
func (c *reassignCore) Forget(pending map[meta.PartitionRef]bool) {
	for ref := range c.asked {
		if !pending[ref] {
			delete(c.asked, ref)
		}
	}
}
