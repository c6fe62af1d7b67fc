package meta

// This file owns the records of per-tenant quotas and scheduling
// attributes: their JSON encoding, their validation and their
// transactions. The watch cache of them is quota_watch.go.
//
//	<prefix>quotas/<tenant>    {"v":1,"tenant","limits":{"<key>":<value>,...},
//	                            "weight","priority_class"}
//
// limits are by quota key (the broker's quota package names and checks
// them; this package imports nothing of the broker's, so it checks only
// the shape: a key of [a-z0-9_], a finite value >= 0, and whatever the
// caller's QuotaCheck adds). weight is the tenant's share in fair
// scheduling (finite, > 0, default 1); priority_class is "standard"
// (default) or "low". A tenant without a record has no limits, weight 1
// and class standard, and a write that leaves exactly that deletes the
// record, so only tenants with something set have a key.
//
// Invariant: a quota record exists only while its tenant does: every write
// is a transaction conditioned on the tenant key's create revision as read,
// and DeleteTenant deletes the record in its own transaction.
// Invariant: every read-modify-write is conditioned on the mod revision of
// the record it read (0 if absent), retried at most maxSecurityAttempts
// times (ErrConflict after), so concurrent writers never lose each other's
// keys.
// Invariant: a record decodes only under the key of the tenant it names.
//
// Nothing here keeps state between calls.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// quotaRecordVersion is the "v" field this build writes and reads under
// <prefix>quotas/.
const quotaRecordVersion = 1

// Priority classes of a tenant: the disk-watermark ladder lowers the
// bursts of low tenants first.
const (
	PriorityStandard = "standard"
	PriorityLow      = "low"
)

// Scheduling bounds.
const (
	DefaultWeight = 1.0
	// MaxWeight bounds a weight so that shares stay meaningful in float64
	// arithmetic next to the default of 1.
	MaxWeight = 1e6
	// maxQuotaKeyLen bounds a key's name; the longest known is 24.
	maxQuotaKeyLen = 64
	// maxQuotaKeys bounds the keys of one record (fewer than 20 are known).
	maxQuotaKeys = 64
)

// ErrInvalidQuota: a quota key or value, weight or priority class this
// package (or the caller's QuotaCheck) does not accept.
var ErrInvalidQuota = errors.New("meta: invalid quota")

// QuotaCheck validates one quota key and value; the broker passes
// quota.Check. It is a parameter because this package may not import the
// broker's.
type QuotaCheck func(key string, v float64) error

// TenantQuotas is one tenant's quotas and scheduling attributes.
type TenantQuotas struct {
	Tenant        string
	Limits        map[string]float64 // by key; an absent key is unlimited; never nil when read
	Weight        float64            // > 0
	PriorityClass string             // PriorityStandard or PriorityLow
}

// DefaultQuotas is what a tenant without a record has.
func DefaultQuotas(tenant string) TenantQuotas {
	return TenantQuotas{Tenant: tenant, Limits: map[string]float64{}, Weight: DefaultWeight, PriorityClass: PriorityStandard}
}

// IsDefault reports whether q holds nothing but the defaults.
func (q TenantQuotas) IsDefault() bool {
	return len(q.Limits) == 0 && q.Weight == DefaultWeight && q.PriorityClass == PriorityStandard
}

type quotaRecord struct {
	V             int                `json:"v"`
	Tenant        string             `json:"tenant"`
	Limits        map[string]float64 `json:"limits,omitempty"`
	Weight        float64            `json:"weight"`
	PriorityClass string             `json:"priority_class"`
}

func (s *Store) quotasPrefix() string          { return s.prefix + "quotas/" }
func (s *Store) quotaKey(tenant string) string { return s.quotasPrefix() + tenant }

// ValidateQuotaKey accepts 1 to 64 characters of [a-z0-9_]: the shape of
// every quota key, known to this build or not.
func ValidateQuotaKey(key string) error {
	if key == "" || len(key) > maxQuotaKeyLen {
		return fmt.Errorf("%w: key %q: 1 to %d characters of [a-z0-9_]", ErrInvalidQuota, key, maxQuotaKeyLen)
	}
	for _, c := range []byte(key) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("%w: key %q contains %q", ErrInvalidQuota, key, c)
		}
	}
	return nil
}

