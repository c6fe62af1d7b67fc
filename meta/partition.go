package meta

// This file owns partition state records: their JSON encoding (version 1),
// their creation together with their topic (CreateTopicWithPartitions,
// AddTopicPartitions), reads, and the controller's compare-and-swap
// (UpdatePartition).
//
//	<prefix>partitions/<topicID>/<n>
//	{"v":1,"replicas":[2,3,1],"leader":2,"leader_epoch":4,"incarnations":[7613...,0,9021...]}
//
// "incarnations" (optional, indexed like "replicas", 0 or missing: unknown)
// is the data-directory incarnation each replica was last known in sync
// with (broker/replica.State.Incarnations): a replica answering with
// another one lost its disk and does not count until it caught up. A
// reader that does not know the field ignores it, and a writer that does
// not know it drops it: the replicas are then unknown again, and the next
// election records them.
//
// The key names the topic ID and the partition; the value carries neither.
// Compare-and-swap uses the key's etcd mod revision (PartitionState.Revision),
// which is not stored.
//
// Invariant: a partition state is created in the same transaction as the
// topic key that covers it, or, when that would exceed MaxTxnOps, in earlier
// transactions each conditioned on the topic key being as the creator read it,
// with the topic key written last; a creator whose topic write loses deletes
// the partition keys it wrote.
// Invariant: a state with Partition >= its topic's Partitions is not a
// partition (yet): an AddTopicPartitions in progress, or the leftovers of one
// that ended in an ambiguous error. Readers that need partitions ignore it.
// Invariant: UpdatePartition never lowers a leader epoch, and never names a
// different leader at the same epoch: each epoch has at most one leader.
//
// Nothing here holds state beyond the Store's; every function is a few etcd
// transactions.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// partitionRecordVersion is the "v" field this build writes and reads.
const partitionRecordVersion = 1

// NoLeader is the Leader of a partition that has none.
const NoLeader int32 = -1

// PartitionState is one partition's replicas, leader and leader epoch.
type PartitionState struct {
	TopicID   [16]byte
	Partition int32
	// Replicas are node ids, distinct; Replicas[0] is the preferred leader.
	Replicas    []int32
	Leader      int32 // NoLeader (-1) when there is none; otherwise one of Replicas
	LeaderEpoch int32
	// Incarnations, indexed like Replicas (shorter or nil: unknown), are
	// the data-directory incarnations the replicas were last in sync with;
	// 0 is unknown.
	Incarnations []uint64
	// Revision is the etcd mod revision the state was read or written at,
	// for compare-and-swap in UpdatePartition. Not stored.
	Revision int64
}

// partitionRecord is the stored JSON form of a PartitionState. Leader and
// LeaderEpoch are pointers so that a record missing them is corrupt rather
// than a state led by node 0.
type partitionRecord struct {
	V           int     `json:"v"`
	Replicas    []int32 `json:"replicas"`
	Leader      *int32  `json:"leader"`
	LeaderEpoch *int32  `json:"leader_epoch"`
	// Incarnations is omitted when every one is unknown.
	Incarnations []uint64 `json:"incarnations,omitempty"`
}

// validatePartition checks what every stored state must satisfy.
func validatePartition(st PartitionState) error {
	switch {
	case st.TopicID == uuid.Nil:
		return fmt.Errorf("%w: zero topic id", ErrInvalidPartitionState)
	case st.Partition < 0:
		return fmt.Errorf("%w: partition %d", ErrInvalidPartitionState, st.Partition)
	case len(st.Replicas) == 0:
		return fmt.Errorf("%w: partition %d: no replicas", ErrInvalidPartitionState, st.Partition)
	case st.LeaderEpoch < 0:
		return fmt.Errorf("%w: partition %d: leader epoch %d", ErrInvalidPartitionState, st.Partition, st.LeaderEpoch)
	case st.Leader != NoLeader && !slices.Contains(st.Replicas, st.Leader):
		return fmt.Errorf("%w: partition %d: leader %d not in replicas %v", ErrInvalidPartitionState, st.Partition, st.Leader, st.Replicas)
	case len(st.Incarnations) > len(st.Replicas):
		return fmt.Errorf("%w: partition %d: %d incarnations for %d replicas", ErrInvalidPartitionState, st.Partition, len(st.Incarnations), len(st.Replicas))
	}
	for i, r := range st.Replicas {
		if r < 0 {
			return fmt.Errorf("%w: partition %d: replica %d", ErrInvalidPartitionState, st.Partition, r)
		}
		if slices.Contains(st.Replicas[:i], r) {
			return fmt.Errorf("%w: partition %d: replica %d listed twice in %v", ErrInvalidPartitionState, st.Partition, r, st.Replicas)
		}
	}
	return nil
}

