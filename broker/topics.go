package broker

// This file owns the topic registry: the in-memory view of the topics in
// etcd and the open partitions of each.
//
// Invariant: a topic is in b.topics only once its metadata is in etcd and
// all its partitions are open; it leaves b.topics before its partitions stop.
// Lock order: b.mu, then a partition's mu. No lock is held across etcd calls.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

const maxTopicNameLen = 249

type topic struct {
	meta       meta.Topic
	settings   topicSettings
	partitions []*partition
}

func uuidString(id [16]byte) string { return uuid.UUID(id).String() }

// validateTopicName applies Kafka's rules for topic names.
func validateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", errInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is reserved", errInvalidTopic, name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("%w: %d characters, at most %d", errInvalidTopic, len(name), maxTopicNameLen)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q has %q; use letters, digits, '.', '_' and '-'", errInvalidTopic, name, c)
		}
	}
	return nil
}

// loadTopics opens the partitions of every topic in etcd and sets aside the
// local data of topics etcd does not know (datadir.go): deleted while this
// broker was down, or a sign of the wrong metadata, so never deleted here.
func (b *Broker) loadTopics(ctx context.Context) error {
	ts, err := b.store.Topics(ctx)
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	known := make(map[string]bool, len(ts))
	for _, t := range ts {
		known[uuidString(t.ID)] = true
	}
	if err := b.setAsideUnknown(known); err != nil {
		return err
	}
	for _, t := range ts {
		if err := b.openTopic(t); err != nil {
			return err
		}
	}
	return nil
}

// openTopic opens all partitions of t and registers it.
func (b *Broker) openTopic(t meta.Topic) error {
	tp := &topic{meta: t, settings: parseSettings(t.Configs)}
	for i := int32(0); i < t.Partitions; i++ {
		p, err := b.openPartition(tp, i)
		if err != nil {
			for _, p := range tp.partitions {
				_ = p.log.Close() // nothing was appended; err says why the open failed
			}
			return err
		}
		tp.partitions = append(tp.partitions, p)
	}
	b.mu.Lock()
	b.topics[t.Name] = tp
	b.byID[t.ID] = tp
	b.mu.Unlock()
	for _, p := range tp.partitions {
		b.startPartition(p)
	}
	return nil
}

func (b *Broker) openPartition(tp *topic, i int32) (*partition, error) {
	logger := b.logger.With().Str("topic", tp.meta.Name).Int32("partition", i).Logger()
	var l *wal.Log
	var err error
	if b.journal != nil {
		key := fmt.Sprintf("%s/%d", uuidString(tp.meta.ID), i)
		l, err = wal.OpenJournaled(b.fs, b.walDir(tp.meta.ID, i), tp.settings.walConfig(), b.journal, key, logger)
	} else {
		l, err = wal.Open(b.fs, b.walDir(tp.meta.ID, i), tp.settings.walConfig(), logger)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: open log of %s-%d: %w", tp.meta.Name, i, err)
	}
	p, err := openPartition(l, partitionOptions{
		topic:          tp.meta.Name,
		index:          i,
		self:           b.cfg.NodeID,
		queue:          b.cfg.PartitionQueue,
		fs:             b.fs,
		snapshotPath:   b.snapshotPath(tp.meta.ID, i),
		producerExpiry: b.cfg.ProducerIDExpiration,
		now:            time.Now,
		metrics:        b.m,
		logger:         logger,
	})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return p, nil
}

func (b *Broker) startPartition(p *partition) {
	ctx, cancel := context.WithCancel(b.partCtx)
	p.stop = cancel
	b.partWG.Add(1)
	go func() {
		defer b.partWG.Done()
		defer cancel()
		p.run(ctx)
	}()
}

