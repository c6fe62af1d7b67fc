package controller

// This file owns placement for a tenant: the brokers of the pool the tenant
// is bound to are the only ones offered, and the tenant's own preferred
// leaderships are spread over them before the cluster's are. Like
// placement.go it is a pure function of its arguments.
//
// Invariant: every replica a tenant's placement returns is on a broker of
// the tenant's pool (a broker without a pool is in DefaultPool).
// Invariant: each preferred leader goes to a broker of the pool at the
// minimum of the tenant's leaderships at that moment, so the tenant's
// leader counts over its pool's brokers never spread further than
// max(1, the spread before the call).
//
// No state outlives a call; nothing to guard.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultPool is the pool of a broker started without --pool and of a
// tenant bound to none.
const DefaultPool = "shared"

// Tenant is whose partitions a placement is for.
type Tenant struct {
	// Pool is the pool the tenant is bound to; "" is DefaultPool.
	Pool string
	// Leaders counts the preferred leaderships the tenant's partitions
	// already hold, per broker (for AddTenantPartitions, the topic's own
	// included). Brokers missing from it hold none; nil is empty.
	Leaders map[NodeID]int
}

// PoolOf is the pool a broker or tenant's pool string names: "" is
// DefaultPool.
func PoolOf(pool string) string {
	if pool == "" {
		return DefaultPool
	}
	return pool
}

// InPool returns the brokers of pool, in the order given.
func InPool(brokers []Broker, pool string) []Broker {
	pool = PoolOf(pool)
	var out []Broker
	for _, b := range brokers {
		if PoolOf(b.Pool) == pool {
			out = append(out, b)
		}
	}
	return out
}

// PlaceForTenant is Place for a tenant: it places only on the live brokers
// of t's pool, still one replica per AZ, and gives each preferred leader to
// the broker of the pool with the fewest of t's leaderships (ties: the
// fewest leaderships overall, then the fewest replicas, then the lowest id).
// A pool with fewer AZs than replicationFactor, or with no live broker,
// fails with ErrInvalidReplicationFactor naming the pool and its AZs.
func PlaceForTenant(brokers []Broker, t Tenant, partitions, replicationFactor int, load Load) ([][]NodeID, error) {
	c, err := newTenantCluster(brokers, t, load)
	if err != nil {
		return nil, fmt.Errorf("controller: place: %w", err)
	}
	if partitions < 1 {
		return nil, fmt.Errorf("controller: place: %w: %d partitions, need at least 1", ErrInvalidPartitions, partitions)
	}
	if err := c.checkReplicationFactor(replicationFactor); err != nil {
		return nil, fmt.Errorf("controller: place: %w", err)
	}
	return c.place(partitions, replicationFactor), nil
}

// AddTenantPartitions is AddPartitions for a tenant, with the rules of
// PlaceForTenant. Existing partitions stay where they are, in the pool or
// not: only the new ones follow the tenant's pool.
func AddTenantPartitions(brokers []Broker, t Tenant, existing [][]NodeID, count int, load Load) ([][]NodeID, error) {
	rf, err := existingRF(existing)
	if err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	c, err := newTenantCluster(brokers, t, load)
	if err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	if count < 1 {
		return nil, fmt.Errorf("controller: add partitions: %w: adding %d partitions, need at least 1", ErrInvalidPartitions, count)
	}
	if err := c.checkReplicationFactor(rf); err != nil {
		return nil, fmt.Errorf("controller: add partitions: %w", err)
	}
	return c.place(count, rf), nil
}

// newTenantCluster is the working state of a tenant's placement: the
// brokers of its pool, with its leaderships counted.
func newTenantCluster(brokers []Broker, t Tenant, load Load) (*cluster, error) {
	pool := PoolOf(t.Pool)
	in := InPool(brokers, pool)
	if len(in) == 0 {
		return nil, fmt.Errorf("%w: pool %q has no live brokers, so no AZs (live pools: %s)",
			ErrInvalidReplicationFactor, pool, livePools(brokers))
	}
	c, err := newCluster(in, load)
	if err != nil {
		return nil, err
	}
	c.pool = pool
	c.tenant = make([]int, len(c.ids))
	for i, id := range c.ids {
		c.tenant[i] = t.Leaders[id]
	}
	return c, nil
}

// livePools lists the pools of brokers, sorted, for a message.
func livePools(brokers []Broker) string {
	var pools []string
	for _, b := range brokers {
		pools = append(pools, strconv.Quote(PoolOf(b.Pool)))
	}
	slices.Sort(pools)
	pools = slices.Compact(pools)
	if len(pools) == 0 {
		return "none"
	}
	return strings.Join(pools, ", ")
}

// quoteAZs lists AZ names for a message, sorted.
func quoteAZs(azs []string) string {
	out := make([]string, len(azs))
	for i, az := range azs {
		out[i] = strconv.Quote(az)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
