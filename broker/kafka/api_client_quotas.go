package kafka

// DescribeClientQuotas (key 48) and AlterClientQuotas (49), v0-1, KIP-546:
// the per-tenant quotas of the metadata store (meta.SetQuotas) in Kafka's
// client-quota vocabulary.
//
// Entities. Sluice keeps quotas per tenant, so one entity component names
// one tenant:
//   - type "tenant" (Sluice's own entity type), name T: tenant T;
//   - type "user", name U: the tenant of user U. An alteration of user=alice
//     changes alice's tenant's quotas (every user of the tenant shares
//     them), and Describe answers them under entity tenant=T;
//   - "client-id" and "ip", a default entity (null name) and an entity of
//     several components are refused with INVALID_REQUEST and a message.
//
// Keys are broker/quota's (Kafka's names where Kafka has one), checked with
// quota.Check; an unknown key or a bad value is INVALID_REQUEST naming it.
// validate_only checks everything, the tenant's existence included, and
// writes nothing.
//
// Who may call them: a super user always. Altering quotas also takes an
// operator, a principal of the system tenant that is its tenant admin or
// has ALTER_CONFIGS on the cluster: a tenant may grant its own principals
// ACLs on its cluster, so no ACL of another tenant may raise that tenant's
// own quotas (authz.ClientQuotas, then mayAlterQuotas). Describing takes an
// operator (every tenant), or a tenant admin or a principal with
// DESCRIBE_CONFIGS on its tenant's cluster, who sees only its own tenant;
// a user of another tenant is answered as one with no quotas, so the
// answer never tells that a name is taken elsewhere. A broker that
// enforces no ACLs (security off) lets every caller do both, as it does
// every other operation.
//
// Invariant: an entry with any invalid op alters nothing (one SetQuotas,
// one transaction); each entry has its own result with a message.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka/authz"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// mayAlterQuotas tells whether the caller, past authz.ClientQuotas, may
// alter quotas: a super user, a principal of the system tenant (the rule
// has checked its role or ACL), or anyone on a broker that enforces no
// ACLs (development, as every other operation there).
func (b *Server) mayAlterQuotas(caller auth.Identity) error {
	if caller.IsSuper() || caller.Principal.Tenant == meta.SystemTenant || !b.aclsEnforced() {
		return nil
	}
	return fmt.Errorf("%w: quotas are altered by a super user or an operator of tenant %q (tenant admin, or %s on the cluster), and %s is neither",
		authz.ErrQuotaAuthz, meta.SystemTenant, acl.OpAlterConfigs, caller.Principal)
}

// quotaScope is the one tenant a caller may see ("" = every tenant): a
// super user's, an operator's (system tenant) and every caller's on a
// broker that enforces no ACLs is the cluster.
func (b *Server) quotaScope(caller auth.Identity) string {
	if caller.IsSuper() || caller.Principal.Tenant == meta.SystemTenant || !b.aclsEnforced() {
		return ""
	}
	return caller.Principal.Tenant
}

// entityTenantOf resolves one entity component to its tenant.
func (b *Server) entityTenantOf(ctx context.Context, typ string, name *string) (string, error) {
	if err := authz.CheckEntityType(typ); err != nil {
		return "", err
	}
	if name == nil {
		return "", fmt.Errorf("%w: default %s quotas are not supported: quotas are set per tenant", authz.ErrQuotaRequest, typ)
	}
	if typ == authz.EntityTenant {
		return *name, nil
	}
	u, err := b.Store.GetUser(ctx, *name)
	if err != nil {
		return "", fmt.Errorf("user %q: %w", *name, err)
	}
	return u.Tenant, nil
}

func handleDescribeClientQuotas(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeClientQuotasRequest)
	resp := newResponse(req).(*kmsg.DescribeClientQuotasResponse)
	scope := b.quotaScope(b.callerOf(ctx))
	tenants, err := b.describedTenants(ctx, r, scope)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = authz.QuotaErrorCode(err)
		return done(resp), nil
	}
	for _, q := range tenants {
		if len(q.Limits) == 0 || (scope != "" && q.Tenant != scope) {
			continue
		}
		e := kmsg.DescribeClientQuotasResponseEntry{Entity: authz.TenantEntity(q.Tenant)}
		for _, k := range slices.Sorted(maps.Keys(q.Limits)) {
			e.Values = append(e.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: q.Limits[k]})
		}
		resp.Entries = append(resp.Entries, e)
	}
	return done(resp), nil
}

