package meta

// This file owns partition reassignments (KIP-455's shape): an operator's
// request to move a partition's replicas to other brokers, kept until the
// controller has carried it out, and the catch-up marks the new replicas
// write while they copy the leader's local tail.
//
//	<prefix>reassignments/<topicID>/<n>
//	{"v":1,"target":[4,2,1],"original":[3,2,1],"requested":"2026-12-02T23:00:00Z","cancelled":false}
//	<prefix>reassign-synced/<topicID>/<n>/<node id>
//	{"v":1,"epoch":7,"end":1234,"last_epoch":7}                  a follower: its durable end
//	{"v":1,"epoch":7,"end":1230,"last_epoch":7,"log_end":1236}   the leader: its high watermark, log end
//
// "target" is the replica set wanted, in preference order (target[0] is the
// preferred leader once done); "original" the replicas when the first
// request of a still pending reassignment was made, which a cancel moves
// back to; "cancelled" marks a cancel (target is then original). A synced
// mark is how far replica <node id> held the log of the leader of "epoch"
// when it last wrote the mark; the controller compares the followers'
// marks with the leader's (broker/cluster/reassign_core.go).
//
// Invariant: a reassignment record exists only for a partition whose state
// existed when the record was written (the write is conditioned on it).
// Invariant: a record is deleted only by the controller (under its
// IfLeader condition) at the revision it read, together with every
// synced mark of the partition, so a newer request is never dropped and a
// mark never outlives the move it spoke for.
// Invariant: the records say what is wanted; only the partition state
// (partition.go) says what is. Nothing here changes a replica set.
//
// Nothing here holds state beyond the Store's; every function is a few
// etcd requests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// reassignRecordVersion is the "v" field this build writes and reads.
const reassignRecordVersion = 1

// ErrNoReassignment: no reassignment is pending for that partition.
var ErrNoReassignment = errors.New("meta: no reassignment pending")

// Reassignment is one pending partition reassignment.
type Reassignment struct {
	TopicID   [16]byte
	Partition int32
	// Target is the replica set wanted, Target[0] the preferred leader.
	Target []int32
	// Original is the replica set before the first request.
	Original  []int32
	Requested time.Time
	Cancelled bool
	// Synced are the catch-up marks of the partition's replicas, by node.
	// Filled by Reassignments; not part of the record.
	Synced map[int32]SyncedMark
	// Revision is the record's etcd mod revision. Not stored.
	Revision int64
}

// Ref names the reassignment's partition.
func (r Reassignment) Ref() PartitionRef {
	return PartitionRef{TopicID: r.TopicID, Partition: r.Partition}
}

// SyncedMark is a replica's report of how far it holds the log of the
// leader of Epoch: a follower's durable end (End); the leader's high
// watermark (End) and log end (LogEnd).
type SyncedMark struct {
	Epoch int32 `json:"epoch"`
	End   int64 `json:"end"`
	// LastEpoch is the epoch of the replica's last batch: two logs with
	// the same last epoch agree up to the shorter one's end (one leader
	// per epoch, and KIP-595's divergence check before any append).
	LastEpoch int32 `json:"last_epoch"`
	LogEnd    int64 `json:"log_end,omitempty"`
}

type reassignRecord struct {
	V         int       `json:"v"`
	Target    []int32   `json:"target"`
	Original  []int32   `json:"original"`
	Requested time.Time `json:"requested"`
	Cancelled bool      `json:"cancelled"`
}

type syncedRecord struct {
	V int `json:"v"`
	SyncedMark
}

func (s *Store) reassignPrefix() string { return s.prefix + "reassignments/" }
func (s *Store) syncedPrefix() string   { return s.prefix + "reassign-synced/" }

func refPath(ref PartitionRef) string {
	return uuid.UUID(ref.TopicID).String() + "/" + strconv.FormatInt(int64(ref.Partition), 10)
}

func (s *Store) reassignKey(ref PartitionRef) string { return s.reassignPrefix() + refPath(ref) }
func (s *Store) syncedPartPrefix(ref PartitionRef) string {
	return s.syncedPrefix() + refPath(ref) + "/"
}

// ValidateReplicaList checks what every replica list of a request must
// satisfy by itself: not empty, node ids not negative and distinct.
func ValidateReplicaList(ids []int32) error {
	if len(ids) == 0 {
		return errors.New("no replicas")
	}
	for i, id := range ids {
		if id < 0 {
			return fmt.Errorf("replica %d is not a node id", id)
		}
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("replica %d listed twice in %v", id, ids)
		}
	}
	return nil
}

