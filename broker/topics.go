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
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

const maxTopicNameLen = 249

// topic is one topic as this broker knows it. Values are replaced, never
// mutated, so a reader that took a *topic keeps a consistent view.
type topic struct {
	meta     meta.Topic
	settings topicSettings
	// states holds each partition's replicas, leader and leader epoch as
	// etcd last reported them, by partition number.
	states []meta.PartitionState
	// partitions holds the partitions this broker hosts (it is one of their
	// replicas), by partition number; nil where it hosts none.
	partitions []*partition.Partition
}

// hosts reports whether this broker is a replica of partition state st.
func (b *Broker) hosts(st meta.PartitionState) bool {
	return slices.Contains(st.Replicas, b.cfg.NodeID)
}

// local returns the partition's local replica: errUnknownTopic when the
// topic has no such partition, errNotLeader when this broker does not host
// it (the client's metadata is stale; Metadata names the leader).
func (t *topic) local(index int32) (*partition.Partition, error) {
	if index < 0 || int(index) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: %s-%d", errUnknownTopic, t.meta.Name, index)
	}
	if p := t.partitions[index]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s-%d is not on node", errNotLeader, t.meta.Name, index)
}

// hosted returns the partitions this broker hosts, in partition order.
func (t *topic) hosted() []*partition.Partition {
	out := make([]*partition.Partition, 0, len(t.partitions))
	for _, p := range t.partitions {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
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
		states, err := b.partitionStates(ctx, t)
		if err != nil {
			return err
		}
		if err := b.openTopic(t, states); err != nil {
			return err
		}
	}
	return nil
}

// partitionStates reads the partition states of t. A topic written by a
// version of Sluice that kept none was a lone broker's: its partitions get
// this broker as their only replica and leader, at epoch 0.
func (b *Broker) partitionStates(ctx context.Context, t meta.Topic) ([]meta.PartitionState, error) {
	states, err := b.store.Partitions(ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("broker: partitions of %s: %w", t.Name, err)
	}
	have := make(map[int32]meta.PartitionState, len(states))
	for _, st := range states {
		have[st.Partition] = st
	}
	out := make([]meta.PartitionState, t.Partitions)
	for i := range t.Partitions {
		st, ok := have[i]
		if !ok {
			st, err = b.store.PutPartitionIfMissing(ctx, meta.PartitionState{
				TopicID: t.ID, Partition: i, Replicas: []int32{b.cfg.NodeID}, Leader: b.cfg.NodeID,
			})
			if err != nil {
				return nil, fmt.Errorf("broker: record partition %s-%d: %w", t.Name, i, err)
			}
		}
		out[i] = st
	}
	return out, nil
}

// openTopic opens the partitions of t this broker hosts and registers it.
func (b *Broker) openTopic(t meta.Topic, states []meta.PartitionState) error {
	states = b.mergePendingStates(t.ID, states)
	tp := &topic{meta: t, settings: parseSettingsWith(t.Configs, b.cfg.topicDefaults()), states: states}
	tp.partitions = make([]*partition.Partition, len(states))
	for i, st := range states {
		if !b.hosts(st) {
			continue
		}
		p, err := b.openPartition(tp, int32(i))
		if err != nil {
			for _, p := range tp.hosted() {
				_ = p.Log().Close() // nothing was appended; err says why the open failed
			}
			return err
		}
		tp.partitions[i] = p
	}
	b.mu.Lock()
	b.topics[t.Name] = tp
	b.byID[t.ID] = tp
	b.mu.Unlock()
	for i, p := range tp.partitions {
		if p != nil {
			b.startPartition(p)
			p.SetState(coreState(states[i]))
		}
	}
	return nil
}

// coreState is a partition state as the replica cores see it.
func coreState(st meta.PartitionState) replica.State {
	rs := make([]replica.NodeID, len(st.Replicas))
	for i, id := range st.Replicas {
		rs[i] = replica.NodeID(id)
	}
	return replica.State{Epoch: wal.Epoch(st.LeaderEpoch), Leader: replica.NodeID(st.Leader), Replicas: rs,
		Incarnations: incarnationsOf(st.Incarnations), Version: st.Revision}
}

