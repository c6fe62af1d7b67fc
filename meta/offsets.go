package meta

// This file owns committed consumer-group offsets: their JSON encoding
// (version 1) and the commit, read and delete transactions.
//
//	<prefix>offsets/<tenant>/<group>/<topicID>/<n>
//	{"v":1,"topic":"orders","offset":42,"leader_epoch":3,"metadata":"",
//	 "generation":7,"commit_time_ms":1767000000000}
//
// <tenant> and <group> are path-escaped (url.PathEscape), so a group id with
// a "/" cannot reach another group's keys. The topic name in the value is for
// readers that no longer find the topic ID (a deleted topic); the key's topic
// ID is authoritative.
//
// Invariant: a commit of up to the store's MaxTxnOps partitions is one etcd
// transaction: all of its offsets become visible together or none does.
// Invariant: every offset stored by CommitOffsetsIf was written by a
// transaction in which all of its conditions held.
// Invariant: deleting a group's offsets is one ranged delete.
//
// The Store does not decide who may commit (generations are the group
// coordinator's business, in broker/group); it stores what it is given, and
// with CommitOffsetsIf only while the coordinator's fence holds.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// offsetRecordVersion is the "v" field this build writes and reads.
const offsetRecordVersion = 1

// DefaultMaxTxnOps is etcd's default --max-txn-ops, assumed for an external
// cluster unless Config.MaxTxnOps says otherwise. The embedded member is
// started with EmbeddedMaxTxnOps, so a commit of up to that many partitions
// is one transaction. Larger commits are split into transactions of the
// limit's size, each atomic, written in order.
const (
	DefaultMaxTxnOps  = 128
	EmbeddedMaxTxnOps = 10_000
)

// DefaultTenant is the tenant of every group until tenants exist.
const DefaultTenant = "default"

// OffsetKey names one committed offset within a group.
type OffsetKey struct {
	TopicID   [16]byte
	Partition int32
}

// CommittedOffset is one committed offset of a group.
type CommittedOffset struct {
	OffsetKey
	Topic       string // the topic's name when committed
	Offset      int64
	LeaderEpoch int32 // -1 when the client did not say
	Metadata    string
	Generation  int32 // the group generation that committed it; -1 for admin commits
	CommitTime  time.Time
}

type offsetRecord struct {
	V            int    `json:"v"`
	Topic        string `json:"topic"`
	Offset       int64  `json:"offset"`
	LeaderEpoch  int32  `json:"leader_epoch"`
	Metadata     string `json:"metadata"`
	Generation   int32  `json:"generation"`
	CommitTimeMs int64  `json:"commit_time_ms"`
}

func (s *Store) offsetsPrefix(tenant string) string {
	return s.prefix + "offsets/" + url.PathEscape(tenant) + "/"
}

func (s *Store) groupOffsetsPrefix(tenant, group string) string {
	return s.offsetsPrefix(tenant) + url.PathEscape(group) + "/"
}

func (s *Store) offsetKey(tenant, group string, k OffsetKey) string {
	return s.groupOffsetsPrefix(tenant, group) + uuid.UUID(k.TopicID).String() + "/" + strconv.Itoa(int(k.Partition))
}

// CommitOffsets stores offsets of one group; see DefaultMaxTxnOps.
func (s *Store) CommitOffsets(ctx context.Context, tenant, group string, offsets []CommittedOffset) error {
	return s.commitOffsets(ctx, tenant, group, offsets, nil)
}

// CommitOffsetsIf is CommitOffsets fenced by conds (the group coordinator's
// election or lease key, say): each transaction stores its offsets only if
// every condition holds when it commits, and fails with ErrFenced if one
// does not. A commit of more than the store's MaxTxnOps partitions is
// several transactions, each checking the conditions anew: if the fence
// fails between them, the leading transactions' offsets are stored (they
// were committed while the writer still held the fence, so a successor that
// reads the offsets after taking the fence sees them) and the rest are not;
// the error says how many were stored. At most MaxTxnOps conditions.
func (s *Store) CommitOffsetsIf(ctx context.Context, tenant, group string, offsets []CommittedOffset, conds ...clientv3.Cmp) error {
	if len(conds) > s.maxTxnOps {
		return fmt.Errorf("meta: commit offsets of group %q: %d conditions, a transaction carries at most %d: %w", group, len(conds), s.maxTxnOps, ErrInvalidConfig)
	}
	return s.commitOffsets(ctx, tenant, group, offsets, conds)
}

