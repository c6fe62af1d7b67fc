package meta

// This file owns the storage figures each broker publishes for the storage
// quota: the bytes retained by the partitions it leads, by tenant.
//
//	<prefix>usage/<node id>    {"v":1,"tenants":{"acme":1234,…}}, bound to a lease
//	                           of the publishing broker's (UsageLease), so a
//	                           stopped broker's figures go with it
//
// A partition counts at its leader only, so the sum over the keys is a
// tenant's cluster-wide figure; during a leader change a partition may be
// counted by both brokers or by neither for one publishing interval.
//
// Invariant: a usage key is written only with a lease.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// usageVersion is the "v" field this build writes and reads.
const usageVersion = 1

type usageValue struct {
	V       int              `json:"v"`
	Tenants map[string]int64 `json:"tenants"`
}

func (s *Store) usagePrefix() string { return s.prefix + "usage/" }

// UsageLease returns lease when it is still alive (renewing it), else a new
// lease of ttl: the lease a broker's usage key is bound to.
func (s *Store) UsageLease(ctx context.Context, lease clientv3.LeaseID, ttl time.Duration) (clientv3.LeaseID, error) {
	if lease != 0 {
		_, err := s.client.KeepAliveOnce(ctx, lease)
		if err == nil {
			return lease, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, fmt.Errorf("meta: renew usage lease: %w", err)
		}
	}
	grant, err := s.client.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return 0, fmt.Errorf("meta: grant usage lease: %w", err)
	}
	return grant.ID, nil
}

// PutUsage stores node's retained bytes by tenant under lease.
func (s *Store) PutUsage(ctx context.Context, node int32, tenants map[string]int64, lease clientv3.LeaseID) error {
	if lease == 0 {
		return errors.New("meta: put usage: no lease")
	}
	val, err := json.Marshal(usageValue{V: usageVersion, Tenants: tenants})
	if err != nil {
		return fmt.Errorf("meta: encode usage: %w", err)
	}
	key := s.usagePrefix() + strconv.Itoa(int(node))
	if _, err := s.client.Put(ctx, key, string(val), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("meta: put usage of node %d: %w", node, err)
	}
	return nil
}

// Usage sums every broker's published figures by tenant.
func (s *Store) Usage(ctx context.Context) (map[string]int64, error) {
	resp, err := s.client.Get(ctx, s.usagePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list usage: %w", err)
	}
	out := make(map[string]int64)
	for _, kv := range resp.Kvs {
		u, err := decodeUsage(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: usage key %q: %w", kv.Key, err)
		}
		for t, n := range u.Tenants {
			out[t] += n
		}
	}
	return out, nil
}

func decodeUsage(raw []byte) (usageValue, error) {
	var u usageValue
	if err := json.Unmarshal(raw, &u); err != nil {
		return u, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	switch {
	case u.V > usageVersion:
		return u, fmt.Errorf("%w: usage v%d", ErrUnknownVersion, u.V)
	case u.V < 1:
		return u, fmt.Errorf("%w: usage without a version", ErrCorrupt)
	}
	for t, n := range u.Tenants {
		if n < 0 {
			return u, fmt.Errorf("%w: tenant %q retains %d bytes", ErrCorrupt, t, n)
		}
	}
	return u, nil
}