func encodePartition(st PartitionState) ([]byte, error) {
	if err := validatePartition(st); err != nil {
		return nil, fmt.Errorf("meta: encode partition %s-%d: %w", uuid.UUID(st.TopicID), st.Partition, err)
	}
	rec := partitionRecord{
		V:           partitionRecordVersion,
		Replicas:    st.Replicas,
		Leader:      &st.Leader,
		LeaderEpoch: &st.LeaderEpoch,
	}
	if slices.ContainsFunc(st.Incarnations, func(x uint64) bool { return x != 0 }) {
		rec.Incarnations = st.Incarnations
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("meta: encode partition %s-%d: %w", uuid.UUID(st.TopicID), st.Partition, err)
	}
	return b, nil
}

// partitionID names one partition state.
type partitionID struct {
	topic [16]byte
	n     int32
}

func idOf(st PartitionState) partitionID { return partitionID{st.TopicID, st.Partition} }

// parsePartitionKey parses rel, "<topicID>/<n>" under the partitions
// prefix, accepting only the canonical forms this build writes.
func parsePartitionKey(rel string) (partitionID, error) {
	idText, nText, ok := strings.Cut(rel, "/")
	id, err := uuid.Parse(idText)
	if !ok || err != nil || id.String() != idText {
		return partitionID{}, fmt.Errorf("meta: partition key %q: %w", rel, ErrCorrupt)
	}
	n, err := strconv.ParseInt(nText, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != nText {
		return partitionID{}, fmt.Errorf("meta: partition key %q: %w", rel, ErrCorrupt)
	}
	return partitionID{topic: id, n: int32(n)}, nil
}

// decodePartition decodes kv, whose key is rel ("<topicID>/<n>") under the
// partitions prefix.
func decodePartition(rel string, kv *mvccpb.KeyValue) (PartitionState, error) {
	pid, err := parsePartitionKey(rel)
	if err != nil {
		return PartitionState{}, err
	}
	var r partitionRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return PartitionState{}, fmt.Errorf("meta: decode partition %q: %w: %w", rel, ErrCorrupt, err)
	}
	switch {
	case r.V > partitionRecordVersion:
		return PartitionState{}, fmt.Errorf("meta: decode partition %q: version %d, this build knows %d: %w", rel, r.V, partitionRecordVersion, ErrUnknownVersion)
	case r.V != partitionRecordVersion:
		return PartitionState{}, fmt.Errorf("meta: decode partition %q: version %d: %w", rel, r.V, ErrCorrupt)
	case r.Leader == nil || r.LeaderEpoch == nil:
		return PartitionState{}, fmt.Errorf("meta: decode partition %q: leader or leader epoch missing: %w", rel, ErrCorrupt)
	}
	st := PartitionState{
		TopicID:      pid.topic,
		Partition:    pid.n,
		Replicas:     r.Replicas,
		Leader:       *r.Leader,
		LeaderEpoch:  *r.LeaderEpoch,
		Incarnations: r.Incarnations,
		Revision:     kv.ModRevision,
	}
	if err := validatePartition(st); err != nil {
		return PartitionState{}, fmt.Errorf("meta: decode partition %q: %w: %w", rel, ErrCorrupt, err)
	}
	return st, nil
}

func (s *Store) allPartitionsPrefix() string { return s.prefix + "partitions/" }
func (s *Store) partitionKey(id [16]byte, n int32) string {
	return s.partitionsPrefix(id) + strconv.FormatInt(int64(n), 10)
}

// newStates returns the states of partitions first, first+1, ... with the
// given replicas, led by their preferred leaders at epoch 0.
func newStates(id [16]byte, first int32, replicas [][]int32, rf int16) ([]PartitionState, error) {
	states := make([]PartitionState, len(replicas))
	for i, r := range replicas {
		// No leader yet: the controller elects the first one through the
		// fences of docs/architecture.md, preferring Replicas[0].
		st := PartitionState{TopicID: id, Partition: first + int32(i), Replicas: slices.Clone(r), Leader: NoLeader}
		if err := validatePartition(st); err != nil {
			return nil, err
		}
		if len(r) != int(rf) {
			return nil, fmt.Errorf("%w: partition %d has %d replicas, the topic's replication factor is %d", ErrInvalidReplicationFactor, st.Partition, len(r), rf)
		}
		states[i] = st
	}
	return states, nil
}

