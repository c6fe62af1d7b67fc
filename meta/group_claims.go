package meta

// This file owns group-coordinator claims: one key per consumer group that
// a broker holds while it coordinates the group, bound to that broker's
// registration lease, and the transactions fenced by it.
//
//	<prefix>group-claims/<tenant>/<group>    node id, decimal (raw string), bound to
//	                                         the claiming broker's registration lease
//
// <tenant> and <group> are path-escaped (url.PathEscape), as under offsets/.
// The key's create revision names one tenure: GroupClaim.If holds only while
// that very key lives, so a broker whose claim was released, deleted or
// expired (and perhaps taken by another broker since) cannot write with it.
//
// Invariant: a claim key is created only by a transaction conditioned on its
// absence and always with a lease, so at most one lease (one broker
// incarnation) holds a group at a time, and the claim disappears with the
// broker's registration (same lease, same revision as its broker key).
// Invariant: a claim is deleted only by its holder, by a transaction
// conditioned on its create revision (ReleaseGroup), or by its lease ending.
//
// The Store does not decide who should coordinate a group (placement is the
// broker's business); it only keeps two brokers from holding it at once.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrGroupClaimed: another broker (another lease) holds the group's claim.
var ErrGroupClaimed = errors.New("meta: group claimed by another broker")

// GroupClaim is one broker's tenure as the coordinator of one group.
type GroupClaim struct {
	Tenant, Group string
	NodeID        int32            // the holder
	Lease         clientv3.LeaseID // the holder's registration lease
	Revision      int64            // create revision of the claim key: the tenure
	key           string
}

// If is a transaction comparison that holds only while this claim's key
// exists at its create revision. Put it in every write the coordinator
// makes on the group's behalf (CommitOffsetsIf and the fenced deletes).
func (c GroupClaim) If() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.Revision)
}

func (s *Store) groupClaimsPrefix(tenant string) string {
	return s.prefix + "group-claims/" + url.PathEscape(tenant) + "/"
}

func (s *Store) groupClaimKey(tenant, group string) string {
	return s.groupClaimsPrefix(tenant) + url.PathEscape(group)
}

// ClaimGroup takes the claim on a group for node nodeID, bound to lease (the
// broker's registration lease, which must be live). A claim already held by
// the same lease is returned as it is (claiming is idempotent within one
// incarnation). A claim held by another lease fails with ErrGroupClaimed;
// the returned GroupClaim then describes the holder.
func (s *Store) ClaimGroup(ctx context.Context, tenant, group string, nodeID int32, lease clientv3.LeaseID) (GroupClaim, error) {
	if lease == 0 || nodeID < 0 || group == "" {
		return GroupClaim{}, fmt.Errorf("meta: claim group %q for node %d with lease %x: %w", group, nodeID, int64(lease), ErrInvalidConfig)
	}
	key := s.groupClaimKey(tenant, group)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.FormatInt(int64(nodeID), 10), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return GroupClaim{}, fmt.Errorf("meta: claim group %q: %w", group, err)
	}
	c := GroupClaim{Tenant: tenant, Group: group, NodeID: nodeID, Lease: lease, Revision: resp.Header.Revision, key: key}
	if resp.Succeeded {
		return c, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 {
		return GroupClaim{}, fmt.Errorf("meta: claim group %q: %s present but unreadable: %w", group, key, ErrCorrupt)
	}
	holder, err := decodeClaim(tenant, group, key, kvs[0].Value)
	if err != nil {
		return GroupClaim{}, err
	}
	holder.Lease, holder.Revision = clientv3.LeaseID(kvs[0].Lease), kvs[0].CreateRevision
	if holder.Lease == lease {
		return holder, nil
	}
	return holder, fmt.Errorf("meta: claim group %q: %w: node %d holds it since revision %d",
		group, ErrGroupClaimed, holder.NodeID, holder.Revision)
}

func decodeClaim(tenant, group, key string, val []byte) (GroupClaim, error) {
	id, err := strconv.ParseInt(string(val), 10, 32)
	if err != nil || id < 0 {
		return GroupClaim{}, fmt.Errorf("meta: group claim %s: value %q: %w", key, val, ErrCorrupt)
	}
	return GroupClaim{Tenant: tenant, Group: group, NodeID: int32(id), key: key}, nil
}

// ReleaseGroup deletes the claim if it is still this tenure's; a claim
// already gone (expired, or released before) is not an error.
func (s *Store) ReleaseGroup(ctx context.Context, c GroupClaim) error {
	if c.key == "" {
		return nil
	}
	if _, err := s.client.Txn(ctx).If(c.If()).Then(clientv3.OpDelete(c.key)).Commit(); err != nil {
		return fmt.Errorf("meta: release group %q: %w", c.Group, err)
	}
	return nil
}

