package node

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
	"time"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

const maxTopicNameLen = 249

// topicLeaderWait bounds how long a topic's creation waits for its
// partitions' first leaders.
const topicLeaderWait = 5 * time.Second

// Topic is one topic as this broker knows it. Values are replaced, never
// mutated, so a reader that took a *Topic keeps a consistent view.
type Topic struct {
	Meta     meta.Topic
	Settings TopicSettings
	// States holds each partition's replicas, leader and leader epoch as
	// etcd last reported them, by partition number.
	States []meta.PartitionState
	// Partitions holds the partitions this broker hosts (it is one of their
	// replicas), by partition number; nil where it hosts none.
	Partitions []*partition.Partition
}

// hosts reports whether this broker is a replica of partition state st.
func (b *Node) hosts(st meta.PartitionState) bool {
	return slices.Contains(st.Replicas, b.Cfg.NodeID)
}

// local returns the partition's local replica: ErrUnknownTopic when the
// topic has no such partition, ErrNotLeader when this broker does not host
// it (the client's metadata is stale; Metadata names the leader).
func (t *Topic) Local(index int32) (*partition.Partition, error) {
	if index < 0 || int(index) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, t.Meta.Name, index)
	}
	if p := t.Partitions[index]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s-%d is not on node", ErrNotLeader, t.Meta.Name, index)
}