func encodeReassign(r Reassignment) ([]byte, error) {
	if err := ValidateReplicaList(r.Target); err != nil {
		return nil, fmt.Errorf("meta: encode reassignment: target: %w", err)
	}
	if err := ValidateReplicaList(r.Original); err != nil {
		return nil, fmt.Errorf("meta: encode reassignment: original: %w", err)
	}
	return json.Marshal(reassignRecord{V: reassignRecordVersion, Target: r.Target, Original: r.Original,
		Requested: r.Requested.UTC(), Cancelled: r.Cancelled})
}

func decodeReassign(rel string, kv *mvccpb.KeyValue) (Reassignment, error) {
	pid, err := parsePartitionKey(rel)
	if err != nil {
		return Reassignment{}, err
	}
	var rec reassignRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return Reassignment{}, fmt.Errorf("meta: decode reassignment %q: %w: %w", rel, ErrCorrupt, err)
	}
	switch {
	case rec.V > reassignRecordVersion:
		return Reassignment{}, fmt.Errorf("meta: decode reassignment %q: version %d, this build knows %d: %w", rel, rec.V, reassignRecordVersion, ErrUnknownVersion)
	case rec.V != reassignRecordVersion:
		return Reassignment{}, fmt.Errorf("meta: decode reassignment %q: version %d: %w", rel, rec.V, ErrCorrupt)
	}
	if err := ValidateReplicaList(rec.Target); err != nil {
		return Reassignment{}, fmt.Errorf("meta: decode reassignment %q: target: %w: %w", rel, err, ErrCorrupt)
	}
	if err := ValidateReplicaList(rec.Original); err != nil {
		return Reassignment{}, fmt.Errorf("meta: decode reassignment %q: original: %w: %w", rel, err, ErrCorrupt)
	}
	return Reassignment{TopicID: pid.topic, Partition: pid.n, Target: rec.Target, Original: rec.Original,
		Requested: rec.Requested, Cancelled: rec.Cancelled, Revision: kv.ModRevision}, nil
}

// reassignRetries bounds the read-and-swap attempts of a request that
// loses to concurrent writes.
const reassignRetries = 5

// RequestReassignment stores a request to move ref's replicas to target,
// replacing a pending one (whose original replicas it keeps, as Kafka
// does). current is the partition's replica set as the caller read it; it
// becomes the original when no reassignment is pending. It fails with
// ErrPartitionNotFound when the partition has no state.
func (s *Store) RequestReassignment(ctx context.Context, ref PartitionRef, target, current []int32, now time.Time) (Reassignment, error) {
	return s.writeReassign(ctx, ref, func(old *Reassignment) (Reassignment, error) {
		r := Reassignment{TopicID: ref.TopicID, Partition: ref.Partition, Target: slices.Clone(target),
			Original: slices.Clone(current), Requested: now}
		if old != nil {
			r.Original = old.Original
		}
		return r, nil
	})
}

// CancelReassignment turns ref's pending reassignment into a move back to
// its original replicas. ErrNoReassignment when none is pending.
func (s *Store) CancelReassignment(ctx context.Context, ref PartitionRef, now time.Time) (Reassignment, error) {
	return s.writeReassign(ctx, ref, func(old *Reassignment) (Reassignment, error) {
		if old == nil {
			return Reassignment{}, ErrNoReassignment
		}
		r := *old
		r.Target, r.Cancelled, r.Requested = slices.Clone(old.Original), true, now
		return r, nil
	})
}

// writeReassign reads ref's record, asks next for the new one and writes
// it if neither the record nor the partition's existence changed since.
func (s *Store) writeReassign(ctx context.Context, ref PartitionRef, next func(old *Reassignment) (Reassignment, error)) (Reassignment, error) {
	if err := s.checkOpen(); err != nil {
		return Reassignment{}, err
	}
	key, pkey := s.reassignKey(ref), s.partitionKey(ref.TopicID, ref.Partition)
	for attempt := 1; ; attempt++ {
		resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(pkey, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return Reassignment{}, fmt.Errorf("meta: read reassignment of %s: %w", refPath(ref), err)
		}
		if len(resp.Responses[1].GetResponseRange().GetKvs()) == 0 {
			return Reassignment{}, fmt.Errorf("meta: reassign %s: %w", refPath(ref), ErrPartitionNotFound)
		}
		var old *Reassignment
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
			r, err := decodeReassign(strings.TrimPrefix(string(kvs[0].Key), s.reassignPrefix()), kvs[0])
			if err != nil {
				return Reassignment{}, err
			}
			old = &r
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)
		}
		r, err := next(old)
		if err != nil {
			return Reassignment{}, fmt.Errorf("meta: reassign %s: %w", refPath(ref), err)
		}
		val, err := encodeReassign(r)
		if err != nil {
			return Reassignment{}, err
		}
		w, err := s.client.Txn(ctx).
			If(cmp, clientv3.Compare(clientv3.CreateRevision(pkey), ">", 0)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return Reassignment{}, fmt.Errorf("meta: write reassignment of %s: %w", refPath(ref), err)
		}
		if w.Succeeded {
			r.Revision = w.Header.Revision
			return r, nil
		}
		if attempt == reassignRetries {
			return Reassignment{}, fmt.Errorf("meta: write reassignment of %s: %w", refPath(ref), ErrConflict)
		}
	}
}