// GroupClaimHolder reads who holds a group's claim; false if nobody does.
func (s *Store) GroupClaimHolder(ctx context.Context, tenant, group string) (GroupClaim, bool, error) {
	key := s.groupClaimKey(tenant, group)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return GroupClaim{}, false, fmt.Errorf("meta: read claim of group %q: %w", group, err)
	}
	if len(resp.Kvs) == 0 {
		return GroupClaim{}, false, nil
	}
	c, err := decodeClaim(tenant, group, key, resp.Kvs[0].Value)
	if err != nil {
		return GroupClaim{}, false, err
	}
	c.Lease, c.Revision = clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].CreateRevision
	return c, true, nil
}

// GroupClaims lists every claim of a tenant, sorted by group.
func (s *Store) GroupClaims(ctx context.Context, tenant string) ([]GroupClaim, error) {
	prefix := s.groupClaimsPrefix(tenant)
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("meta: list group claims under %s: %w", prefix, err)
	}
	out := make([]GroupClaim, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		group, err := url.PathUnescape(strings.TrimPrefix(string(kv.Key), prefix))
		if err != nil {
			return nil, fmt.Errorf("meta: group claim key %q: %w: %w", kv.Key, ErrCorrupt, err)
		}
		c, err := decodeClaim(tenant, group, string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		c.Lease, c.Revision = clientv3.LeaseID(kv.Lease), kv.CreateRevision
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b GroupClaim) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

// OffsetGroups lists the groups of a tenant that have committed offsets,
// sorted, reading keys only.
func (s *Store) OffsetGroups(ctx context.Context, tenant string) ([]string, error) {
	prefix := s.offsetsPrefix(tenant)
	resp, err := s.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("meta: list groups with offsets under %s: %w", prefix, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		rel := strings.TrimPrefix(string(kv.Key), prefix)
		esc, _, ok := strings.Cut(rel, "/")
		if !ok {
			return nil, fmt.Errorf("meta: offset key %q: %w", kv.Key, ErrCorrupt)
		}
		g, err := url.PathUnescape(esc)
		if err != nil {
			return nil, fmt.Errorf("meta: offset key %q: %w: %w", kv.Key, ErrCorrupt, err)
		}
		if len(out) == 0 || out[len(out)-1] != g {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// DeleteOffsetsIf is DeleteOffsets fenced by conds (a GroupClaim's If): each
// transaction deletes only while every condition holds, and fails with
// ErrFenced otherwise. At most MaxTxnOps conditions.
func (s *Store) DeleteOffsetsIf(ctx context.Context, tenant, group string, keys []OffsetKey, conds ...clientv3.Cmp) error {
	if len(conds) > s.maxTxnOps {
		return fmt.Errorf("meta: delete offsets of group %q: %d conditions: %w", group, len(conds), ErrInvalidConfig)
	}
	for start := 0; start < len(keys); start += s.maxTxnOps {
		chunk := keys[start:min(start+s.maxTxnOps, len(keys))]
		ops := make([]clientv3.Op, 0, len(chunk))
		for _, k := range chunk {
			ops = append(ops, clientv3.OpDelete(s.offsetKey(tenant, group, k)))
		}
		resp, err := s.client.Txn(ctx).If(conds...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("meta: delete %d offsets of group %q: %w", len(chunk), group, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("meta: delete offsets of group %q: %w after %d of %d were deleted", group, ErrFenced, start, len(keys))
		}
	}
	return nil
}

// DeleteGroupOffsetsIf is DeleteGroupOffsets fenced by conds: one ranged
// delete, with the group's stored generation and its commit key, that
// happens only while every condition holds (ErrFenced otherwise).
func (s *Store) DeleteGroupOffsetsIf(ctx context.Context, tenant, group string, conds ...clientv3.Cmp) error {
	resp, err := s.client.Txn(ctx).If(conds...).
		Then(clientv3.OpDelete(s.groupOffsetsPrefix(tenant, group), clientv3.WithPrefix()),
			clientv3.OpDelete(s.groupGenerationKey(tenant, group)),
			clientv3.OpDelete(s.groupCommitKey(tenant, group))).Commit()
	if err != nil {
		return fmt.Errorf("meta: delete offsets of group %q: %w", group, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("meta: delete offsets of group %q: %w", group, ErrFenced)
	}
	return nil
}
