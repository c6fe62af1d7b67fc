package meta

// This file owns the remote segment index head of a partition: its JSON
// encoding (version 1), reads, and the fenced compare-and-swap that is the
// only way to change it (PutRemoteHead).
//
//	<prefix>heads/<topicID>/<n>
//	{"v":1,"log_start":0,"clean":0,"remote_end":1200,"pending_clean":0,"pending_clean_ms":0,
//	 "epochs":[{"e":1,"s":0}],
//	 "intents":[{"key":"…","base":1200,"epoch":3,"created_ms":…}],
//	 "objects":[{"key":"…","base":0,"next":1200,"size":…,"max_ts":…,"epoch":1,"created_ms":…}],
//	 "manifests":[{"key":"…","base":0,"next":0,"objects":0,"max_ts":0}]}
//
// The head is small by construction: tier/ keeps only the newest objects in
// it and moves older entries into immutable manifest objects in the bucket,
// which the head names. meta stores what tier/ gives it and checks only the
// shape; the meaning of every field is tier/'s (tier/doc.go).
//
// Invariant: a head write succeeds only if the head's mod revision is still
// the one its writer read (0: the head does not exist) and the partition
// state's mod revision is still the one the writer saw itself leader at. A
// partition state changes only through elections (UpdatePartition), so a
// writer whose leader epoch was superseded cannot change the head: the
// single fence against stale leaders of everything tiered.
// Invariant: LogStart <= RemoteEnd and Clean <= LogStart; PutRemoteHead
// refuses a head that moves RemoteEnd, LogStart or Clean backwards.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// remoteHeadVersion is the "v" field this build writes and reads.
const remoteHeadVersion = 1

// RemoteEpoch is one leader-epoch entry of the tiered range: records from
// Start on were written under Epoch.
type RemoteEpoch struct {
	Epoch int32 `json:"e"`
	Start int64 `json:"s"`
}

// RemoteIntent is an upload in flight: its object may or may not exist.
type RemoteIntent struct {
	Key       string `json:"key"`
	Base      int64  `json:"base"`
	Epoch     int32  `json:"epoch"`
	CreatedMs int64  `json:"created_ms"`
}

// RemoteObject is one committed object: offsets [Base, Next).
type RemoteObject struct {
	Key       string `json:"key"`
	Base      int64  `json:"base"`
	Next      int64  `json:"next"`
	Size      int64  `json:"size"`
	MaxTs     int64  `json:"max_ts"`
	Epoch     int32  `json:"epoch"`
	CreatedMs int64  `json:"created_ms"`
}

// ManifestRef names an immutable manifest object in the bucket covering
// [Base, Next): at Level 0 it lists Objects older objects; at Level n > 0 it
// lists Objects manifest references of lower levels (tier/manifest.go).
type ManifestRef struct {
	Key     string `json:"key"`
	Base    int64  `json:"base"`
	Next    int64  `json:"next"`
	Objects int    `json:"objects"`
	MaxTs   int64  `json:"max_ts"`
	Level   int    `json:"level,omitempty"`
}

// RemoteHead is a partition's remote segment index head.
type RemoteHead struct {
	TopicID   [16]byte `json:"-"`
	Partition int32    `json:"-"`
	V         int      `json:"v"`
	LogStart  int64    `json:"log_start"`
	Clean     int64    `json:"clean"`
	RemoteEnd int64    `json:"remote_end"`
	// PendingClean, when above Clean, is the clean target whose objects may
	// be deleted from PendingCleanMs on (the retention grace period).
	PendingClean   int64          `json:"pending_clean,omitempty"`
	PendingCleanMs int64          `json:"pending_clean_ms,omitempty"`
	Epochs         []RemoteEpoch  `json:"epochs,omitempty"`
	Intents        []RemoteIntent `json:"intents,omitempty"`
	Objects        []RemoteObject `json:"objects,omitempty"`
	Manifests      []ManifestRef  `json:"manifests,omitempty"`
	// Revision is the etcd mod revision the head was read or written at; 0
	// for a head that does not exist yet. Not stored.
	Revision int64 `json:"-"`
}

func (s *Store) headsPrefix() string { return s.prefix + "heads/" }
func (s *Store) headKey(id [16]byte, n int32) string {
	return s.headsPrefix() + uuid.UUID(id).String() + "/" + strconv.Itoa(int(n))
}

func validateHead(h RemoteHead) error {
	switch {
	case h.Clean < 0 || h.LogStart < h.Clean || h.RemoteEnd < h.LogStart:
		return fmt.Errorf("%w: clean %d, log start %d, remote end %d out of order", ErrCorrupt, h.Clean, h.LogStart, h.RemoteEnd)
	case h.PendingClean > h.LogStart:
		return fmt.Errorf("%w: pending clean %d above log start %d", ErrCorrupt, h.PendingClean, h.LogStart)
	}
	return nil
}

func decodeHead(id [16]byte, n int32, val []byte, rev int64) (RemoteHead, error) {
	var h RemoteHead
	if err := json.Unmarshal(val, &h); err != nil {
		return RemoteHead{}, fmt.Errorf("meta: head %s-%d: %w: %w", uuid.UUID(id), n, ErrCorrupt, err)
	}
	if h.V > remoteHeadVersion {
		return RemoteHead{}, fmt.Errorf("meta: head %s-%d: version %d: %w", uuid.UUID(id), n, h.V, ErrUnknownVersion)
	}
	if err := validateHead(h); err != nil {
		return RemoteHead{}, fmt.Errorf("meta: head %s-%d: %w", uuid.UUID(id), n, err)
	}
	h.TopicID, h.Partition, h.Revision = id, n, rev
	return h, nil
}

