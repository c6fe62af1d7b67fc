package meta

// This file owns the published quota usage: one key per broker holding the
// demand it measured of each tenant's rate quotas in the last period, by
// which every broker splits a tenant's cluster-wide rate among the brokers
// its traffic lands on (broker/quota, split.go).
//
//	<prefix>quota-usage/<node id>
//	{"v":1,"tenants":{"acme":{"producer_byte_rate":262144,"connections":3}}}
//
// Invariant: a quota-usage key is written only with a lease, its broker's
// registration lease, so a broker that is gone stops counting in the split
// when its registration does.
//
// Each key has one writer, the broker its node id names, so writes are
// plain puts; readers read the whole prefix each period (a handful of
// small keys), so there is no watch to own.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// quotaUsageVersion is the "v" field this build writes and reads.
const quotaUsageVersion = 1

// QuotaUsage is one broker's measured demand: tenant → quota key → units
// per second (for connections, the connections open).
type QuotaUsage map[string]map[string]float64

type quotaUsageRecord struct {
	V       int        `json:"v"`
	Tenants QuotaUsage `json:"tenants"`
}

func (s *Store) quotaUsagePrefix() string { return s.prefix + "quota-usage/" }

// PublishQuotaUsage replaces node's published usage, bound to lease (the
// node's registration lease, which must be live).
func (s *Store) PublishQuotaUsage(ctx context.Context, node int32, lease clientv3.LeaseID, u QuotaUsage) error {
	if node < 0 || lease == 0 {
		return fmt.Errorf("meta: publish quota usage of node %d with lease %x: %w", node, int64(lease), ErrInvalidConfig)
	}
	val, err := json.Marshal(quotaUsageRecord{V: quotaUsageVersion, Tenants: u})
	if err != nil {
		return fmt.Errorf("meta: encode quota usage of node %d: %w", node, err)
	}
	key := s.quotaUsagePrefix() + strconv.FormatInt(int64(node), 10)
	if _, err := s.client.Put(ctx, key, string(val), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("meta: publish quota usage of node %d: %w", node, err)
	}
	return nil
}

// QuotaUsages reads every live broker's published usage, by node id. A key
// that does not decode is skipped with a log line (a newer version is not
// an error: that broker's demand is simply not counted).
func (s *Store) QuotaUsages(ctx context.Context) (map[int32]QuotaUsage, error) {
	resp, err := s.client.Get(ctx, s.quotaUsagePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: read quota usage: %w", err)
	}
	out := make(map[int32]QuotaUsage, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, u, err := decodeQuotaUsage(strings.TrimPrefix(string(kv.Key), s.quotaUsagePrefix()), kv.Value)
		if err != nil {
			s.log.Warn().Err(err).Msg("quota usage: skipping a key")
			continue
		}
		out[id] = u
	}
	return out, nil
}

// decodeQuotaUsage decodes the value of the key of node name.
func decodeQuotaUsage(name string, val []byte) (int32, QuotaUsage, error) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return 0, nil, fmt.Errorf("meta: quota usage key %q: %w", name, ErrCorrupt)
	}
	var r quotaUsageRecord
	if err := json.Unmarshal(val, &r); err != nil {
		return 0, nil, fmt.Errorf("meta: decode quota usage of node %d: %w: %w", id, ErrCorrupt, err)
	}
	switch {
	case r.V > quotaUsageVersion:
		return 0, nil, fmt.Errorf("meta: decode quota usage of node %d: version %d, this build knows %d: %w", id, r.V, quotaUsageVersion, ErrUnknownVersion)
	case r.V != quotaUsageVersion:
		return 0, nil, fmt.Errorf("meta: decode quota usage of node %d: version %d: %w", id, r.V, ErrCorrupt)
	}
	if r.Tenants == nil {
		r.Tenants = QuotaUsage{}
	}
	return int32(id), r.Tenants, nil
}
