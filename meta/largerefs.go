package meta

// This file owns the reference ledger of large payloads (issue 21): which
// partitions hold records that name a published object (payload/ref), and
// up to which offset. Each (object, partition) pair is one entry, written
// under two keys in one transaction so that both the object's retention
// (broker/largeobj's sweep) and the partition's leader (tier's retention
// machine) find it by prefix:
//
//	<prefix>largerefs/o/<ref id>/<topicID>/<n>   {"v":1,"ref","tenant","topic",
//	<prefix>largerefs/p/<topicID>/<n>/<ref id>    "topic_id","partition","open",
//	                                              "claimed_ms","upto"}
//
// <topicID> is the canonical UUID text, <n> the partition index. "open"
// says a claim was recorded at claimed_ms and the offset of its record is
// not bounded yet; "upto" is an upper bound of (offset + 1) of every record
// of the partition that names the object, known once the entry is closed.
// tier/doc.go states the ledger's invariant and the retention rules.
//
// Invariant: an entry is written by a claim (ClaimRef) in the same
// transaction that checks the upload record's revision, before its record
// is appended; closed (CloseRef) and dropped (DropRef) only by
// transactions conditioned on the revision the caller read, so a claim
// racing a close or a drop wins or is retried; both keys always change
// together. Condemning an object (CondemnUpload) is conditioned on no entry
// of it having changed since the caller listed them, and every claim is
// conditioned on the upload record, which condemning changes: a claim and
// a condemnation cannot both succeed.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LargeRef is one entry of the reference ledger.
type LargeRef struct {
	V         int      `json:"v"`
	Ref       string   `json:"ref"`
	Tenant    string   `json:"tenant"`
	Topic     string   `json:"topic"` // the topic's internal name when claimed (for display)
	TopicID   [16]byte `json:"topic_id"`
	Partition int32    `json:"partition"`
	// Open: a claim at ClaimedMs is not yet bounded by Upto.
	Open      bool  `json:"open"`
	ClaimedMs int64 `json:"claimed_ms"`
	// Upto bounds (offset + 1) of every record of the partition naming
	// Ref that was appended before the entry was last closed.
	Upto int64 `json:"upto"`

	Revision int64 `json:"-"` // the mod revision when read
}

func (s *Store) largeRefsPrefix() string { return s.prefix + "largerefs/" }

// largeRefObjectPrefix is the prefix of every entry of object id.
func (s *Store) largeRefObjectPrefix(id string) string { return s.largeRefsPrefix() + "o/" + id + "/" }

func (s *Store) largeRefPartitionPrefix(topicID [16]byte, n int32) string {
	return s.largeRefsPrefix() + "p/" + uuid.UUID(topicID).String() + "/" + strconv.Itoa(int(n)) + "/"
}

func (s *Store) largeRefKeys(r LargeRef) (byObject, byPartition string) {
	return s.largeRefObjectPrefix(r.Ref) + uuid.UUID(r.TopicID).String() + "/" + strconv.Itoa(int(r.Partition)),
		s.largeRefPartitionPrefix(r.TopicID, r.Partition) + r.Ref
}

func validLargeRef(r LargeRef) error {
	switch {
	case r.V != 1:
		return fmt.Errorf("meta: large ref %q: version %d: %w", r.Ref, r.V, ErrUnknownVersion)
	case r.Ref == "" || len(r.Ref) > 64 || strings.ContainsAny(r.Ref, "/ "):
		return fmt.Errorf("meta: large ref %q: bad id: %w", r.Ref, ErrCorrupt)
	case r.Partition < 0 || r.Upto < 0 || r.ClaimedMs < 0:
		return fmt.Errorf("meta: large ref %q: partition %d, upto %d, claimed %d: %w", r.Ref, r.Partition, r.Upto, r.ClaimedMs, ErrCorrupt)
	}
	return nil
}

func decodeLargeRef(key string, val []byte, rev int64) (LargeRef, error) {
	var r LargeRef
	if err := json.Unmarshal(val, &r); err != nil {
		return LargeRef{}, fmt.Errorf("meta: large ref %s: %w: %w", key, err, ErrCorrupt)
	}
	if err := validLargeRef(r); err != nil {
		return LargeRef{}, err
	}
	r.Revision = rev
	return r, nil
}

func (s *Store) putLargeRefOps(r LargeRef) ([]clientv3.Op, error) {
	r.V = 1
	if err := validLargeRef(r); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("meta: encode large ref %q: %w", r.Ref, err)
	}
	ok, pk := s.largeRefKeys(r)
	return []clientv3.Op{clientv3.OpPut(ok, string(b)), clientv3.OpPut(pk, string(b))}, nil
}

