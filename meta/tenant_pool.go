package meta

// This file owns changing the pool a stored tenant is bound to (the
// "pool" of its record in security.go). The broker pool a partition is
// placed in is read from the tenant at placement time, so a change applies
// to partitions created after it; existing partitions are not moved.
//
// Invariant: SetTenantPool rewrites a tenant record only through a
// transaction conditioned on the revision it read, so a concurrent change
// or deletion of the tenant is never overwritten or undone.
//
// Nothing here keeps state between calls.

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetTenantPool binds a stored tenant to pool ("" or DefaultPool: to
// none) and returns the tenant as stored. ErrNotFound if there is no such
// tenant; the reserved tenants, which exist from start-up, may be bound
// like any other.
func (s *Store) SetTenantPool(ctx context.Context, name, pool string) (Tenant, error) {
	if err := ValidateTenantName(name); err != nil {
		return Tenant{}, fmt.Errorf("meta: set tenant pool: %w", err)
	}
	if pool != "" {
		if err := ValidatePoolName(pool); err != nil {
			return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, err)
		}
	}
	key := s.tenantKey(name)
	for range maxSecurityAttempts {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, err)
		}
		if len(resp.Kvs) == 0 {
			return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, ErrNotFound)
		}
		kv := resp.Kvs[0]
		t, err := s.decodeTenant(key, kv.Value)
		if err != nil {
			return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, err)
		}
		t.Pool = omitDefaultPool(pool)
		val, err := s.encodeTenant(t)
		if err != nil {
			return Tenant{}, err
		}
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, val)).
			Commit()
		if err != nil {
			return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, err)
		}
		if txn.Succeeded {
			return t, nil
		}
	}
	return Tenant{}, fmt.Errorf("meta: set pool of tenant %q: %w", name, ErrConflict)
}

// TenantPool is the pool the partitions of tenant are placed in: the
// pool its record is bound to, DefaultPool for a tenant bound to none or
// without a record (the default tenant of a cluster without security).
func (s *Store) TenantPool(ctx context.Context, tenant string) (string, error) {
	t, err := s.GetTenant(ctx, tenant)
	switch {
	case errors.Is(err, ErrNotFound):
		return DefaultPool, nil
	case err != nil:
		return "", err
	}
	return PoolOrDefault(t.Pool), nil
}