func (b *Broker) openPartition(tp *topic, i int32) (*partition.Partition, error) {
	// The wal adds component=wal; the partition's own lines say partition.
	logger := b.nodeLog.With().Str("topic", tp.meta.Name).Int32("partition", i).Logger()
	var l *wal.Log
	var err error
	if b.journal != nil {
		key := fmt.Sprintf("%s/%d", uuidString(tp.meta.ID), i)
		l, err = wal.OpenJournaled(b.fs, b.walDir(tp.meta.ID, i), b.walConfig(tp.settings), b.journal, key, logger)
	} else {
		l, err = wal.Open(b.fs, b.walDir(tp.meta.ID, i), b.walConfig(tp.settings), logger)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: open log of %s-%d: %w", tp.meta.Name, i, err)
	}
	if err := b.alignWithRemote(tp, i, l); err != nil {
		_ = l.Close()
		return nil, err
	}
	p, err := partition.Open(l, partition.Options{
		Topic:          tp.meta.Name,
		Index:          i,
		TopicID:        tp.meta.ID,
		MinISR:         tp.settings.MinInsyncReplicas,
		SoleReplica:    len(tp.states[i].Replicas) == 1,
		Net:            partitionNet{b: b, key: partitionKey{TopicID: tp.meta.ID, Partition: i}},
		Self:           b.cfg.NodeID,
		Incarnation:    b.incarnation,
		Queue:          b.cfg.PartitionQueue,
		FS:             b.fs,
		SnapshotPath:   b.snapshotPath(tp.meta.ID, i),
		ProducerExpiry: b.cfg.ProducerIDExpiration,
		Now:            b.now,
		Metrics:        b.m,
		Logger:         logger.With().Str("component", "partition").Logger(),
	})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	return p, nil
}

// startPartition runs p's owner goroutine until the broker stops or
// the partition is deleted (StopAndClose).
func (b *Broker) startPartition(p *partition.Partition) {
	b.partWG.Add(1)
	go func() {
		defer b.partWG.Done()
		p.Run(b.partCtx)
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
	if err := validateTopicConfigs(configs); err != nil {
		return meta.Topic{}, err
	}
	replicas, err := b.place(int(partitions), int(replication))
	if err != nil {
		return meta.Topic{}, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.lookupTopic(name) != nil {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicExists)
	}
	t := meta.Topic{Name: name, Partitions: partitions, ReplicationFactor: int16(len(replicas[0])), Configs: configs}
	if validateOnly {
		return t, nil
	}
	t, states, err := b.store.CreateTopicWithPartitions(ctx, t, replicas)
	if err != nil {
		return meta.Topic{}, err
	}
	if err := b.openTopic(t, states); err != nil {
		return meta.Topic{}, err
	}
	b.logger.Info().Str("topic", name).Int32("partitions", partitions).Str("id", uuidString(t.ID)).Msg("created topic")
	b.adminMu.Unlock()
	b.awaitLeaders(ctx, t.ID, topicLeaderWait)
	b.adminMu.Lock() // for the deferred unlock
	return t, nil
}

// autoCreate creates a topic on first use when the broker allows it. A
// concurrent creation by another request is not an error.
func (b *Broker) autoCreate(ctx context.Context, name string) (*topic, error) {
	_, err := b.createTopic(ctx, name, b.cfg.DefaultPartitions, -1, nil, false)
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
	if tp := b.lookupTopic(name); tp != nil && tp.meta.ID == t.ID {
		b.dropTopic(ctx, tp)
	}
	// Its objects and heads go through the retention machine.
	b.deleteTopicObjects(t.ID, t.Partitions)
	b.logger.Info().Str("topic", name).Msg("deleted topic")
	return t, nil
}

// dropTopic takes a deleted topic out of the registry, stops its
// partitions, deletes its local logs and forgets its committed offsets. The
// caller holds adminMu.
func (b *Broker) dropTopic(ctx context.Context, tp *topic) {
	name := tp.meta.Name
	b.mu.Lock()
	if b.topics[name] == tp {
		delete(b.topics, name)
	}
	delete(b.byID, tp.meta.ID)
	b.mu.Unlock()
	for _, p := range tp.hosted() {
		p.StopAndClose()
	}
	for _, sub := range []string{"wal", "state"} {
		dir := filepath.Join(b.cfg.DataDir, sub, uuidString(tp.meta.ID))
		if err := vfs.RemoveAllDurable(b.fs, dir, b.trashDir()); err != nil {
			b.logger.Error().Err(err).Str("topic", name).Str("dir", dir).Msg("remove topic directory")
		}
	}
	if b.coord != nil {
		b.coord.forgetTopic(ctx, name, tp.meta.ID)
	}
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

// partitionOf returns the local replica of a partition: errUnknownTopic if
// there is no such partition, errNotLeader if this broker does not host it.
func (b *Broker) partitionOf(name string, index int32) (*partition.Partition, error) {
	t := b.lookupTopic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %s-%d", errUnknownTopic, name, index)
	}
	return t.local(index)
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

func (b *Broker) allPartitions() []*partition.Partition {
	var out []*partition.Partition
	for _, t := range b.sortedTopics() {
		out = append(out, t.hosted()...)
	}
	return out
}

// closeTopics closes every log after the partition owners have stopped.
func (b *Broker) closeTopics() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range b.topics {
		for _, p := range t.hosted() {
			if err := p.Log().Close(); err != nil {
				b.logger.Warn().Err(err).Str("topic", name).Int32("partition", p.Index()).Msg("close log")
			}
		}
	}
}