// ClaimRef records a claim of u's object by a record about to be appended
// to partition (at.TopicID, at.Partition) at at.ClaimedMs: the entry is
// (re)opened, keeping its bound. With publish, u (its state already set to
// published by the caller) is written in the same transaction. It fails
// with ErrConflict when u's record changed since it was read at
// u.Revision, or the entry changed meanwhile: the caller reads again.
func (s *Store) ClaimRef(ctx context.Context, u Upload, publish bool, at LargeRef) error {
	at.V, at.Ref, at.Open = 1, u.ID, true
	ok, _ := s.largeRefKeys(at)
	resp, err := s.client.Get(ctx, ok)
	if err != nil {
		return fmt.Errorf("meta: read large ref %s: %w", ok, err)
	}
	var prevRev int64
	if len(resp.Kvs) > 0 {
		prev, err := decodeLargeRef(ok, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
		if err != nil {
			return err
		}
		prevRev = prev.Revision
		at.Upto = max(at.Upto, prev.Upto)
		at.ClaimedMs = max(at.ClaimedMs, prev.ClaimedMs)
	}
	ops, err := s.putLargeRefOps(at)
	if err != nil {
		return err
	}
	var before, after charge // what the record counts changes only if it is written
	if publish {
		u.V = 1
		if err := ValidateUpload(u); err != nil {
			return err
		}
		b, err := json.Marshal(u)
		if err != nil {
			return fmt.Errorf("meta: encode upload %q: %w", u.ID, err)
		}
		ops = append(ops, clientv3.OpPut(s.uploadKey(u.ID), string(b)))
		if before, err = s.chargeBefore(ctx, u); err != nil {
			return err
		}
		after = chargeOf(u, 0)
	}
	tr, err := s.countedTxn(ctx, []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(s.uploadKey(u.ID)), "=", u.Revision),
		clientv3.Compare(clientv3.ModRevision(ok), "=", prevRev),
	}, ops, nil, before, after)
	if err != nil {
		return fmt.Errorf("meta: claim large ref %s: %w", ok, err)
	}
	if !tr.Succeeded {
		return fmt.Errorf("meta: claim large ref %s: %w", ok, ErrConflict)
	}
	return nil
}

// CloseRef bounds entry r (read at r.Revision) by upto: it is closed with
// the greater of its bound and upto. ErrConflict when it changed.
func (s *Store) CloseRef(ctx context.Context, r LargeRef, upto int64) error {
	rev := r.Revision
	r.Open, r.Upto = false, max(r.Upto, upto)
	ops, err := s.putLargeRefOps(r)
	if err != nil {
		return err
	}
	ok, _ := s.largeRefKeys(r)
	tr, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ok), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("meta: close large ref %s: %w", ok, err)
	}
	if !tr.Succeeded {
		return fmt.Errorf("meta: close large ref %s at revision %d: %w", ok, rev, ErrConflict)
	}
	return nil
}

// DropRef deletes entry r if it is still at r.Revision (ErrConflict
// otherwise; an entry already gone is success).
func (s *Store) DropRef(ctx context.Context, r LargeRef) error {
	ok, pk := s.largeRefKeys(r)
	tr, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ok), "=", r.Revision)).
		Then(clientv3.OpDelete(ok), clientv3.OpDelete(pk)).Else(clientv3.OpGet(ok, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return fmt.Errorf("meta: drop large ref %s: %w", ok, err)
	}
	if !tr.Succeeded && len(tr.Responses[0].GetResponseRange().GetKvs()) > 0 {
		return fmt.Errorf("meta: drop large ref %s at revision %d: %w", ok, r.Revision, ErrConflict)
	}
	return nil
}

// listLargeRefs reads every entry under prefix and the store's revision.
func (s *Store) listLargeRefs(ctx context.Context, prefix string) ([]LargeRef, int64, error) {
	var out []LargeRef
	var rev int64
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(500), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev)) // one consistent view
		}
		resp, err := s.client.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("meta: list large refs %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			r, err := decodeLargeRef(string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, r)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// RefsOfObject lists object id's entries and the revision they were read at.
func (s *Store) RefsOfObject(ctx context.Context, id string) ([]LargeRef, int64, error) {
	return s.listLargeRefs(ctx, s.largeRefObjectPrefix(id))
}

// RefsOfPartition lists the entries of partition n of topic topicID.
func (s *Store) RefsOfPartition(ctx context.Context, topicID [16]byte, n int32) ([]LargeRef, error) {
	out, _, err := s.listLargeRefs(ctx, s.largeRefPartitionPrefix(topicID, n))
	return out, err
}

// AllRefs lists every entry of the ledger, by object.
func (s *Store) AllRefs(ctx context.Context) ([]LargeRef, error) {
	out, _, err := s.listLargeRefs(ctx, s.largeRefsPrefix()+"o/")
	return out, err
}

// CondemnUpload writes u (whose ReleaseDueMs the caller set) if its record
// is still at u.Revision and no entry of its object changed after rev (the
// revision RefsOfObject answered): ErrConflict otherwise.
func (s *Store) CondemnUpload(ctx context.Context, u Upload, rev int64) (Upload, error) {
	u.V = 1
	if err := ValidateUpload(u); err != nil {
		return Upload{}, err
	}
	b, err := json.Marshal(u)
	if err != nil {
		return Upload{}, fmt.Errorf("meta: encode upload %q: %w", u.ID, err)
	}
	before, err := s.chargeBefore(ctx, u)
	if err != nil {
		return Upload{}, err
	}
	key := s.uploadKey(u.ID)
	tr, err := s.countedTxn(ctx, []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(key), "=", u.Revision),
		clientv3.Compare(clientv3.ModRevision(s.largeRefObjectPrefix(u.ID)), "<", rev+1).WithPrefix(),
	}, []clientv3.Op{clientv3.OpPut(key, string(b))}, nil, before, chargeOf(u, 0))
	if err != nil {
		return Upload{}, fmt.Errorf("meta: condemn upload %q: %w", u.ID, err)
	}
	if !tr.Succeeded {
		return Upload{}, fmt.Errorf("meta: condemn upload %q: %w", u.ID, ErrConflict)
	}
	u.Revision = tr.Header.Revision
	u.read = chargeOf(u, u.Revision)
	return u, nil
}