// CreateTopicWithPartitions stores topic t (a random ID if t.ID is zero;
// t.Partitions zero means len(replicas)) and one partition state per element
// of replicas, each led by its first replica at leader epoch 0; every
// replica list must have t.ReplicationFactor distinct node ids. It fails
// with ErrTopicExists if the name is taken, leaving no partition state
// behind. Up to MaxTxnOps-1 partitions it is one transaction; beyond, the
// partition keys are written first in chunks, each conditioned on the topic
// key's absence and on their own, and the topic key last (see the file
// comment). It returns the Topic with its ID and Revision, and the states
// with theirs.
func (s *Store) CreateTopicWithPartitions(ctx context.Context, t Topic, replicas [][]int32) (Topic, []PartitionState, error) {
	if t.Partitions == 0 {
		t.Partitions = int32(len(replicas))
	}
	if err := validateTopic(t); err != nil {
		return Topic{}, nil, fmt.Errorf("meta: create topic: %w", err)
	}
	if int(t.Partitions) != len(replicas) {
		return Topic{}, nil, fmt.Errorf("meta: create topic %q: %w: %d partitions, %d replica lists", t.Name, ErrInvalidPartitions, t.Partitions, len(replicas))
	}
	if t.ID == uuid.Nil {
		t.ID = newKafkaUUID()
	}
	t.Configs = maps.Clone(t.Configs)
	states, err := newStates(t.ID, 0, replicas, t.ReplicationFactor)
	if err != nil {
		return Topic{}, nil, fmt.Errorf("meta: create topic %q: %w", t.Name, err)
	}
	val, err := encodeTopic(t)
	if err != nil {
		return Topic{}, nil, err
	}
	key := s.topicKey(t.Name)
	w := topicWrite{
		op:      fmt.Sprintf("create topic %q", t.Name),
		topicIf: clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		put:     clientv3.OpPut(key, string(val)),
		keyIf:   func(k string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(k), "=", 0) },
		lost: func(kv *mvccpb.KeyValue) error {
			if kv == nil {
				return nil
			}
			return ErrTopicExists
		},
	}
	rev, states, err := s.writeTopicAndPartitions(ctx, w, states)
	if err != nil {
		return Topic{}, nil, err
	}
	t.Revision = rev
	return t, states, nil
}

// AddTopicPartitions raises the partition count of t, which must be the
// topic as read (t.Revision, t.Partitions), by len(newReplicas) and creates
// the new partitions' states (partitions t.Partitions, t.Partitions+1, ...,
// each led by its first replica at epoch 0) with the same transaction rule
// as CreateTopicWithPartitions: the topic key last, every write conditioned
// on the topic's mod revision still being t.Revision. Only the partition
// count changes; other fields of t are ignored. ErrConflict if the topic
// changed since it was read (or a concurrent AddTopicPartitions on the same
// revision is under way), ErrTopicNotFound if it is gone.
func (s *Store) AddTopicPartitions(ctx context.Context, t Topic, newReplicas [][]int32) (Topic, []PartitionState, error) {
	if len(newReplicas) == 0 {
		return Topic{}, nil, fmt.Errorf("meta: add partitions to topic %q: %w: none to add", t.Name, ErrInvalidPartitions)
	}
	cur, err := s.Topic(ctx, t.Name)
	if err != nil {
		return Topic{}, nil, fmt.Errorf("meta: add partitions: %w", err)
	}
	if cur.Revision != t.Revision || cur.ID != t.ID || cur.Partitions != t.Partitions {
		return Topic{}, nil, fmt.Errorf("meta: add partitions to topic %q read at revision %d (now %d): %w", t.Name, t.Revision, cur.Revision, ErrConflict)
	}
	states, err := newStates(cur.ID, cur.Partitions, newReplicas, cur.ReplicationFactor)
	if err != nil {
		return Topic{}, nil, fmt.Errorf("meta: add partitions to topic %q: %w", t.Name, err)
	}
	next := cur
	next.Partitions += int32(len(newReplicas))
	val, err := encodeTopic(next)
	if err != nil {
		return Topic{}, nil, err
	}
	key := s.topicKey(t.Name)
	w := topicWrite{
		op:      fmt.Sprintf("add %d partitions to topic %q", len(newReplicas), t.Name),
		topicIf: clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision),
		put:     clientv3.OpPut(key, string(val)),
		// A key created before the topic reached t.Revision belongs to an
		// attempt whose topic write can no longer succeed: overwrite it. One
		// created since belongs to a concurrent attempt on the same revision.
		keyIf: func(k string) clientv3.Cmp { return clientv3.Compare(clientv3.CreateRevision(k), "<", t.Revision) },
		lost: func(kv *mvccpb.KeyValue) error {
			switch {
			case kv == nil:
				return ErrTopicNotFound
			case kv.ModRevision != t.Revision:
				return fmt.Errorf("topic now at revision %d: %w", kv.ModRevision, ErrConflict)
			}
			return nil
		},
	}
	rev, states, err := s.writeTopicAndPartitions(ctx, w, states)
	if err != nil {
		return Topic{}, nil, err
	}
	next.Revision = rev
	return next, states, nil
}