// RemoteHead reads a partition's head. A partition with nothing tiered has
// none: the zero head (Revision 0) is returned, ready to be written.
func (s *Store) RemoteHead(ctx context.Context, topicID [16]byte, partition int32) (RemoteHead, error) {
	resp, err := s.client.Get(ctx, s.headKey(topicID, partition))
	if err != nil {
		return RemoteHead{}, fmt.Errorf("meta: read head %s-%d: %w", uuid.UUID(topicID), partition, err)
	}
	if len(resp.Kvs) == 0 {
		return RemoteHead{TopicID: topicID, Partition: partition, V: remoteHeadVersion}, nil
	}
	return decodeHead(topicID, partition, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// RemoteHeads lists every stored head (for tierctl and the orphan scrub).
// A head that does not decode is returned as an error, never skipped.
func (s *Store) RemoteHeads(ctx context.Context) ([]RemoteHead, error) {
	resp, err := s.client.Get(ctx, s.headsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list heads: %w", err)
	}
	out := make([]RemoteHead, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := parsePartitionKey(string(kv.Key[len(s.headsPrefix()):]))
		if err != nil {
			return nil, fmt.Errorf("meta: head key %q: %w", kv.Key, err)
		}
		h, err := decodeHead(id.topic, id.n, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// PutRemoteHead writes h if the stored head is still at h.Revision and the
// partition state is still at fence.Revision, where fence is the state the
// writer saw itself leader in (fence.Leader, fence.LeaderEpoch). Errors:
// ErrFenced if the partition state moved or is gone (the writer is no longer
// the leader it was), ErrConflict if the head moved, ErrInvalidPartitionState
// if h moves a watermark backwards. It returns h at its new revision.
func (s *Store) PutRemoteHead(ctx context.Context, h RemoteHead, fence PartitionState) (RemoteHead, error) {
	h.V = remoteHeadVersion
	if err := validateHead(h); err != nil {
		return RemoteHead{}, err
	}
	if fence.TopicID != h.TopicID || fence.Partition != h.Partition || fence.Revision == 0 {
		return RemoteHead{}, fmt.Errorf("meta: put head %s-%d: fence is for %s-%d at revision %d: %w",
			uuid.UUID(h.TopicID), h.Partition, uuid.UUID(fence.TopicID), fence.Partition, fence.Revision, ErrFenced)
	}
	val, err := json.Marshal(h)
	if err != nil {
		return RemoteHead{}, fmt.Errorf("meta: encode head: %w", err)
	}
	key, pkey := s.headKey(h.TopicID, h.Partition), s.partitionKey(h.TopicID, h.Partition)
	op := fmt.Sprintf("put head %s-%d at revision %d", uuid.UUID(h.TopicID), h.Partition, h.Revision)
	// Check the watermark rule against the stored head; the write below is
	// conditioned on the head not having moved since.
	if h.Revision != 0 {
		cur, err := s.RemoteHead(ctx, h.TopicID, h.Partition)
		if err != nil {
			return RemoteHead{}, err
		}
		if cur.Revision == h.Revision && (h.RemoteEnd < cur.RemoteEnd || h.LogStart < cur.LogStart || h.Clean < cur.Clean) {
			return RemoteHead{}, fmt.Errorf("meta: %s: %w: a watermark would move back (remote end %d→%d, log start %d→%d, clean %d→%d)",
				op, ErrInvalidPartitionState, cur.RemoteEnd, h.RemoteEnd, cur.LogStart, h.LogStart, cur.Clean, h.Clean)
		}
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", h.Revision),
			clientv3.Compare(clientv3.ModRevision(pkey), "=", fence.Revision)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(pkey)).
		Commit()
	if err != nil {
		return RemoteHead{}, fmt.Errorf("meta: %s: %w", op, err)
	}
	if !resp.Succeeded {
		pk := resp.Responses[0].GetResponseRange().GetKvs()
		if len(pk) == 0 || pk[0].ModRevision != fence.Revision {
			return RemoteHead{}, fmt.Errorf("meta: %s: partition state moved past revision %d: %w", op, fence.Revision, ErrFenced)
		}
		return RemoteHead{}, fmt.Errorf("meta: %s: %w", op, ErrConflict)
	}
	h.Revision = resp.Header.Revision
	return h, nil
}

// DeleteRemoteHead removes a head at h.Revision, once tier/ has deleted
// every object it names (topic deletion). A head already gone is success.
func (s *Store) DeleteRemoteHead(ctx context.Context, h RemoteHead) error {
	key := s.headKey(h.TopicID, h.Partition)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", h.Revision)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("meta: delete head %s-%d: %w", uuid.UUID(h.TopicID), h.Partition, err)
	}
	if !resp.Succeeded && len(resp.Responses[0].GetResponseRange().GetKvs()) > 0 {
		return fmt.Errorf("meta: delete head %s-%d: %w", uuid.UUID(h.TopicID), h.Partition, ErrConflict)
	}
	return nil
}

// RemoteHeadBytes is the stored size of every head, for the etcd-footprint
// benchmark and metrics.
func (s *Store) RemoteHeadBytes(ctx context.Context) (heads int, bytes int64, err error) {
	resp, err := s.client.Get(ctx, s.headsPrefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, 0, fmt.Errorf("meta: list heads: %w", err)
	}
	for _, kv := range resp.Kvs {
		bytes += int64(len(kv.Key) + len(kv.Value))
	}
	return len(resp.Kvs), bytes, nil
}
