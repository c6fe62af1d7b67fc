package largeobj

// quota.go owns the storage quotas of large objects: object_storage_bytes
// (a tenant's stored large-object bytes) and storage_bytes (its logs,
// local and remote, plus its large objects), enforced by Begin and
// Complete, and the figures by tenant that the storage loop of
// broker/node adds to the logs' (StoredByTenant).
//
// What a tenant's large objects count, read afresh from the session
// records in etcd (the same records Sweep walks):
//
//	state      counts                        stops counting when
//	open       its declared size (reserved   it is aborted (by the client or
//	           at Begin)                     at its TTL by Sweep)
//	completed  its size                      it is aborted, or expires
//	                                         unpublished at its TTL
//	published  its size (also once           the ledger released it and
//	           condemned)                    Sweep deleted the object
//	aborted,   nothing                       -
//	expired
//
// Begin refuses a session whose declared size does not fit: what the
// tenant's large objects count (open sessions included) plus the size must
// not exceed object_storage_bytes, nor, with the logs' bytes as last summed
// (node.LogStorageBytes), storage_bytes. Complete checks again without the
// other open sessions' reservations (completed and published objects plus
// this one), so a quota lowered meanwhile holds, and of two sessions that
// passed Begin at once and do not fit together, the second to complete is
// refused.
// A refusal wraps node.ErrStorageQuota (HTTP 507 quota_exceeded); a
// refused Complete leaves the session open, to be completed once room is
// freed or aborted.
//
// Bounds: sessions begun or completed at once on several brokers each see
// the others' records only once written, so a tenant may overshoot by what
// it begins concurrently. Begin and Complete of a tenant without either
// key read nothing; the storage loop reads every session record each time
// it sums (every 2 s on each broker), as Sweep does each interval.
//
// Invariant: a check runs before anything is written (Begin) or before
// the session's state changes (Complete); a refused request changes
// nothing.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// Quotas are what the service needs to enforce the storage quotas; the
// zero value enforces none.
type Quotas struct {
	// Limits answers a tenant's limits (nil: none).
	Limits func(tenant string) quota.Limits
	// LogBytes is the tenant's retained bytes of its logs, local and
	// remote, cluster-wide (node.LogStorageBytes; nil: 0).
	LogBytes func(tenant string) int64
	// Rejected counts a refusal (node's tenant metrics; nil: uncounted).
	Rejected func(tenant, reason string)
}

// charged is what session u counts towards its tenant's stored bytes;
// withOpen says whether open sessions' reservations count.
func charged(u meta.Upload, withOpen bool) int64 {
	switch u.State {
	case meta.UploadCompleted, meta.UploadPublished:
		return u.Size
	case meta.UploadOpen:
		if withOpen {
			return u.Size
		}
	}
	return 0
}

// StoredByTenant is every tenant's stored large-object bytes, open
// sessions' reservations included: the figure storage_bytes adds to the
// logs' (node.SetLargeObjectBytes).
func (s *Service) StoredByTenant(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64)
	err := s.cfg.Sessions.ListUploads(ctx, func(u meta.Upload) error {
		if n := charged(u, true); n > 0 {
			out[u.Tenant] += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("largeobj: count stored bytes: %w", err)
	}
	return out, nil
}

// storedBytes is tenant's stored large-object bytes, leaving out session
// skip.
func (s *Service) storedBytes(ctx context.Context, tenant, skip string, withOpen bool) (int64, error) {
	var n int64
	err := s.cfg.Sessions.ListUploads(ctx, func(u meta.Upload) error {
		if u.Tenant == tenant && u.ID != skip {
			n += charged(u, withOpen)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("largeobj: count the stored bytes of tenant %q: %w", tenant, err)
	}
	return n, nil
}

// checkQuota refuses size more bytes of tenant's large objects beyond its
// quotas (see the head of this file); skip is the session being completed,
// withOpen whether other open sessions' reservations count.
func (s *Service) checkQuota(ctx context.Context, tenant, skip string, size int64, withOpen bool) error {
	q := s.cfg.Quotas
	if q.Limits == nil {
		return nil
	}
	lim := q.Limits(tenant)
	objMax, objLimited := lim.Get(quota.ObjectStorageBytes)
	allMax, allLimited := lim.Get(quota.StorageBytes)
	if !objLimited && !allLimited {
		return nil
	}
	stored, err := s.storedBytes(ctx, tenant, skip, withOpen)
	if err != nil {
		return err
	}
	var logs int64
	if q.LogBytes != nil {
		logs = q.LogBytes(tenant)
	}
	key, max, used := "", 0.0, int64(0)
	switch {
	case objLimited && float64(stored+size) > objMax:
		key, max, used = quota.ObjectStorageBytes, objMax, stored
	case allLimited && float64(logs+stored+size) > allMax:
		key, max, used = quota.StorageBytes, allMax, logs+stored
	default:
		return nil
	}
	if q.Rejected != nil {
		q.Rejected(tenant, key)
	}
	return fmt.Errorf("%w: tenant %q: quota %s is %d bytes; it stores %d, and this object of %d bytes does not fit; retry once objects are deleted or the quota is raised",
		node.ErrStorageQuota, tenant, key, int64(max), used, size)
}