// topicWrite is a topic key write that covers new partition states.
type topicWrite struct {
	op      string                        // for errors: "create topic \"t\""
	topicIf clientv3.Cmp                  // holds while the topic is as the writer read it
	put     clientv3.Op                   // the topic key's new value
	keyIf   func(key string) clientv3.Cmp // a partition key may be written (chunked path)
	// lost says why topicIf fails for the topic key as it is (nil if
	// absent), or returns nil if topicIf holds for it.
	lost func(topic *mvccpb.KeyValue) error
}

// writeTopicAndPartitions writes w and states: in one transaction if they
// fit, else states in chunks and the topic key last. It returns the topic
// key's revision and the states with their revisions. When a chunk fails
// (lost condition or etcd error) it deletes the chunks written before it;
// when the topic write's condition fails it deletes them all; after an etcd
// error on the topic write it leaves them, since the topic may have been
// written (if not, they lie beyond its partition count).
func (s *Store) writeTopicAndPartitions(ctx context.Context, w topicWrite, states []PartitionState) (int64, []PartitionState, error) {
	puts := make([]clientv3.Op, len(states))
	for i, st := range states {
		val, err := encodePartition(st)
		if err != nil {
			return 0, nil, err
		}
		puts[i] = clientv3.OpPut(s.partitionKey(st.TopicID, st.Partition), string(val))
	}
	if 1+len(puts) <= s.maxTxnOps {
		rev, _, err := s.commitTopic(ctx, w, puts...)
		if err != nil {
			return 0, nil, err
		}
		for i := range states {
			states[i].Revision = rev
		}
		return rev, states, nil
	}

	chunkSize := max(1, s.maxTxnOps-1) // one compare for the topic, one per key
	var written []writtenChunk
	for start := 0; start < len(states); start += chunkSize {
		end := min(start+chunkSize, len(states))
		cmps := []clientv3.Cmp{w.topicIf}
		keys := make([]string, 0, end-start)
		for _, st := range states[start:end] {
			k := s.partitionKey(st.TopicID, st.Partition)
			keys = append(keys, k)
			cmps = append(cmps, w.keyIf(k))
		}
		resp, err := s.client.Txn(ctx).If(cmps...).Then(puts[start:end]...).
			Else(clientv3.OpGet(topicKeyOf(w.put))).Commit()
		if err != nil {
			s.deleteWritten(written)
			return 0, nil, fmt.Errorf("meta: %s: partitions %d..%d: %w", w.op, states[start].Partition, states[end-1].Partition, err)
		}
		if !resp.Succeeded {
			s.deleteWritten(written)
			return 0, nil, fmt.Errorf("meta: %s: partitions %d..%d: %w", w.op, states[start].Partition, states[end-1].Partition, chunkLost(w, resp))
		}
		written = append(written, writtenChunk{keys: keys, rev: resp.Header.Revision})
		for i := start; i < end; i++ {
			states[i].Revision = resp.Header.Revision
		}
	}
	rev, lost, err := s.commitTopic(ctx, w)
	if err != nil {
		if lost {
			s.deleteWritten(written)
		}
		return 0, nil, err
	}
	return rev, states, nil
}

