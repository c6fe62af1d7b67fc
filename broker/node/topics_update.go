package node

// This file owns changes to existing topics: configs and partition counts.
// Topic values in the registry are replaced, never mutated, so readers that
// took a *Topic keep a consistent view.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
)

// alterConflictRetries bounds the compare-and-swap attempts of a config
// change that loses to concurrent writes of the topic.
const alterConflictRetries = 5

// alterTopicConfigs applies fn to a copy of the topic's explicit configs,
// validates the result and stores it with a compare-and-swap. The copy is
// read from etcd, not from this broker's view, which may not have caught up
// with a change made through another broker a moment ago; a lost swap reads
// again and retries.
func (b *Node) AlterTopicConfigs(ctx context.Context, name string, validateOnly bool, fn func(map[string]string) error) error {
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	t := b.LookupTopic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	for attempt := 1; ; attempt++ {
		mt, err := b.Store.Topic(ctx, name)
		if err != nil {
			return err
		}
		if mt.ID != t.Meta.ID {
			return fmt.Errorf("topic %q was deleted and created again: %w", name, meta.ErrConflict)
		}
		configs := maps.Clone(mt.Configs)
		if configs == nil {
			configs = make(map[string]string)
		}
		if err := fn(configs); err != nil {
			return err
		}
		if err := validateTopicConfigs(configs); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		mt.Configs = configs
		updated, err := b.Store.UpdateTopic(ctx, mt)
		if errors.Is(err, meta.ErrConflict) && attempt < alterConflictRetries {
			continue
		}
		if err != nil {
			return err
		}
		if err := b.AdoptTopic(ctx, t, updated); err != nil {
			return err
		}
		b.Logger.Info().Str("topic", name).Interface("configs", configs).Msg("altered topic configs")
		return nil
	}
}

// addPartitions grows a topic to count partitions.
func (b *Node) AddPartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	t := b.LookupTopic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	if count <= t.Meta.Partitions {
		return fmt.Errorf("%w: topic %q has %d partitions; the count can only grow", ErrInvalidPartitions, name, t.Meta.Partitions)
	}
	if count > 100000 {
		return fmt.Errorf("%w: %d", ErrInvalidPartitions, count)
	}
	if err := b.checkCreate(name, 0, int64(count-t.Meta.Partitions)); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if err := b.admitMutation(name, int64(count-t.Meta.Partitions), "adding partitions to "+name); err != nil {
		return err
	}
	replicas, err := b.Hooks.PlaceMore(ctx, t, int(count))
	if err != nil {
		return err
	}
	updated, _, err := b.Store.AddTopicPartitions(ctx, t.Meta, replicas)
	if err != nil {
		return err
	}
	if err := b.AdoptTopic(ctx, t, updated); err != nil {
		return err
	}
	b.Logger.Info().Str("topic", name).Int32("partitions", count).Msg("added partitions")
	return nil
}

// adoptTopic replaces the registry entry of t with the newer metadata mt
// (written by this broker or, through the topic watch, by another): new
// settings are applied to every partition and added partitions are opened.
// The caller holds adminMu.
func (b *Node) AdoptTopic(ctx context.Context, t *Topic, mt meta.Topic) error {
	states := t.States
	if int(mt.Partitions) > len(states) {
		var err error
		if states, err = b.PartitionStates(ctx, mt); err != nil {
			return err
		}
		states = b.mergePendingStates(mt.ID, states)
	}
	nt := &Topic{Meta: mt, Settings: parseSettingsWith(mt.Configs, b.Cfg.TopicDefaults()), States: states, Partitions: slices.Clone(t.Partitions)}
	var fresh []*partition.Partition
	for i := len(t.Partitions); i < len(states); i++ {
		var p *partition.Partition
		if b.hosts(states[i]) {
			var err error
			if p, err = b.openPartition(nt, int32(i)); err != nil {
				for _, p := range fresh {
					_ = p.Log().Close() // nothing was appended; err says why the open failed
				}
				return err
			}
			fresh = append(fresh, p)
		}
		nt.Partitions = append(nt.Partitions, p)
	}
	b.ReplaceTopic(nt)
	if !maps.Equal(t.Meta.Configs, mt.Configs) {
		cfg := b.walConfig(nt.Settings)
		for _, p := range t.Hosted() {
			p.Reconfigure(cfg)
			// The replica core keeps min.insync.replicas from its open; a
			// change counts for the running partition, as Kafka's does.
			if nt.Settings.MinInsyncReplicas != t.Settings.MinInsyncReplicas {
				p.SetMinISR(nt.Settings.MinInsyncReplicas)
			}
		}
	}
	for _, p := range fresh {
		b.startPartition(p)
		p.SetState(CoreState(states[p.Index()]))
	}
	return nil
}

func (b *Node) ReplaceTopic(t *Topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topics[t.Meta.Name] = t
	b.byID[t.Meta.ID] = t
}

// mergePendingStates returns states with the newer states the partition
// watch delivered while topic id was not yet registered here. The caller
// holds adminMu.
func (b *Node) mergePendingStates(id [16]byte, states []meta.PartitionState) []meta.PartitionState {
	cloned := false
	for key, st := range b.PendingStates {
		if key.TopicID != id || int(key.Partition) >= len(states) {
			continue
		}
		if st.Revision > states[key.Partition].Revision {
			if !cloned {
				states, cloned = slices.Clone(states), true
			}
			states[key.Partition] = st
		}
		delete(b.PendingStates, key)
	}
	return states
}
