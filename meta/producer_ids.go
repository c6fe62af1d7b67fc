package meta

// This file owns the allocation of idempotent producer ids.
//
// Invariant: every block handed out is disjoint from every other, across
// brokers and restarts: the counter under <prefix>producer-ids/next only
// grows, by compare-and-swap.

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *Store) producerIDKey() string { return s.prefix + "producer-ids/next" }

// AllocateProducerIDs reserves n consecutive producer ids and returns the
// first.
func (s *Store) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("meta: allocate %d producer ids: count must be positive", n)
	}
	key := s.producerIDKey()
	for {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("meta: read producer id counter: %w", err)
		}
		var next int64
		var cmp clientv3.Cmp
		if len(resp.Kvs) == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		} else {
			kv := resp.Kvs[0]
			if next, err = strconv.ParseInt(string(kv.Value), 10, 64); err != nil || next < 0 {
				return 0, fmt.Errorf("meta: producer id counter %q: %w", kv.Value, ErrCorrupt)
			}
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		txn, err := s.client.Txn(ctx).If(cmp).
			Then(clientv3.OpPut(key, strconv.FormatInt(next+n, 10))).Commit()
		if err != nil {
			return 0, fmt.Errorf("meta: advance producer id counter: %w", err)
		}
		if txn.Succeeded {
			return next, nil
		}
	}
}
