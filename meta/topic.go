package meta

// This file owns topic records: their JSON encoding (version 1, see doc.go)
// and the create, read, list, update and delete transactions.
//
// Invariant: a topic key is only created by a transaction conditioned on its
// absence, and only changed or deleted by one conditioned on the mod
// revision the caller read, so a lost race is ErrTopicExists or ErrConflict.
// Invariant: deleting a topic deletes its partition state (keyed by topic ID)
// in the same transaction.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/google/uuid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// topicRecordVersion is the "v" field this build writes and reads.
const topicRecordVersion = 1

// maxTopicNameLen is Kafka's limit on topic name length.
const maxTopicNameLen = 249

// maxDeleteAttempts bounds DeleteTopic's retries when the topic changes
// between its read and its delete.
const maxDeleteAttempts = 5

// Topic is a topic's durable metadata.
type Topic struct {
	Name string
	// ID is a random UUID, new for each creation: a recreated topic gets a new ID.
	ID                [16]byte
	Partitions        int32
	ReplicationFactor int16
	// Configs holds only explicitly set topic configs.
	Configs map[string]string
	// Revision is the etcd mod revision the topic was read at, for
	// compare-and-swap in UpdateTopic. Not stored.
	Revision int64
}

// IDString is the topic ID in Kafka's text form (22 characters of base64url).
func (t Topic) IDString() string { return kafkaUUIDString(t.ID) }