// Reassignments reads every pending reassignment with its partition's
// synced marks, sorted by topic ID and partition. An undecodable record
// fails the read; an undecodable mark is left out.
func (s *Store) Reassignments(ctx context.Context) ([]Reassignment, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(s.reassignPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(s.syncedPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("meta: list reassignments: %w", err)
	}
	var out []Reassignment
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		r, err := decodeReassign(strings.TrimPrefix(string(kv.Key), s.reassignPrefix()), kv)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	marks := map[PartitionRef]map[int32]SyncedMark{}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		rel := strings.TrimPrefix(string(kv.Key), s.syncedPrefix())
		i := strings.LastIndexByte(rel, '/')
		if i < 0 {
			continue
		}
		pid, err := parsePartitionKey(rel[:i])
		node, nerr := strconv.ParseInt(rel[i+1:], 10, 32)
		var rec syncedRecord
		if err != nil || nerr != nil || json.Unmarshal(kv.Value, &rec) != nil || rec.V != reassignRecordVersion {
			continue
		}
		ref := PartitionRef{TopicID: pid.topic, Partition: pid.n}
		if marks[ref] == nil {
			marks[ref] = map[int32]SyncedMark{}
		}
		marks[ref][int32(node)] = rec.SyncedMark
	}
	for i := range out {
		out[i].Synced = marks[out[i].Ref()]
	}
	slices.SortFunc(out, func(a, b Reassignment) int {
		return byPartition(PartitionState{TopicID: a.TopicID, Partition: a.Partition}, PartitionState{TopicID: b.TopicID, Partition: b.Partition})
	})
	return out, nil
}

// MarkSynced writes node's catch-up mark for ref's pending reassignment;
// nothing when none is pending (ErrNoReassignment). Each node writes only
// its own mark.
func (s *Store) MarkSynced(ctx context.Context, ref PartitionRef, node int32, m SyncedMark) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	val, err := json.Marshal(syncedRecord{V: reassignRecordVersion, SyncedMark: m})
	if err != nil {
		return err
	}
	key := s.syncedPartPrefix(ref) + strconv.FormatInt(int64(node), 10)
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(s.reassignKey(ref)), ">", 0)).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return fmt.Errorf("meta: mark %s synced on node %d: %w", refPath(ref), node, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("meta: mark %s synced on node %d: %w", refPath(ref), node, ErrNoReassignment)
	}
	return nil
}

// FinishReassignment deletes r's record, if it is still at r.Revision and
// every extra condition holds (the controller passes IfLeader()), with all
// of the partition's synced marks. ErrConflict when the record changed (a
// newer request or a cancel), ErrNotController when a condition failed.
func (s *Store) FinishReassignment(ctx context.Context, r Reassignment, conds ...clientv3.Cmp) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	key := s.reassignKey(r.Ref())
	resp, err := s.client.Txn(ctx).
		If(append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", r.Revision)}, conds...)...).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(s.syncedPartPrefix(r.Ref()), clientv3.WithPrefix())).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return fmt.Errorf("meta: finish reassignment of %s: %w", refPath(r.Ref()), err)
	}
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].ModRevision != r.Revision {
		return fmt.Errorf("meta: finish reassignment of %s: %w", refPath(r.Ref()), ErrConflict)
	}
	return fmt.Errorf("meta: finish reassignment of %s: %w", refPath(r.Ref()), ErrNotController)
}

// ErrInvalidReassignment: a requested target breaks a rule (an unknown
// broker, two replicas in one AZ, another replication factor).
var ErrInvalidReassignment = errors.New("meta: invalid reassignment")

// ReassignmentStatus is a pending reassignment as an operator sees it:
// the record, the partition's replicas and leader now, and the step the
// controller is at.
type ReassignmentStatus struct {
	Topic       string    `json:"topic"`
	Partition   int32     `json:"partition"`
	Target      []int32   `json:"target"`
	Original    []int32   `json:"original"`
	Replicas    []int32   `json:"replicas"`
	Leader      int32     `json:"leader"`
	LeaderEpoch int32     `json:"leader_epoch"`
	Adding      []int32   `json:"adding"`
	Removing    []int32   `json:"removing"`
	Cancelled   bool      `json:"cancelled"`
	Requested   time.Time `json:"requested"`
	Phase       string    `json:"phase"`
	Message     string    `json:"message"`
}
