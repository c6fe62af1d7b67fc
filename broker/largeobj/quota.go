package largeobj

// quota.go owns the storage quotas of large objects: object_storage_bytes
// (a tenant's stored large-object bytes) and storage_bytes (its logs,
// local and remote, plus its large objects), enforced by Begin and
// Complete, and the figures by tenant that the storage loop of
// broker/node adds to the logs' (StoredByTenant).
//
// What a tenant's large objects count, by the state of each session
// record in etcd (the same records Sweep walks):
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
// The sums are not computed from the records at each check: every write
// of a record moves its tenant's counter in etcd in the same transaction
// (meta/upload_bytes.go: "open" for open sessions, "stored" for completed
// and published ones), so Begin and Complete read one key and the storage
// loop one key per tenant, however many records months of retention keep.
// A cluster whose records predate the counters has them recounted from
// the records: by Run when the broker starts, and by every Sweep (which
// lists the records anyway), which also repairs what brokers of an
// earlier version changed during a rolling upgrade. Until the first
// recount is complete the checks and the storage loop sum the records
// themselves, as before the counters.
//
// Begin refuses a session whose declared size does not fit: what the
// tenant's large objects count (open sessions included: open + stored)
// plus the size must not exceed object_storage_bytes, nor, with the logs'
// bytes as last summed (node.LogStorageBytes), storage_bytes. Complete
// checks again without the open sessions' reservations (stored, that is
// completed and published objects, plus this one), so a quota lowered
// meanwhile holds, and of two sessions that passed Begin at once and do
// not fit together, the second to complete is refused.
// A refusal wraps node.ErrStorageQuota (HTTP 507 quota_exceeded); a
// refused Complete leaves the session open, to be completed once room is
// freed or aborted.
//
// Bounds: sessions begun or completed at once on several brokers each see
// the others' counts only once written, so a tenant may overshoot by what
// it begins concurrently. Begin and Complete of a tenant without either
// key read nothing; with one, they read its counter (one etcd request);
// the storage loop reads every tenant's counter (one request) each time it
// sums (every 2 s on each broker).
//
// Invariant: a check runs before anything is written (Begin) or before
// the session's state changes (Complete); a refused request changes
// nothing.

import (
	"context"
	"errors"
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
	open, stored := meta.UploadCharge(u)
	if withOpen {
		return open + stored
	}
	return stored
}

// countedBytes is what a counter counts (never below zero: a counter a
// broker of an earlier version left short until the next recount).
func countedBytes(c meta.UploadBytes, withOpen bool) int64 {
	n := max(c.Stored, 0)
	if withOpen {
		n += max(c.Open, 0)
	}
	return n
}

// StoredByTenant is every tenant's stored large-object bytes, open
// sessions' reservations included: the figure storage_bytes adds to the
// logs' (node.SetLargeObjectBytes). It reads the counters, or sums the
// records before the first recount.
func (s *Service) StoredByTenant(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64)
	counters, err := s.cfg.Sessions.ListUploadBytes(ctx)
	if err == nil {
		for t, c := range counters {
			if n := countedBytes(c, true); n > 0 {
				out[t] = n
			}
		}
		return out, nil
	}
	if !errors.Is(err, meta.ErrUncounted) {
		return nil, fmt.Errorf("largeobj: count stored bytes: %w", err)
	}
	err = s.cfg.Sessions.ListUploads(ctx, func(u meta.Upload) error {
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

// storedBytes is tenant's stored large-object bytes, with or without the
// open sessions' reservations. Before the first recount it sums the
// records, leaving out session skip (the open session being completed,
// which counts nothing without withOpen).
func (s *Service) storedBytes(ctx context.Context, tenant, skip string, withOpen bool) (int64, error) {
	c, err := s.cfg.Sessions.UploadBytesOf(ctx, tenant)
	if err == nil {
		return countedBytes(c, withOpen), nil
	}
	if !errors.Is(err, meta.ErrUncounted) {
		return 0, fmt.Errorf("largeobj: count the stored bytes of tenant %q: %w", tenant, err)
	}
	var n int64
	err = s.cfg.Sessions.ListUploads(ctx, func(u meta.Upload) error {
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

// recount has the counters recounted from the records (all of them, at one
// revision) and answers how many it corrected; uploads and rev are a
// complete listing when the caller has one (Sweep), else nil and 0.
func (s *Service) recount(ctx context.Context, rev int64, uploads []meta.Upload) (int, error) {
	if rev == 0 {
		var err error
		rev, err = s.cfg.Sessions.ListUploadsAt(ctx, func(u meta.Upload) error { uploads = append(uploads, u); return nil })
		if err != nil {
			return 0, fmt.Errorf("largeobj: recount stored bytes: %w", err)
		}
	}
	n, err := s.cfg.Sessions.ReconcileUploadBytes(ctx, rev, uploads)
	if err != nil {
		return n, fmt.Errorf("largeobj: recount stored bytes: %w", err)
	}
	if n > 0 {
		s.log.Info().Int("tenants", n).Int64("revision", rev).Msg("stored-bytes counters corrected from the upload records")
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
