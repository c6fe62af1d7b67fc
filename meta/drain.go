package meta

// This file owns the drain marks an operator sets before stopping a broker:
//
//	<prefix>draining/<node id> = RFC 3339 time the drain was asked
//
// A mark is not bound to a lease: it outlives the broker's registration, so
// a drained broker that is stopped stays out of leadership and group
// coordination until it starts again. The broker deletes its own mark when
// it registers at start-up (a restarted broker takes its preferred
// leaderships back), and an operator may delete it sooner (undrain).
//
// Invariant: a mark changes only whom elections and group placement
// prefer; nothing reads it to decide what is committed or deleted.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *Store) drainPrefix() string { return s.prefix + "draining/" }

func (s *Store) drainKey(id int32) string {
	return s.drainPrefix() + strconv.FormatInt(int64(id), 10)
}

// SetDraining sets (on) or deletes the drain mark of broker id.
func (s *Store) SetDraining(ctx context.Context, id int32, on bool) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if id < 0 {
		return fmt.Errorf("meta: drain: node id %d is negative", id)
	}
	var err error
	if on {
		_, err = s.client.Put(ctx, s.drainKey(id), time.Now().UTC().Format(time.RFC3339))
	} else {
		_, err = s.client.Delete(ctx, s.drainKey(id))
	}
	if err != nil {
		return fmt.Errorf("meta: drain mark of broker %d: %w", id, err)
	}
	return nil
}

// Draining returns the node ids with a drain mark, sorted. A key that is
// not a node id (written by hand) is skipped.
func (s *Store) Draining(ctx context.Context) ([]int32, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, s.drainPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("meta: list drain marks: %w", err)
	}
	ids := make([]int32, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), s.drainPrefix()), 10, 32)
		if err != nil || id < 0 {
			continue
		}
		ids = append(ids, int32(id))
	}
	slices.Sort(ids)
	return ids, nil
}
