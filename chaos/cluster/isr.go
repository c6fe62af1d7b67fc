package cluster

// isr.go owns the question a run ends with: does every partition of a topic
// have its whole replica set in sync? Only a partition's leader knows its
// in-sync set (a follower's Metadata answers from the live-broker view), so
// the question goes to the leader each broker names.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionSync is one partition's replicas and its leader's in-sync set.
type PartitionSync struct {
	Partition int32
	Leader    int32
	Replicas  []int32
	ISR       []int32
}

// InSync reports whether every replica is in the in-sync set.
func (p PartitionSync) InSync() bool {
	if p.Leader < 0 || len(p.Replicas) == 0 {
		return false
	}
	for _, r := range p.Replicas {
		if !slices.Contains(p.ISR, r) {
			return false
		}
	}
	return true
}

// Sync asks each partition's leader of topic for its in-sync set. A
// partition whose leader is unknown or down is reported with Leader -1.
func (c *Cluster) Sync(ctx context.Context, topic string) ([]PartitionSync, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.life.RUnlock()
	var leaders map[int32]int32
	var all []PartitionSync
	err := c.fromAnyUp(func(id int32) error {
		mt, err := c.topicMetadata(ctx, id, topic)
		if err != nil {
			return err
		}
		leaders = map[int32]int32{}
		all = all[:0]
		for _, mp := range mt.Partitions {
			leaders[mp.Partition] = mp.Leader
			all = append(all, PartitionSync{Partition: mp.Partition, Leader: -1, Replicas: mp.Replicas})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chaos/cluster: in-sync sets of %s: %w", topic, err)
	}
	for i := range all {
		p := &all[i]
		leader := leaders[p.Partition]
		b, err := c.broker(leader)
		if err != nil || !b.proc.up() {
			continue
		}
		mt, err := c.topicMetadata(ctx, leader, topic)
		if err != nil {
			continue
		}
		j := slices.IndexFunc(mt.Partitions, func(mp kmsg.MetadataResponseTopicPartition) bool { return mp.Partition == p.Partition })
		if j < 0 || mt.Partitions[j].Leader != leader {
			continue // leadership moved between the two questions
		}
		p.Leader, p.ISR = leader, mt.Partitions[j].ISR
	}
	slices.SortFunc(all, func(a, b PartitionSync) int { return int(a.Partition - b.Partition) })
	return all, nil
}

// topicMetadata is broker id's Metadata answer for one topic.
func (c *Cluster) topicMetadata(ctx context.Context, id int32, topic string) (kmsg.MetadataResponseTopic, error) {
	md, err := c.metadata(ctx, id, topic)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	i := slices.IndexFunc(md.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
	if i < 0 {
		return kmsg.MetadataResponseTopic{}, fmt.Errorf("broker %d: topic %s missing from its metadata", id, topic)
	}
	return md.Topics[i], nil
}