// commitOffsets writes offsets in transactions of at most maxTxnOps puts,
// each conditioned on conds.
func (s *Store) commitOffsets(ctx context.Context, tenant, group string, offsets []CommittedOffset, conds []clientv3.Cmp) error {
	for _, o := range offsets {
		if o.Partition < 0 || o.TopicID == uuid.Nil {
			return fmt.Errorf("meta: commit offsets of group %q: bad key %s-%d: %w", group, o.Topic, o.Partition, ErrInvalidPartitions)
		}
	}
	for start := 0; start < len(offsets); start += s.maxTxnOps {
		chunk := offsets[start:min(start+s.maxTxnOps, len(offsets))]
		ops := make([]clientv3.Op, 0, len(chunk))
		for _, o := range chunk {
			val, err := json.Marshal(offsetRecord{
				V: offsetRecordVersion, Topic: o.Topic, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
				Metadata: o.Metadata, Generation: o.Generation, CommitTimeMs: o.CommitTime.UnixMilli(),
			})
			if err != nil {
				return fmt.Errorf("meta: encode offset of group %q %s-%d: %w", group, o.Topic, o.Partition, err)
			}
			ops = append(ops, clientv3.OpPut(s.offsetKey(tenant, group, o.OffsetKey), string(val)))
		}
		resp, err := s.client.Txn(ctx).If(conds...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("meta: commit %d offsets of group %q: %w", len(chunk), group, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("meta: commit offsets of group %q: %w after %d of %d were stored", group, ErrFenced, start, len(offsets))
		}
	}
	return nil
}

// GroupOffsets reads every committed offset of one group, sorted by topic
// ID and partition.
func (s *Store) GroupOffsets(ctx context.Context, tenant, group string) ([]CommittedOffset, error) {
	all, err := s.listOffsets(ctx, tenant, s.groupOffsetsPrefix(tenant, group))
	if err != nil {
		return nil, err
	}
	return all[group], nil
}

// TenantOffsets reads every committed offset of a tenant, by group.
func (s *Store) TenantOffsets(ctx context.Context, tenant string) (map[string][]CommittedOffset, error) {
	return s.listOffsets(ctx, tenant, s.offsetsPrefix(tenant))
}

// listOffsets reads the offsets under prefix, which is within the tenant's.
func (s *Store) listOffsets(ctx context.Context, tenant, prefix string) (map[string][]CommittedOffset, error) {
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("meta: list offsets under %s: %w", prefix, err)
	}
	out := make(map[string][]CommittedOffset)
	tenantPrefix := s.offsetsPrefix(tenant)
	for _, kv := range resp.Kvs {
		group, o, err := decodeOffset(strings.TrimPrefix(string(kv.Key), tenantPrefix), kv.Value)
		if err != nil {
			return nil, err
		}
		out[group] = append(out[group], o)
	}
	for _, os := range out {
		sort.Slice(os, func(i, j int) bool {
			if os[i].TopicID != os[j].TopicID {
				return string(os[i].TopicID[:]) < string(os[j].TopicID[:])
			}
			return os[i].Partition < os[j].Partition
		})
	}
	return out, nil
}

// decodeOffset decodes "<group>/<topicID>/<n>" and its value.
func decodeOffset(rel string, val []byte) (string, CommittedOffset, error) {
	parts := strings.Split(rel, "/")
	if len(parts) != 3 {
		return "", CommittedOffset{}, fmt.Errorf("meta: offset key %q: %w", rel, ErrCorrupt)
	}
	group, err := url.PathUnescape(parts[0])
	if err != nil {
		return "", CommittedOffset{}, fmt.Errorf("meta: offset key %q: %w: %w", rel, ErrCorrupt, err)
	}
	id, err := uuid.Parse(parts[1])
	if err != nil {
		return "", CommittedOffset{}, fmt.Errorf("meta: offset key %q: %w: %w", rel, ErrCorrupt, err)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < 0 {
		return "", CommittedOffset{}, fmt.Errorf("meta: offset key %q: %w", rel, ErrCorrupt)
	}
	var r offsetRecord
	if err := json.Unmarshal(val, &r); err != nil {
		return "", CommittedOffset{}, fmt.Errorf("meta: decode offset %q: %w: %w", rel, ErrCorrupt, err)
	}
	switch {
	case r.V > offsetRecordVersion:
		return "", CommittedOffset{}, fmt.Errorf("meta: decode offset %q: version %d, this build knows %d: %w", rel, r.V, offsetRecordVersion, ErrUnknownVersion)
	case r.V != offsetRecordVersion:
		return "", CommittedOffset{}, fmt.Errorf("meta: decode offset %q: version %d: %w", rel, r.V, ErrCorrupt)
	}
	return group, CommittedOffset{
		OffsetKey:   OffsetKey{TopicID: id, Partition: int32(p)},
		Topic:       r.Topic,
		Offset:      r.Offset,
		LeaderEpoch: r.LeaderEpoch,
		Metadata:    r.Metadata,
		Generation:  r.Generation,
		CommitTime:  time.UnixMilli(r.CommitTimeMs),
	}, nil
}

// DeleteOffsets deletes some offsets of one group (expiry, OffsetDelete),
// at most the store's transaction limit per transaction.
func (s *Store) DeleteOffsets(ctx context.Context, tenant, group string, keys []OffsetKey) error {
	for start := 0; start < len(keys); start += s.maxTxnOps {
		chunk := keys[start:min(start+s.maxTxnOps, len(keys))]
		ops := make([]clientv3.Op, 0, len(chunk))
		for _, k := range chunk {
			ops = append(ops, clientv3.OpDelete(s.offsetKey(tenant, group, k)))
		}
		if _, err := s.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("meta: delete %d offsets of group %q: %w", len(chunk), group, err)
		}
	}
	return nil
}

// DeleteGroupOffsets deletes every offset of one group.
func (s *Store) DeleteGroupOffsets(ctx context.Context, tenant, group string) error {
	if _, err := s.client.Delete(ctx, s.groupOffsetsPrefix(tenant, group), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("meta: delete offsets of group %q: %w", group, err)
	}
	return nil
}
