package broker

// This file owns changes to existing topics: configs and partition counts.
// Topic values in the registry are replaced, never mutated, so readers that
// took a *topic keep a consistent view.

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
func (b *Broker) alterTopicConfigs(ctx context.Context, name string, validateOnly bool, fn func(map[string]string) error) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.lookupTopic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	for attempt := 1; ; attempt++ {
		mt, err := b.store.Topic(ctx, name)
		if err != nil {
			return err
		}
		if mt.ID != t.meta.ID {
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
		updated, err := b.store.UpdateTopic(ctx, mt)
		if errors.Is(err, meta.ErrConflict) && attempt < alterConflictRetries {
			continue
		}
		if err != nil {
			return err
		}
		if err := b.adoptTopic(ctx, t, updated); err != nil {
			return err
		}
		b.logger.Info().Str("topic", name).Interface("configs", configs).Msg("altered topic configs")
		return nil
	}
}

// addPartitions grows a topic to count partitions.
func (b *Broker) addPartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.lookupTopic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	if count <= t.meta.Partitions {
		return fmt.Errorf("%w: topic %q has %d partitions; the count can only grow", errInvalidPartitions, name, t.meta.Partitions)
	}
	if count > 100000 {
		return fmt.Errorf("%w: %d", errInvalidPartitions, count)
	}
	if validateOnly {
		return nil
	}
	replicas, err := b.placeMore(t, int(count))
	if err != nil {
		return err
	}
	updated, _, err := b.store.AddTopicPartitions(ctx, t.meta, replicas)
	if err != nil {
		return err
	}
	if err := b.adoptTopic(ctx, t, updated); err != nil {
		return err
	}
	b.logger.Info().Str("topic", name).Int32("partitions", count).Msg("added partitions")
	return nil
}

// adoptTopic replaces the registry entry of t with the newer metadata mt
// (written by this broker or, through the topic watch, by another): new
// settings are applied to every partition and added partitions are opened.
// The caller holds adminMu.
func (b *Broker) adoptTopic(ctx context.Context, t *topic, mt meta.Topic) error {
	states := t.states
	if int(mt.Partitions) > len(states) {
		var err error
		if states, err = b.partitionStates(ctx, mt); err != nil {
			return err
		}
		states = b.mergePendingStates(mt.ID, states)
	}
	nt := &topic{meta: mt, settings: parseSettingsWith(mt.Configs, b.cfg.topicDefaults()), states: states, partitions: slices.Clone(t.partitions)}
	var fresh []*partition.Partition
	for i := len(t.partitions); i < len(states); i++ {
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
		nt.partitions = append(nt.partitions, p)
	}
	b.replaceTopic(nt)
	if !maps.Equal(t.meta.Configs, mt.Configs) {
		cfg := b.walConfig(nt.settings)
		for _, p := range t.hosted() {
			p.Reconfigure(cfg)
			// The replica core keeps min.insync.replicas from its open; a
			// change counts for the running partition, as Kafka's does.
			if nt.settings.MinInsyncReplicas != t.settings.MinInsyncReplicas {
				p.SetMinISR(nt.settings.MinInsyncReplicas)
			}
		}
	}
	for _, p := range fresh {
		b.startPartition(p)
		p.SetState(coreState(states[p.Index()]))
	}
	return nil
}

func (b *Broker) replaceTopic(t *topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topics[t.meta.Name] = t
	b.byID[t.meta.ID] = t
}