// topicRecord is the stored JSON form of a Topic.
type topicRecord struct {
	V                 int               `json:"v"`
	Name              string            `json:"name"`
	ID                uuid.UUID         `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
}

func encodeTopic(t Topic) ([]byte, error) {
	b, err := json.Marshal(topicRecord{
		V:                 topicRecordVersion,
		Name:              t.Name,
		ID:                t.ID,
		Partitions:        t.Partitions,
		ReplicationFactor: t.ReplicationFactor,
		Configs:           t.Configs,
	})
	if err != nil {
		return nil, fmt.Errorf("meta: encode topic %q: %w", t.Name, err)
	}
	return b, nil
}

// decodeTopic decodes the value of kv, which must be the key of topic name.
func decodeTopic(name string, kv *mvccpb.KeyValue) (Topic, error) {
	var r topicRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return Topic{}, fmt.Errorf("meta: decode topic %q: %w: %w", name, ErrCorrupt, err)
	}
	switch {
	case r.V > topicRecordVersion:
		return Topic{}, fmt.Errorf("meta: decode topic %q: version %d, this build knows %d: %w", name, r.V, topicRecordVersion, ErrUnknownVersion)
	case r.V != topicRecordVersion:
		return Topic{}, fmt.Errorf("meta: decode topic %q: version %d: %w", name, r.V, ErrCorrupt)
	case r.Name != name || r.ID == uuid.Nil || r.Partitions <= 0 || r.ReplicationFactor <= 0:
		return Topic{}, fmt.Errorf("meta: decode topic %q: record %+v: %w", name, r, ErrCorrupt)
	}
	return Topic{
		Name:              r.Name,
		ID:                r.ID,
		Partitions:        r.Partitions,
		ReplicationFactor: r.ReplicationFactor,
		Configs:           r.Configs,
		Revision:          kv.ModRevision,
	}, nil
}

// TenantSeparator ends the tenant part of the stored name of a tenant's
// topic or group: tenant~name. The default tenant's names are stored
// unqualified.
const TenantSeparator = '~'

// ValidateTopicName reports whether name is a topic's stored name: at most
// 249 characters, Kafka's rules (1 or more of [a-zA-Z0-9._-], not "." or
// "..") for the name, and a valid tenant other than the default before a
// TenantSeparator.
func ValidateTopicName(name string) error {
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	local := name
	if i := strings.IndexByte(name, TenantSeparator); i >= 0 {
		// A tenant's topic is stored as tenant~name; '~' is no character of
		// a Kafka topic name, so the two never collide.
		if err := ValidateTenantName(name[:i]); err != nil || name[:i] == DefaultTenant {
			return fmt.Errorf("%w: %q: no tenant's name before %q", ErrInvalidTopic, name, TenantSeparator)
		}
		local = name[i+1:]
	}
	if local == "" || local == "." || local == ".." {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, c := range []byte(local) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q contains %q", ErrInvalidTopic, name, c)
		}
	}
	return nil
}

func validateTopic(t Topic) error {
	if err := ValidateTopicName(t.Name); err != nil {
		return err
	}
	if t.Partitions <= 0 {
		return fmt.Errorf("%w: topic %q: %d", ErrInvalidPartitions, t.Name, t.Partitions)
	}
	if t.ReplicationFactor <= 0 {
		return fmt.Errorf("%w: topic %q: %d", ErrInvalidReplicationFactor, t.Name, t.ReplicationFactor)
	}
	return nil
}

func (s *Store) topicsPrefix() string        { return s.prefix + "topics/" }
func (s *Store) topicKey(name string) string { return s.topicsPrefix() + name }
func (s *Store) partitionsPrefix(id [16]byte) string {
	return s.prefix + "partitions/" + uuid.UUID(id).String() + "/"
}

// CreateTopic stores a new topic, giving it a random ID if t.ID is zero. It
// fails with ErrTopicExists if the name is taken. The returned Topic carries
// the ID and Revision.
func (s *Store) CreateTopic(ctx context.Context, t Topic) (Topic, error) {
	if err := validateTopic(t); err != nil {
		return Topic{}, fmt.Errorf("meta: create topic: %w", err)
	}
	if t.ID == uuid.Nil {
		t.ID = newKafkaUUID()
	}
	t.Configs = maps.Clone(t.Configs)
	val, err := encodeTopic(t)
	if err != nil {
		return Topic{}, err
	}
	key := s.topicKey(t.Name)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Commit()
	if err != nil {
		return Topic{}, fmt.Errorf("meta: create topic %q: %w", t.Name, err)
	}
	if !resp.Succeeded {
		return Topic{}, fmt.Errorf("meta: create topic %q: %w", t.Name, ErrTopicExists)
	}
	t.Revision = resp.Header.Revision
	return t, nil
}

// Topic reads one topic; ErrTopicNotFound if there is none of that name.
func (s *Store) Topic(ctx context.Context, name string) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, fmt.Errorf("meta: get topic: %w", err)
	}
	resp, err := s.client.Get(ctx, s.topicKey(name))
	if err != nil {
		return Topic{}, fmt.Errorf("meta: get topic %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return Topic{}, fmt.Errorf("meta: get topic %q: %w", name, ErrTopicNotFound)
	}
	return decodeTopic(name, resp.Kvs[0])
}

// Topics lists every topic, sorted by name.
func (s *Store) Topics(ctx context.Context) ([]Topic, error) {
	topics, _, err := s.listTopics(ctx)
	return topics, err
}

// listTopics lists every topic, sorted by name, with the etcd revision the
// list was read at.
func (s *Store) listTopics(ctx context.Context) ([]Topic, int64, error) {
	prefix := s.topicsPrefix()
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("meta: list topics: %w", err)
	}
	topics := make([]Topic, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		t, err := decodeTopic(strings.TrimPrefix(string(kv.Key), prefix), kv)
		if err != nil {
			return nil, 0, fmt.Errorf("meta: list topics: %w", err)
		}
		topics = append(topics, t)
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	return topics, resp.Header.Revision, nil
}

// UpdateTopic replaces a topic's partition count, replication factor and
// configs, if the stored topic is still the one read at t.Revision:
// ErrConflict if it changed (or was recreated) meanwhile, ErrTopicNotFound if
// it is gone, ErrInvalidPartitions if the partition count would decrease.
func (s *Store) UpdateTopic(ctx context.Context, t Topic) (Topic, error) {
	if err := validateTopic(t); err != nil {
		return Topic{}, fmt.Errorf("meta: update topic: %w", err)
	}
	cur, err := s.Topic(ctx, t.Name)
	if err != nil {
		return Topic{}, fmt.Errorf("meta: update topic: %w", err)
	}
	if cur.Revision != t.Revision || cur.ID != t.ID {
		return Topic{}, fmt.Errorf("meta: update topic %q at revision %d (now %d): %w", t.Name, t.Revision, cur.Revision, ErrConflict)
	}
	if t.Partitions < cur.Partitions {
		return Topic{}, fmt.Errorf("meta: update topic %q: %w: cannot decrease from %d to %d", t.Name, ErrInvalidPartitions, cur.Partitions, t.Partitions)
	}
	t.Configs = maps.Clone(t.Configs)
	val, err := encodeTopic(t)
	if err != nil {
		return Topic{}, err
	}
	key := s.topicKey(t.Name)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)).
		Then(clientv3.OpPut(key, string(val))).
		Commit()
	if err != nil {
		return Topic{}, fmt.Errorf("meta: update topic %q: %w", t.Name, err)
	}
	if !resp.Succeeded {
		return Topic{}, fmt.Errorf("meta: update topic %q at revision %d: %w", t.Name, t.Revision, ErrConflict)
	}
	t.Revision = resp.Header.Revision
	return t, nil
}

// DeleteTopic deletes a topic and its partition state, and returns the
// deleted topic (its ID names the data to clean up). ErrTopicNotFound if
// there is none.
func (s *Store) DeleteTopic(ctx context.Context, name string) (Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return Topic{}, fmt.Errorf("meta: delete topic: %w", err)
	}
	key := s.topicKey(name)
	for range maxDeleteAttempts {
		t, err := s.Topic(ctx, name)
		if err != nil {
			return Topic{}, fmt.Errorf("meta: delete topic: %w", err)
		}
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)).
			Then(
				clientv3.OpDelete(key),
				clientv3.OpDelete(s.partitionsPrefix(t.ID), clientv3.WithPrefix()),
			).
			Commit()
		if err != nil {
			return Topic{}, fmt.Errorf("meta: delete topic %q: %w", name, err)
		}
		if resp.Succeeded {
			return t, nil
		}
		// Updated, or deleted and recreated, since we read it: read again.
	}
	return Topic{}, fmt.Errorf("meta: delete topic %q: changed %d times while deleting: %w", name, maxDeleteAttempts, ErrConflict)
}