// chunkLost says why a chunk's conditions failed, from its Else get of the
// topic key: the topic changed (w.lost), or else a partition key is held by
// a concurrent writer (ErrConflict).
func chunkLost(w topicWrite, resp *clientv3.TxnResponse) error {
	if err := w.lost(rangeKV(resp)); err != nil {
		return err
	}
	return fmt.Errorf("a partition key is held by a concurrent writer: %w", ErrConflict)
}

// rangeKV is the key read by the first response of a transaction that ran
// one get, or nil if the key was absent.
func rangeKV(resp *clientv3.TxnResponse) *mvccpb.KeyValue {
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		return kvs[0]
	}
	return nil
}

// commitTopic writes the topic key under w.topicIf, with extra ops in the
// same transaction, and returns its revision. lost is true when the
// condition failed: the write definitely did not happen.
func (s *Store) commitTopic(ctx context.Context, w topicWrite, extra ...clientv3.Op) (rev int64, lost bool, err error) {
	resp, err := s.client.Txn(ctx).If(w.topicIf).Then(append([]clientv3.Op{w.put}, extra...)...).
		Else(clientv3.OpGet(topicKeyOf(w.put))).Commit()
	if err != nil {
		return 0, false, fmt.Errorf("meta: %s: %w", w.op, err)
	}
	if !resp.Succeeded {
		why := w.lost(rangeKV(resp))
		if why == nil { // changed back between the compare and the get: cannot happen in one txn
			why = ErrConflict
		}
		return 0, true, fmt.Errorf("meta: %s: %w", w.op, why)
	}
	return resp.Header.Revision, false, nil
}

func topicKeyOf(put clientv3.Op) string { return string(put.KeyBytes()) }

// writtenChunk is one chunk of partition keys written at rev.
type writtenChunk struct {
	keys []string
	rev  int64
}

// deleteWritten deletes the partition keys of a failed creation, each chunk
// only if none of its keys was rewritten since (by a later attempt that
// now owns them). It uses its own bounded context: the caller's may be the
// reason for the failure. What it cannot delete is logged and left; such
// keys lie beyond the topic's partition count.
func (s *Store) deleteWritten(chunks []writtenChunk) {
	if len(chunks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	for _, c := range chunks {
		cmps := make([]clientv3.Cmp, len(c.keys))
		dels := make([]clientv3.Op, len(c.keys))
		for i, k := range c.keys {
			cmps[i] = clientv3.Compare(clientv3.ModRevision(k), "=", c.rev)
			dels[i] = clientv3.OpDelete(k)
		}
		resp, err := s.client.Txn(ctx).If(cmps...).Then(dels...).Commit()
		if err != nil || !resp.Succeeded {
			s.log.Warn().Err(err).Int("keys", len(c.keys)).Str("first", c.keys[0]).
				Msg("partition keys of a failed topic write left behind")
		}
	}
}

// Partitions reads the partition states of one topic, sorted by partition.
func (s *Store) Partitions(ctx context.Context, topicID [16]byte) ([]PartitionState, error) {
	states, _, err := s.listPartitions(ctx, s.partitionsPrefix(topicID), false)
	return states, err
}

// AllPartitions reads every partition state, sorted by topic ID and then
// partition, and the etcd revision they were read at.
func (s *Store) AllPartitions(ctx context.Context) ([]PartitionState, int64, error) {
	return s.listPartitions(ctx, s.allPartitionsPrefix(), false)
}

// listPartitions reads the states under prefix. With skipCorrupt an
// undecodable state is logged and left out instead of failing the read.
func (s *Store) listPartitions(ctx context.Context, prefix string, skipCorrupt bool) ([]PartitionState, int64, error) {
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("meta: list partitions under %s: %w", prefix, err)
	}
	states := make([]PartitionState, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		st, err := decodePartition(strings.TrimPrefix(string(kv.Key), s.allPartitionsPrefix()), kv)
		if err != nil {
			if !skipCorrupt {
				return nil, 0, err
			}
			s.log.Error().Err(err).Msg("partition watch: skipping undecodable partition state")
			continue
		}
		states = append(states, st)
	}
	slices.SortFunc(states, byPartition)
	return states, resp.Header.Revision, nil
}

