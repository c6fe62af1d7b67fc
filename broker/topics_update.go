package broker

// This file owns changes to existing topics: configs and partition counts.
// Topic values in the registry are replaced, never mutated, so readers that
// took a *topic keep a consistent view.

import (
	"context"
	"fmt"
	"maps"

	"github.com/sluice-mq/sluice/meta"
)

// alterTopicConfigs applies fn to a copy of the topic's explicit configs,
// validates the result and stores it with a compare-and-swap.
func (b *Broker) alterTopicConfigs(ctx context.Context, name string, validateOnly bool, fn func(map[string]string) error) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.lookupTopic(name)
	if t == nil {
		return fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	mt := t.meta
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
	if err != nil {
		return err
	}
	nt := &topic{meta: updated, settings: parseSettings(updated.Configs), partitions: t.partitions}
	b.replaceTopic(nt)
	cfg := nt.settings.walConfig()
	for _, p := range nt.partitions {
		p.reconfigure(cfg)
	}
	b.logger.Info().Str("topic", name).Interface("configs", configs).Msg("altered topic configs")
	return nil
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
	mt := t.meta
	mt.Partitions = count
	updated, err := b.store.UpdateTopic(ctx, mt)
	if err != nil {
		return err
	}
	nt := &topic{meta: updated, settings: t.settings, partitions: append([]*partition(nil), t.partitions...)}
	var fresh []*partition
	for i := int32(len(t.partitions)); i < count; i++ {
		p, err := b.openPartition(nt, i)
		if err != nil {
			for _, p := range fresh {
				_ = p.log.Close() // nothing was appended; err says why the open failed
			}
			return err
		}
		fresh = append(fresh, p)
	}
	nt.partitions = append(nt.partitions, fresh...)
	b.replaceTopic(nt)
	for _, p := range fresh {
		b.startPartition(p)
	}
	b.logger.Info().Str("topic", name).Int32("partitions", count).Msg("added partitions")
	return nil
}

func (b *Broker) replaceTopic(t *topic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.topics[t.meta.Name] = t
	b.byID[t.meta.ID] = t
}