// hosted returns the partitions this broker hosts, in partition order.
func (t *Topic) Hosted() []*partition.Partition {
	out := make([]*partition.Partition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

func UUIDString(id [16]byte) string { return uuid.UUID(id).String() }

// ValidateTopicName applies Kafka's rules for topic names.
func ValidateTopicName(name string) error {
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
func (b *Node) LoadTopics(ctx context.Context) error {
	ts, err := b.Store.Topics(ctx)
	if err != nil {
		return fmt.Errorf("broker: list topics: %w", err)
	}
	known := make(map[string]bool, len(ts))
	for _, t := range ts {
		known[UUIDString(t.ID)] = true
	}
	if err := b.setAsideUnknown(known); err != nil {
		return err
	}
	for _, t := range ts {
		states, err := b.PartitionStates(ctx, t)
		if err != nil {
			return err
		}
		if err := b.OpenTopic(t, states); err != nil {
			return err
		}
	}
	return nil
}

// partitionStates reads the partition states of t. A topic written by a
// version of Sluice that kept none was a lone broker's: its partitions get
// this broker as their only replica and leader, at epoch 0.
func (b *Node) PartitionStates(ctx context.Context, t meta.Topic) ([]meta.PartitionState, error) {
	states, err := b.Store.Partitions(ctx, t.ID)
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
			st, err = b.Store.PutPartitionIfMissing(ctx, meta.PartitionState{
				TopicID: t.ID, Partition: i, Replicas: []int32{b.Cfg.NodeID}, Leader: b.Cfg.NodeID,
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
func (b *Node) OpenTopic(t meta.Topic, states []meta.PartitionState) error {
	states = b.mergePendingStates(t.ID, states)
	tp := &Topic{Meta: t, Settings: parseSettingsWith(t.Configs, b.Cfg.TopicDefaults()), States: states}
	tp.Partitions = make([]*partition.Partition, len(states))
	for i, st := range states {
		if !b.hosts(st) {
			continue
		}
		p, err := b.openPartition(tp, int32(i))
		if err != nil {
			for _, p := range tp.Hosted() {
				_ = p.Log().Close() // nothing was appended; err says why the open failed
			}
			return err
		}
		tp.Partitions[i] = p
	}
	b.mu.Lock()
	b.topics[t.Name] = tp
	b.byID[t.ID] = tp
	b.mu.Unlock()
	for i, p := range tp.Partitions {
		if p != nil {
			b.startPartition(p)
			p.SetState(CoreState(states[i]))
		}
	}
	return nil
}

// CoreState is a partition state as the replica cores see it.
func CoreState(st meta.PartitionState) replica.State {
	rs := make([]replica.NodeID, len(st.Replicas))
	for i, id := range st.Replicas {
		rs[i] = replica.NodeID(id)
	}
	return replica.State{Epoch: wal.Epoch(st.LeaderEpoch), Leader: replica.NodeID(st.Leader), Replicas: rs,
		Incarnations: IncarnationsOf(st.Incarnations), Version: st.Revision}
}

func (b *Node) openPartition(tp *Topic, i int32) (*partition.Partition, error) {
	// The wal adds component=wal; the partition's own lines say partition.
	logger := b.NodeLog.With().Str("topic", tp.Meta.Name).Int32("partition", i).Logger()
	var l *wal.Log
	var err error
	if b.Journal != nil {
		key := fmt.Sprintf("%s/%d", UUIDString(tp.Meta.ID), i)
		l, err = wal.OpenJournaled(b.FS, b.WalDir(tp.Meta.ID, i), b.walConfig(tp.Settings), b.Journal, key, logger)
	} else {
		l, err = wal.Open(b.FS, b.WalDir(tp.Meta.ID, i), b.walConfig(tp.Settings), logger)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: open log of %s-%d: %w", tp.Meta.Name, i, err)
	}
	if err := b.alignWithRemote(tp, i, l); err != nil {
		_ = l.Close()
		return nil, err
	}
	p, err := partition.Open(l, partition.Options{
		Topic:          tp.Meta.Name,
		Index:          i,
		TopicID:        tp.Meta.ID,
		MinISR:         tp.Settings.MinInsyncReplicas,
		SoleReplica:    len(tp.States[i].Replicas) == 1,
		Net:            b.Hooks.Net(PartitionKey{TopicID: tp.Meta.ID, Partition: i}),
		Self:           b.Cfg.NodeID,
		Incarnation:    b.Incarnation,
		Queue:          b.Cfg.PartitionQueue,
		FS:             b.FS,
		SnapshotPath:   b.snapshotPath(tp.Meta.ID, i),
		ProducerExpiry: b.Cfg.ProducerIDExpiration,
		Now:            b.now,
		Metrics:        b.M,
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
func (b *Node) startPartition(p *partition.Partition) {
	b.PartWG.Add(1)
	go func() {
		defer b.PartWG.Done()
		p.Run(b.PartCtx)
	}()
}

// createTopic validates, stores and opens a new topic.
func (b *Node) CreateTopic(ctx context.Context, name string, partitions int32, replication int16, configs map[string]string, validateOnly bool) (meta.Topic, error) {
	if err := ValidateQualifiedTopicName(name); err != nil {
		return meta.Topic{}, err
	}
	if partitions == -1 {
		partitions = b.Cfg.DefaultPartitions
	}
	if partitions < 1 || partitions > 100000 {
		return meta.Topic{}, fmt.Errorf("%w: %d", ErrInvalidPartitions, partitions)
	}
	if err := validateTopicConfigs(configs); err != nil {
		return meta.Topic{}, err
	}
	replicas, err := b.Hooks.Place(ctx, name, int(partitions), int(replication))
	if err != nil {
		return meta.Topic{}, err
	}
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	if b.LookupTopic(name) != nil {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicExists)
	}
	if err := b.checkCreate(name, 1, int64(partitions)); err != nil {
		return meta.Topic{}, err
	}
	t := meta.Topic{Name: name, Partitions: partitions, ReplicationFactor: int16(len(replicas[0])), Configs: configs}
	if validateOnly {
		return t, nil
	}
	if err := b.admitMutation(name, int64(partitions), "creating topic "+name); err != nil {
		return meta.Topic{}, err
	}
	t, states, err := b.Store.CreateTopicWithPartitions(ctx, t, replicas)
	if err != nil {
		return meta.Topic{}, err
	}
	if err := b.OpenTopic(t, states); err != nil {
		return meta.Topic{}, err
	}
	b.Logger.Info().Str("topic", name).Int32("partitions", partitions).Str("id", UUIDString(t.ID)).Msg("created topic")
	b.AdminMu.Unlock()
	b.Hooks.AwaitLeaders(ctx, t.ID, topicLeaderWait)
	b.AdminMu.Lock() // for the deferred unlock
	return t, nil
}

// autoCreate creates a topic on first use when the broker allows it. A
// concurrent creation by another request is not an error.
func (b *Node) AutoCreate(ctx context.Context, name string) (*Topic, error) {
	_, err := b.CreateTopic(ctx, name, b.Cfg.DefaultPartitions, -1, nil, false)
	if err != nil && !errors.Is(err, meta.ErrTopicExists) {
		return nil, err
	}
	if t := b.LookupTopic(name); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
}

// deleteTopic removes a topic from etcd, stops its partitions and deletes
// its local logs.
func (b *Node) DeleteTopic(ctx context.Context, name string) (meta.Topic, error) {
	b.AdminMu.Lock()
	defer b.AdminMu.Unlock()
	old := b.LookupTopic(name)
	if old == nil {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, meta.ErrTopicNotFound)
	}
	if err := b.admitMutation(name, int64(old.Meta.Partitions), "deleting topic "+name); err != nil {
		return meta.Topic{}, err
	}
	t, err := b.Store.DeleteTopic(ctx, name)
	if err != nil {
		return meta.Topic{}, err
	}
	if tp := b.LookupTopic(name); tp != nil && tp.Meta.ID == t.ID {
		b.DropTopic(ctx, tp)
	}
	// Its objects and heads go through the retention machine.
	b.deleteTopicObjects(t.ID, t.Partitions)
	b.Logger.Info().Str("topic", name).Msg("deleted topic")
	return t, nil
}

// dropTopic takes a deleted topic out of the registry, stops its
// partitions, deletes its local logs and forgets its committed offsets. The
// caller holds adminMu.
func (b *Node) DropTopic(ctx context.Context, tp *Topic) {
	name := tp.Meta.Name
	b.mu.Lock()
	if b.topics[name] == tp {
		delete(b.topics, name)
	}
	delete(b.byID, tp.Meta.ID)
	b.mu.Unlock()
	for _, p := range tp.Hosted() {
		p.StopAndClose()
	}
	for _, sub := range []string{"wal", "state"} {
		dir := filepath.Join(b.Cfg.DataDir, sub, UUIDString(tp.Meta.ID))
		if err := vfs.RemoveAllDurable(b.FS, dir, b.TrashDir()); err != nil {
			b.Logger.Error().Err(err).Str("topic", name).Str("dir", dir).Msg("remove topic directory")
		}
	}
	if b.Hooks.ForgetTopic != nil {
		b.Hooks.ForgetTopic(ctx, name, tp.Meta.ID)
	}
}

func (b *Node) LookupTopic(name string) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

func (b *Node) LookupTopicID(id [16]byte) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byID[id]
}

// partitionOf returns the local replica of a partition: ErrUnknownTopic if
// there is no such partition, ErrNotLeader if this broker does not host it.
func (b *Node) PartitionOf(name string, index int32) (*partition.Partition, error) {
	t := b.LookupTopic(name)
	if t == nil {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, name, index)
	}
	return t.Local(index)
}

// sortedTopics returns a snapshot of all topics in name order.
func (b *Node) SortedTopics() []*Topic {
	b.mu.RLock()
	out := make([]*Topic, 0, len(b.topics))
	for _, t := range b.topics {
		out = append(out, t)
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Name < out[j].Meta.Name })
	return out
}

func (b *Node) AllPartitions() []*partition.Partition {
	var out []*partition.Partition
	for _, t := range b.SortedTopics() {
		out = append(out, t.Hosted()...)
	}
	return out
}

// closeTopics closes every log after the partition owners have stopped.
func (b *Node) CloseTopics() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range b.topics {
		for _, p := range t.Hosted() {
			if err := p.Log().Close(); err != nil {
				b.Logger.Warn().Err(err).Str("topic", name).Int32("partition", p.Index()).Msg("close log")
			}
		}
	}
}

// IncarnationsOf converts the incarnations stored in etcd (nil: none).
func IncarnationsOf(xs []uint64) []replica.Incarnation {
	if len(xs) == 0 {
		return nil
	}
	out := make([]replica.Incarnation, len(xs))
	for i, x := range xs {
		out[i] = replica.Incarnation(x)
	}
	return out
}

// Leads reports whether this broker's replica of the partition is its
// leader now.
func (b *Node) Leads(t *Topic, index int32) bool {
	if index < 0 || int(index) >= len(t.Partitions) || t.Partitions[index] == nil {
		return false
	}
	return t.Partitions[index].ReplicaStatus().Role == replica.RoleLeader
}
