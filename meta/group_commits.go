package meta

// This file owns a group's commit key: the fence that lets the group's
// coordinator retry an offset commit whose outcome it does not know (an
// etcd request that timed out, an answer lost while etcd's leader moved)
// without ever letting an older commit land after a newer one.
//
//	<prefix>group-commits/<tenant>/<group>   "<token>/<i>" (raw string): the token of
//	                                         the last offset transaction stored for the
//	                                         group and its index within that commit
//
// <tenant> and <group> are path-escaped, as under group-claims/. Each
// transaction of CommitOffsetsFenced holds only while the key is at the mod
// revision its writer last saw (0: absent), and moves it, storing its own
// token; so of several tries of one transaction at most one applies, and
// none of them can apply once a later transaction moved the key. A try
// refused by that comparison reads the key back in the same transaction:
// if it holds the try's own token, an earlier try of the very same
// transaction applied, and the commit goes on from there.
//
// SaveGroupGenerationFenced stores a group's generation under the same
// fence, so the coordinator's generation writes retry alike and order with
// its commits.
//
// Invariant: the key is written only by a transaction that also writes the
// group's offsets or generation under the caller's conditions (its claim),
// and deleted with the group's offsets (DeleteGroupOffsetsIf).
// Invariant: a token is the caller's and unique per logical commit (random),
// so a stored token is recognised only by a retry of its own commit.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *Store) groupCommitKey(tenant, group string) string {
	return s.prefix + "group-commits/" + url.PathEscape(tenant) + "/" + url.PathEscape(group)
}

// GroupCommitRevision reads the mod revision of a group's commit key, the
// rev its coordinator passes to its first CommitOffsetsFenced; 0 when the
// group never had a fenced commit.
func (s *Store) GroupCommitRevision(ctx context.Context, tenant, group string) (int64, error) {
	resp, err := s.client.Get(ctx, s.groupCommitKey(tenant, group))
	if err != nil {
		return 0, fmt.Errorf("meta: read commit revision of group %q: %w", group, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

// CommitOffsetsFenced is CommitOffsetsIf with the group's commit key as a
// second fence: each transaction (at most MaxTxnOps-1 offsets) stores its
// offsets only if every condition holds and the commit key is still at
// rev, and moves the key, storing token and the transaction's index. It
// returns the key's revision after the last transaction, the rev of the
// group's next commit.
//
// After an error other than ErrFenced the outcome is unknown; calling again
// with the same offsets, rev and token is safe and resolves it: a
// transaction an earlier call stored is recognised by its token and not
// written again, and one that did not apply can no longer apply once this
// call moved the key. ErrFenced: a condition failed, or the key moved under
// another token (another writer, or a commit of the caller it has given
// up on); the error says how many offsets were stored before.
func (s *Store) CommitOffsetsFenced(ctx context.Context, tenant, group string, offsets []CommittedOffset, rev int64, token string, conds ...clientv3.Cmp) (int64, error) {
	if len(conds)+1 > s.maxTxnOps || token == "" || strings.Contains(token, "/") {
		return 0, fmt.Errorf("meta: commit offsets of group %q: %d conditions, token %q: %w", group, len(conds), token, ErrInvalidConfig)
	}
	for _, o := range offsets {
		if o.Partition < 0 || o.TopicID == uuid.Nil {
			return 0, fmt.Errorf("meta: commit offsets of group %q: bad key %s-%d: %w", group, o.Topic, o.Partition, ErrInvalidPartitions)
		}
	}
	key := s.groupCommitKey(tenant, group)
	per := max(s.maxTxnOps-1, 1)
	for i, start := 0, 0; start < len(offsets); i, start = i+1, start+per {
		chunk := offsets[start:min(start+per, len(offsets))]
		ops := make([]clientv3.Op, 0, len(chunk)+1)
		for _, o := range chunk {
			val, err := json.Marshal(offsetRecord{
				V: offsetRecordVersion, Topic: o.Topic, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
				Metadata: o.Metadata, Generation: o.Generation, CommitTimeMs: o.CommitTime.UnixMilli(),
			})
			if err != nil {
				return 0, fmt.Errorf("meta: encode offset of group %q %s-%d: %w", group, o.Topic, o.Partition, err)
			}
			ops = append(ops, clientv3.OpPut(s.offsetKey(tenant, group, o.OffsetKey), string(val)))
		}
		var j int
		var err error
		rev, j, err = s.fencedTxn(ctx, key, rev, token, i, conds, ops)
		if errors.Is(err, ErrFenced) {
			return 0, fmt.Errorf("meta: commit offsets of group %q: %w after %d of %d were stored", group, ErrFenced, start, len(offsets))
		}
		if err != nil {
			return 0, fmt.Errorf("meta: commit %d offsets of group %q (outcome unknown): %w", len(chunk), group, err)
		}
		start += (j - i) * per // transactions i..j are stored; go on after j
		i = j
	}
	return rev, nil
}

// SaveGroupGenerationFenced is SaveGroupGeneration fenced by the group's
// commit key as CommitOffsetsFenced is (one transaction, index 0), and
// safe to call again with the same gen, rev and token after an unknown
// outcome. It returns the commit key's new revision.
func (s *Store) SaveGroupGenerationFenced(ctx context.Context, c GroupClaim, gen int32, rev int64, token string) (int64, error) {
	if gen < 0 || token == "" || strings.Contains(token, "/") {
		return 0, fmt.Errorf("meta: save generation %d of group %q, token %q: %w", gen, c.Group, token, ErrInvalidConfig)
	}
	ops := []clientv3.Op{clientv3.OpPut(s.groupGenerationKey(c.Tenant, c.Group), strconv.FormatInt(int64(gen), 10))}
	rev, _, err := s.fencedTxn(ctx, s.groupCommitKey(c.Tenant, c.Group), rev, token, 0, []clientv3.Cmp{c.If()}, ops)
	if err != nil && !errors.Is(err, ErrFenced) {
		return 0, fmt.Errorf("meta: save generation %d of group %q (outcome unknown): %w", gen, c.Group, err)
	}
	if err != nil {
		return 0, fmt.Errorf("meta: save generation of group %q: %w", c.Group, err)
	}
	return rev, nil
}

// fencedTxn runs ops as transaction i of the commit named token: only while
// conds hold and the commit key is at rev, storing "<token>/<i>" in it. It
// returns the key's revision after transaction j, j = i when this call
// stored it, or the index an earlier try of the same commit stored (j >=
// i), found when the key's comparison failed. ErrFenced: refused, and the
// key holds no try of this commit at i or later. Any other error: the
// outcome is unknown.
func (s *Store) fencedTxn(ctx context.Context, key string, rev int64, token string, i int, conds []clientv3.Cmp, ops []clientv3.Op) (int64, int, error) {
	ops = append(ops, clientv3.OpPut(key, token+"/"+strconv.Itoa(i)))
	cmps := append(append(make([]clientv3.Cmp, 0, len(conds)+1), conds...), clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	resp, err := s.client.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return 0, -1, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, i, nil
	}
	// Refused: by an earlier try of this commit that applied (the key holds
	// this token, at this transaction's index or a later one), or by the
	// fence.
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
		if n, ok := strings.CutPrefix(string(kvs[0].Value), token+"/"); ok {
			if j, err := strconv.Atoi(n); err == nil && j >= i {
				return kvs[0].ModRevision, j, nil
			}
		}
	}
	return 0, -1, ErrFenced
}