// ValidateScheduling checks a weight and a priority class.
func ValidateScheduling(weight float64, class string) error {
	if math.IsNaN(weight) || math.IsInf(weight, 0) || weight <= 0 || weight > MaxWeight {
		return fmt.Errorf("%w: weight %v: a number > 0 and <= %g", ErrInvalidQuota, weight, float64(MaxWeight))
	}
	if class != PriorityStandard && class != PriorityLow {
		return fmt.Errorf("%w: priority class %q (want %q or %q)", ErrInvalidQuota, class, PriorityStandard, PriorityLow)
	}
	return nil
}

// validateQuotas checks the shape of q (and each limit with check, if set).
func validateQuotas(q TenantQuotas, check QuotaCheck) error {
	if err := ValidateTenantName(q.Tenant); err != nil {
		return err
	}
	if len(q.Limits) > maxQuotaKeys {
		return fmt.Errorf("%w: %d keys, at most %d", ErrInvalidQuota, len(q.Limits), maxQuotaKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(q.Limits)) {
		v := q.Limits[k]
		if err := ValidateQuotaKey(k); err != nil {
			return err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: %s = %v: a finite number >= 0", ErrInvalidQuota, k, v)
		}
		if check != nil {
			if err := check(k, v); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidQuota, err)
			}
		}
	}
	return ValidateScheduling(q.Weight, q.PriorityClass)
}

func (s *Store) encodeQuotas(q TenantQuotas) (string, error) {
	r := quotaRecord{V: quotaRecordVersion, Tenant: q.Tenant, Weight: q.Weight, PriorityClass: q.PriorityClass}
	if len(q.Limits) > 0 {
		r.Limits = q.Limits
	}
	return encodeRecord("quotas of tenant "+q.Tenant, r)
}

// decodeQuotas decodes the record stored under key. Keys this build does
// not know are kept (a newer build may have written them); their
// enforcement is the newer build's.
func (s *Store) decodeQuotas(key string, val []byte) (TenantQuotas, error) {
	var r quotaRecord
	if err := json.Unmarshal(val, &r); err != nil {
		return TenantQuotas{}, fmt.Errorf("meta: decode %s: %w: %w", key, ErrCorrupt, err)
	}
	switch {
	case r.V > quotaRecordVersion:
		return TenantQuotas{}, fmt.Errorf("meta: decode %s: version %d, this build knows %d: %w", key, r.V, quotaRecordVersion, ErrUnknownVersion)
	case r.V != quotaRecordVersion:
		return TenantQuotas{}, fmt.Errorf("meta: decode %s: version %d: %w", key, r.V, ErrCorrupt)
	}
	q := TenantQuotas{Tenant: r.Tenant, Limits: r.Limits, Weight: r.Weight, PriorityClass: r.PriorityClass}
	if q.Limits == nil {
		q.Limits = map[string]float64{}
	}
	if err := validateQuotas(q, nil); err != nil {
		return TenantQuotas{}, fmt.Errorf("meta: decode %s: %w: %w", key, ErrCorrupt, err)
	}
	if s.quotaKey(q.Tenant) != key {
		return TenantQuotas{}, fmt.Errorf("meta: decode %s: quotas of tenant %q: %w", key, q.Tenant, ErrCorrupt)
	}
	return q, nil
}

// GetQuotas reads a tenant's quotas (DefaultQuotas when it has no record);
// ErrNotFound if there is no such tenant.
func (s *Store) GetQuotas(ctx context.Context, tenant string) (TenantQuotas, error) {
	q, _, _, err := s.readQuotas(ctx, tenant)
	if err != nil {
		return TenantQuotas{}, fmt.Errorf("meta: get quotas: %w", err)
	}
	return q, nil
}

// readQuotas reads the tenant and its record at one revision: the record
// (or the defaults), the record's mod revision (0: none) and the tenant
// key's create revision.
func (s *Store) readQuotas(ctx context.Context, tenant string) (q TenantQuotas, modRev, tenantRev int64, err error) {
	if err := ValidateTenantName(tenant); err != nil {
		return TenantQuotas{}, 0, 0, err
	}
	key := s.quotaKey(tenant)
	resp, err := s.client.Txn(ctx).Then(clientv3.OpGet(s.tenantKey(tenant)), clientv3.OpGet(key)).Commit()
	if err != nil {
		return TenantQuotas{}, 0, 0, fmt.Errorf("tenant %q: %w", tenant, err)
	}
	tkvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(tkvs) == 0 {
		return TenantQuotas{}, 0, 0, fmt.Errorf("tenant %q: %w", tenant, ErrNotFound)
	}
	qkvs := resp.Responses[1].GetResponseRange().GetKvs()
	if len(qkvs) == 0 {
		return DefaultQuotas(tenant), 0, tkvs[0].CreateRevision, nil
	}
	q, err = s.decodeQuotas(key, qkvs[0].Value)
	return q, qkvs[0].ModRevision, tkvs[0].CreateRevision, err
}