// describedTenants reads the quota records the request's filter selects:
// none (every tenant), or one component of type tenant or user.
func (b *Server) describedTenants(ctx context.Context, r *kmsg.DescribeClientQuotasRequest, scope string) ([]meta.TenantQuotas, error) {
	if len(r.Components) > 1 {
		return nil, fmt.Errorf("%w: quotas are kept per tenant: filter on one component (%q or %q), not %d",
			authz.ErrQuotaRequest, authz.EntityTenant, authz.EntityUser, len(r.Components))
	}
	if len(r.Components) == 1 {
		c := r.Components[0]
		switch c.MatchType {
		case 0: // EXACT
			tenant, err := b.entityTenantOf(ctx, c.EntityType, c.Match)
			if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName) ||
				(err == nil && scope != "" && tenant != scope) {
				return nil, nil // nothing to show: never say whether it exists elsewhere
			}
			if err != nil {
				return nil, err
			}
			q, err := b.Store.GetQuotas(ctx, tenant)
			if errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalidName) {
				return nil, nil
			}
			return []meta.TenantQuotas{q}, err
		case 1: // DEFAULT
			return nil, authz.CheckEntityType(c.EntityType) // no defaults are kept
		case 2: // ANY
			if err := authz.CheckEntityType(c.EntityType); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: match type %d", authz.ErrQuotaRequest, c.MatchType)
		}
	}
	if scope != "" {
		q, err := b.Store.GetQuotas(ctx, scope)
		if errors.Is(err, meta.ErrNotFound) {
			return nil, nil
		}
		return []meta.TenantQuotas{q}, err
	}
	return b.Store.ListQuotas(ctx)
}

func handleAlterClientQuotas(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.AlterClientQuotasRequest)
	resp := newResponse(req).(*kmsg.AlterClientQuotasResponse)
	caller := b.callerOf(ctx)
	refused := b.mayAlterQuotas(caller)
	for _, e := range r.Entries {
		res := kmsg.AlterClientQuotasResponseEntry{Entity: authz.AlteredEntity(e.Entity)}
		err := refused
		if err == nil {
			err = b.alterQuotas(ctx, caller, e, r.ValidateOnly)
		}
		res.ErrorCode, res.ErrorMessage = authz.QuotaErrorCode(err)
		resp.Entries = append(resp.Entries, res)
	}
	return done(resp), nil
}

// alterQuotas applies one entry's ops to its tenant's record, or with
// validateOnly checks them and the tenant without writing.
func (b *Server) alterQuotas(ctx context.Context, caller auth.Identity, e kmsg.AlterClientQuotasRequestEntry, validateOnly bool) error {
	if len(e.Entity) != 1 {
		return fmt.Errorf("%w: quotas are kept per tenant: name one entity component (%q or %q), not %d",
			authz.ErrQuotaRequest, authz.EntityTenant, authz.EntityUser, len(e.Entity))
	}
	tenant, err := b.entityTenantOf(ctx, e.Entity[0].Type, e.Entity[0].Name)
	if err != nil {
		return err
	}
	set, remove := map[string]float64{}, []string(nil)
	seen := map[string]bool{}
	for _, op := range e.Ops {
		if seen[op.Key] {
			return fmt.Errorf("%w: key %s appears twice", authz.ErrQuotaRequest, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			if _, ok := quota.Lookup(op.Key); !ok {
				return fmt.Errorf("%w: %w", authz.ErrQuotaRequest, quota.Check(op.Key, 1))
			}
			remove = append(remove, op.Key)
			continue
		}
		if err := quota.Check(op.Key, op.Value); err != nil {
			return fmt.Errorf("%w: %w", authz.ErrQuotaRequest, err)
		}
		set[op.Key] = op.Value
	}
	if validateOnly {
		_, err := b.Store.GetQuotas(ctx, tenant)
		return err
	}
	q, err := b.Store.SetQuotas(ctx, tenant, set, remove, quota.Check)
	if err != nil {
		return err
	}
	b.Logger.Info().Str("principal", caller.Principal.String()).Str("tenant", tenant).
		Interface("limits", q.Limits).Msg("quotas altered")
	return nil
}