// createTopic validates, stores and opens a new topic.
func (b *Broker) createTopic(ctx context.Context, name string, partitions int32, replication int16, configs map[string]string, validateOnly bool) (meta.Topic, error) {
	if err := validateTopicName(name); err != nil {
		return meta.Topic{}, err
	}
	if partitions == -1 {
		partitions = b.cfg.DefaultPartitions
	}
	if partitions < 1 || partitions > 100000 {
		return meta.Topic{}, fmt.Errorf("%w: %d", errInvalidPartitions, partitions)
	}
	if replication == -1 {
		replication = 1
	}
	if replication != 1 {
		return meta.Topic{}, fmt.Errorf("%w: %d requested, this cluster has 1 broker", errInvalidReplication, replication)
	}
	if err := validateTopicConfigs(configs); err != nil {
		return meta.Topic{}, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.lookupTopic(name) != nil {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicExists)
	}
	t := meta.Topic{Name: name, Partitions: partitions, ReplicationFactor: replication, Configs: configs}
	if validateOnly {
		return t, nil
	}
	t, err := b.store.CreateTopic(ctx, t)
	if err != nil {
		return meta.Topic{}, err
	}
	if err := b.openTopic(t); err != nil {
		return meta.Topic{}, err
	}
	b.logger.Info().Str("topic", name).Int32("partitions", partitions).Str("id", uuidString(t.ID)).Msg("created topic")
	return t, nil
}

// autoCreate creates a topic on first use when the broker allows it. A
// concurrent creation by another request is not an error.
func (b *Broker) autoCreate(ctx context.Context, name string) (*topic, error) {
	_, err := b.createTopic(ctx, name, b.cfg.DefaultPartitions, 1, nil, false)
	if err != nil && !errors.Is(err, meta.ErrTopicExists) {
		return nil, err
	}
	if t := b.lookupTopic(name); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %s", errUnknownTopic, name)
}

// deleteTopic removes a topic from etcd, stops its partitions and deletes
// its local logs.
func (b *Broker) deleteTopic(ctx context.Context, name string) (meta.Topic, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.lookupTopic(name) == nil {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	t, err := b.store.DeleteTopic(ctx, name)
	if err != nil {
		return meta.Topic{}, err
	}
	b.mu.Lock()
	tp := b.topics[name]
	delete(b.topics, name)
	if tp != nil {
		delete(b.byID, tp.meta.ID)
	}
	b.mu.Unlock()
	if tp != nil {
		for _, p := range tp.partitions {
			p.stopAndClose()
		}
		for _, sub := range []string{"wal", "state"} {
			dir := filepath.Join(b.cfg.DataDir, sub, uuidString(tp.meta.ID))
			if err := vfs.RemoveAllDurable(b.fs, dir, b.trashDir()); err != nil {
				b.logger.Error().Err(err).Str("topic", name).Str("dir", dir).Msg("remove topic directory")
			}
		}
	}
	if b.coord != nil {
		b.coord.forgetTopic(ctx, name, t.ID)
	}
	b.logger.Info().Str("topic", name).Msg("deleted topic")
	return t, nil
}

func (b *Broker) lookupTopic(name string) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

func (b *Broker) lookupTopicID(id [16]byte) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// partitionOf returns the partition, or errUnknownTopic.
func (b *Broker) partitionOf(name string, index int32) (*partition, error) {
	t := b.lookupTopic(name)
	if t == nil || index < 0 || int(index) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: %s-%d", errUnknownTopic, name, index)
	}
	return t.partitions[index], nil
}

// sortedTopics returns a snapshot of all topics in name order.
func (b *Broker) sortedTopics() []*topic {
	b.mu.RLock()
	out := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t)
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Name < out[j].meta.Name })
	return out
}

func (b *Broker) allPartitions() []*partition {
	var out []*partition
	for _, t := range b.sortedTopics() {
		out = append(out, t.partitions...)
	}
	return out
}

// closeTopics closes every log after the partition owners have stopped.
func (b *Broker) closeTopics() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range b.topics {
		for _, p := range t.partitions {
			if err := p.log.Close(); err != nil {
				b.logger.Warn().Err(err).Str("topic", name).Int32("partition", p.index).Msg("close log")
			}
		}
	}
}