func byPartition(a, b PartitionState) int {
	if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// PutPartitionIfMissing stores st if its key is absent (a topic created by
// an older version has no partition states) and returns it with its
// revision; if a state is present it returns that one unchanged. Extra
// conditions (the controller passes Controller.IfLeader()) must hold for
// the write: ErrNotController if one fails. It does not check that the
// topic exists: a controller racing a DeleteTopic can leave an orphan.
func (s *Store) PutPartitionIfMissing(ctx context.Context, st PartitionState, conds ...clientv3.Cmp) (PartitionState, error) {
	val, err := encodePartition(st)
	if err != nil {
		return PartitionState{}, err
	}
	key := s.partitionKey(st.TopicID, st.Partition)
	op := fmt.Sprintf("put partition %s-%d if missing", uuid.UUID(st.TopicID), st.Partition)
	resp, err := s.client.Txn(ctx).
		If(append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, conds...)...).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, err)
	}
	if resp.Succeeded {
		st.Replicas = slices.Clone(st.Replicas)
		st.Revision = resp.Header.Revision
		return st, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, ErrNotController)
	}
	return decodePartition(strings.TrimPrefix(key, s.allPartitionsPrefix()), kvs[0])
}

// UpdatePartition is the controller's compare-and-swap: it writes st if the
// key's mod revision is still st.Revision and every extra condition holds
// (the controller passes Controller.IfLeader()). Errors: ErrNotController if
// an extra condition fails, ErrPartitionNotFound if the key is gone,
// ErrConflict if its revision moved, ErrInvalidPartitionState if st lowers
// the stored leader epoch or names another leader without raising it. It
// returns st with its new revision.
func (s *Store) UpdatePartition(ctx context.Context, st PartitionState, conds ...clientv3.Cmp) (PartitionState, error) {
	val, err := encodePartition(st)
	if err != nil {
		return PartitionState{}, err
	}
	key := s.partitionKey(st.TopicID, st.Partition)
	op := fmt.Sprintf("update partition %s-%d at revision %d", uuid.UUID(st.TopicID), st.Partition, st.Revision)
	// Read the stored state (under the conditions, so a deposed controller
	// learns that first) to check the epoch rule; the write below is
	// conditioned on it not having changed since.
	read, err := s.client.Txn(ctx).If(conds...).Then(clientv3.OpGet(key)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, err)
	}
	if err := s.checkUpdate(st, read); err != nil {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, err)
	}
	resp, err := s.client.Txn(ctx).
		If(append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", st.Revision)}, conds...)...).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, err)
	}
	if !resp.Succeeded {
		return PartitionState{}, fmt.Errorf("meta: %s: %w", op, s.updateLost(st, resp))
	}
	st.Replicas = slices.Clone(st.Replicas)
	st.Incarnations = slices.Clone(st.Incarnations)
	st.Revision = resp.Header.Revision
	return st, nil
}

// checkUpdate applies UpdatePartition's rules to the state read by read.
func (s *Store) checkUpdate(st PartitionState, read *clientv3.TxnResponse) error {
	if !read.Succeeded {
		return ErrNotController
	}
	kvs := read.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return ErrPartitionNotFound
	}
	if kvs[0].ModRevision != st.Revision {
		return fmt.Errorf("now at revision %d: %w", kvs[0].ModRevision, ErrConflict)
	}
	cur, err := decodePartition(strings.TrimPrefix(string(kvs[0].Key), s.allPartitionsPrefix()), kvs[0])
	if err != nil {
		return err
	}
	switch {
	case st.LeaderEpoch < cur.LeaderEpoch:
		return fmt.Errorf("%w: leader epoch %d is below the stored %d", ErrInvalidPartitionState, st.LeaderEpoch, cur.LeaderEpoch)
	case st.LeaderEpoch == cur.LeaderEpoch && st.Leader != cur.Leader && st.Leader != NoLeader:
		return fmt.Errorf("%w: leader %d at epoch %d, which is leader %d's", ErrInvalidPartitionState, st.Leader, st.LeaderEpoch, cur.Leader)
	}
	return nil
}

// updateLost classifies UpdatePartition's failed write from its Else get:
// the key gone, its revision moved, or else an extra condition failed.
func (s *Store) updateLost(st PartitionState, resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	switch {
	case len(kvs) == 0:
		return ErrPartitionNotFound
	case kvs[0].ModRevision != st.Revision:
		return fmt.Errorf("now at revision %d: %w", kvs[0].ModRevision, ErrConflict)
	}
	return ErrNotController
}
