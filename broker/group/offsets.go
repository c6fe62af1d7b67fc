package group

// This file owns the group's view of its committed offsets: who may commit,
// and when offsets expire. The durable copy lives in etcd (meta/offsets.go);
// the owner writes it between CheckCommit and SetOffsets.
//
// Invariant: offsets expire only while the group is Empty, OffsetsRetention
// after the later of the commit and the moment the group became empty.

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Offset is one committed offset.
type Offset struct {
	Offset      int64
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
	Generation  Generation // -1 for an admin or standalone commit
	CommitTime  time.Time
	// TopicID is the committed topic's ID; the owner's business, kept here
	// so a recreated topic does not inherit its predecessor's offsets.
	TopicID [16]byte
}

// CheckCommit decides whether a commit may be written, as Kafka's
// ClassicGroup.validateOffsetCommit does: an admin commit (generation < 0,
// no member id, no instance id) needs an Empty group; any other needs the
// current member and generation outside CompletingRebalance. A valid member
// commit also counts as a heartbeat.
func (g *Group) CheckCommit(now time.Time, memberID, instanceID string, gen Generation) error {
	if g.state == Dead {
		return fmt.Errorf("group %q: commit: %w", g.id, ErrDead)
	}
	if gen < 0 && g.state == Empty {
		return nil
	}
	if gen >= 0 || memberID != "" || instanceID != "" {
		m, err := g.validateMember(memberID, instanceID)
		if err != nil {
			return fmt.Errorf("group %q: commit: %w", g.id, err)
		}
		if gen != g.generation {
			return fmt.Errorf("group %q: commit: generation %d, group is at %d: %w", g.id, gen, g.generation, ErrIllegalGeneration)
		}
		if g.state == CompletingRebalance {
			return fmt.Errorf("group %q: commit: %w", g.id, ErrRebalanceInProgress)
		}
		m.deadline = now.Add(m.sessionTimeout)
		return nil
	}
	return fmt.Errorf("group %q: commit without a member while the group has %d members: %w", g.id, len(g.members), ErrUnknownMember)
}

// SetOffsets records offsets that are now durable.
func (g *Group) SetOffsets(offsets map[TopicPartition]Offset) {
	maps.Copy(g.offsets, offsets)
}

// DeleteOffsets forgets offsets that were deleted from durable storage.
func (g *Group) DeleteOffsets(tps []TopicPartition) {
	for _, tp := range tps {
		delete(g.offsets, tp)
	}
}

// Offset returns one committed offset.
func (g *Group) Offset(tp TopicPartition) (Offset, bool) {
	o, ok := g.offsets[tp]
	return o, ok
}

// Offsets returns every committed offset, sorted by topic and partition.
func (g *Group) Offsets() ([]TopicPartition, map[TopicPartition]Offset) {
	tps := slices.Collect(maps.Keys(g.offsets))
	slices.SortFunc(tps, compareTP)
	return tps, maps.Clone(g.offsets)
}

func compareTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// ExpiredOffsets lists the offsets whose retention has passed at now (only
// while the group is Empty), sorted. The owner deletes them durably and then
// calls DeleteOffsets.
func (g *Group) ExpiredOffsets(now time.Time) []TopicPartition {
	if g.state != Empty {
		return nil
	}
	var out []TopicPartition
	for tp, o := range g.offsets {
		base := o.CommitTime
		if g.stateSince.After(base) {
			base = g.stateSince
		}
		if !now.Before(base.Add(g.cfg.OffsetsRetention)) {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// Deletable reports whether the group holds nothing worth keeping: Empty,
// with no pending member and no offsets.
func (g *Group) Deletable() bool {
	return (g.state == Empty || g.state == Dead) && len(g.pending) == 0 && len(g.offsets) == 0
}

// Subscribed reports which topics members subscribe to, given a decoder of
// member metadata for the selected protocol. Used by OffsetDelete, which may
// not delete offsets of a topic the group consumes.
func (g *Group) Subscribed(topics func(metadata []byte) []string) map[string]bool {
	out := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range topics(m.metadataFor(g.protocol)) {
			out[t] = true
		}
	}
	return out
}
