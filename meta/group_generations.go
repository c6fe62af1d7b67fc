package meta

// This file owns the last generation of each consumer group, kept so that a
// coordinator taking a group over goes on counting where its predecessor
// stopped instead of starting again at 0. Kafka clients and the chaos
// checker rely on generations only rising within a group: a commit carrying
// a generation that was already superseded is a zombie's.
//
//	<prefix>group-generations/<tenant>/<group>   the highest generation handed out, decimal
//
// <tenant> and <group> are path-escaped, as under group-claims/.
//
// Invariant: the value is written only by a transaction fenced by the
// writer's GroupClaim (SaveGroupGeneration; SaveGroupGenerationFenced, also
// by the group's commit key, group_commits.go), and the coordinator writes a
// generation before any member learns it, so every generation a member was
// told is at most the stored one; the value never falls while the group
// lives, and goes with the group's offsets (DeleteGroupOffsetsIf).

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *Store) groupGenerationKey(tenant, group string) string {
	return s.prefix + "group-generations/" + url.PathEscape(tenant) + "/" + url.PathEscape(group)
}

// GroupGeneration reads the highest generation stored for a group; 0 when
// none was.
func (s *Store) GroupGeneration(ctx context.Context, tenant, group string) (int32, error) {
	key := s.groupGenerationKey(tenant, group)
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("meta: read generation of group %q: %w", group, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	gen, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 32)
	if err != nil || gen < 0 {
		return 0, fmt.Errorf("meta: group generation %s: value %q: %w", key, resp.Kvs[0].Value, ErrCorrupt)
	}
	return int32(gen), nil
}

// SaveGroupGeneration stores gen as the group's highest generation while c
// is still the group's claim; ErrFenced otherwise. The caller never lowers
// it (it only saves a generation above the one it read).
func (s *Store) SaveGroupGeneration(ctx context.Context, c GroupClaim, gen int32) error {
	if gen < 0 {
		return fmt.Errorf("meta: save generation %d of group %q: %w", gen, c.Group, ErrInvalidConfig)
	}
	resp, err := s.client.Txn(ctx).If(c.If()).
		Then(clientv3.OpPut(s.groupGenerationKey(c.Tenant, c.Group), strconv.FormatInt(int64(gen), 10))).Commit()
	if err != nil {
		return fmt.Errorf("meta: save generation of group %q: %w", c.Group, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("meta: save generation of group %q: %w", c.Group, ErrFenced)
	}
	return nil
}