// updateQuotas applies change to the tenant's record and writes it back
// (or deletes it, when only defaults are left) if neither the record nor
// the tenant changed meanwhile, retrying otherwise. It returns what it
// stored.
func (s *Store) updateQuotas(ctx context.Context, tenant, what string, check QuotaCheck, change func(*TenantQuotas) error) (TenantQuotas, error) {
	for range maxSecurityAttempts {
		q, modRev, tenantRev, err := s.readQuotas(ctx, tenant)
		if err != nil {
			return TenantQuotas{}, fmt.Errorf("meta: %s: %w", what, err)
		}
		q.Limits = maps.Clone(q.Limits)
		if err := change(&q); err != nil {
			return TenantQuotas{}, fmt.Errorf("meta: %s of tenant %q: %w", what, tenant, err)
		}
		if err := validateQuotas(q, check); err != nil {
			return TenantQuotas{}, fmt.Errorf("meta: %s of tenant %q: %w", what, tenant, err)
		}
		key := s.quotaKey(tenant)
		op := clientv3.OpDelete(key)
		if !q.IsDefault() {
			val, err := s.encodeQuotas(q)
			if err != nil {
				return TenantQuotas{}, err
			}
			op = clientv3.OpPut(key, val)
		}
		tx, err := s.client.Txn(ctx).
			If(
				clientv3.Compare(clientv3.CreateRevision(s.tenantKey(tenant)), "=", tenantRev),
				clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
			).
			Then(op).
			Commit()
		if err != nil {
			return TenantQuotas{}, fmt.Errorf("meta: %s of tenant %q: %w", what, tenant, err)
		}
		if tx.Succeeded {
			return q, nil
		}
	}
	return TenantQuotas{}, fmt.Errorf("meta: %s of tenant %q: changed %d times meanwhile: %w", what, tenant, maxSecurityAttempts, ErrConflict)
}

// SetQuotas sets the keys of set and removes those of remove (absent ones
// are no error) in the tenant's record, in one read-modify-write, and
// returns the record as stored. Every value is checked for its shape and
// with check (quota.Check at the broker; nil checks the shape only). A key
// both set and removed is ErrInvalidQuota; ErrNotFound if the tenant does
// not exist.
func (s *Store) SetQuotas(ctx context.Context, tenant string, set map[string]float64, remove []string, check QuotaCheck) (TenantQuotas, error) {
	for _, k := range remove {
		if _, ok := set[k]; ok {
			return TenantQuotas{}, fmt.Errorf("meta: set quotas of tenant %q: %w: key %s is both set and removed", tenant, ErrInvalidQuota, k)
		}
		if err := ValidateQuotaKey(k); err != nil {
			return TenantQuotas{}, fmt.Errorf("meta: set quotas of tenant %q: %w", tenant, err)
		}
	}
	return s.updateQuotas(ctx, tenant, "set quotas", check, func(q *TenantQuotas) error {
		for _, k := range remove {
			delete(q.Limits, k)
		}
		maps.Copy(q.Limits, set)
		return nil
	})
}

// SetTenantScheduling sets the tenant's weight and priority class; a
// weight of 0 or a class of "" leaves that attribute as it is. It returns
// the record as stored.
func (s *Store) SetTenantScheduling(ctx context.Context, tenant string, weight float64, class string) (TenantQuotas, error) {
	return s.updateQuotas(ctx, tenant, "set scheduling", nil, func(q *TenantQuotas) error {
		if weight != 0 {
			q.Weight = weight
		}
		if class != "" {
			q.PriorityClass = class
		}
		return nil
	})
}

// ListQuotas lists every stored quota record, sorted by tenant; tenants
// without one (DefaultQuotas) are not listed. A record that does not decode
// fails the call.
func (s *Store) ListQuotas(ctx context.Context) ([]TenantQuotas, error) {
	resp, err := s.client.Get(ctx, s.quotasPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("meta: list quotas: %w", err)
	}
	out := make([]TenantQuotas, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		q, err := s.decodeQuotas(string(kv.Key), kv.Value)
		if err != nil {
			return nil, fmt.Errorf("meta: list quotas: %w", err)
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b TenantQuotas) int { return strings.Compare(a.Tenant, b.Tenant) })
	return out, nil
}
