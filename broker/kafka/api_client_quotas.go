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
// own quotas (authzClientQuotas, then mayAlterQuotas). Describing takes an
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

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka/authz"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// Entity types of the client-quota APIs.
const (
	entityTenant   = "tenant"
	entityUser     = "user"
	entityClientID = "client-id"
	entityIP       = "ip"
)

// errQuotaRequest marks a request this broker cannot apply
// (INVALID_REQUEST).
var errQuotaRequest = errors.New("invalid quota request")

// quotaErrorCode is the Kafka code of an error of these APIs.
func quotaErrorCode(err error) (int16, *string) {
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, errQuotaRequest), errors.Is(err, meta.ErrInvalidQuota), errors.Is(err, meta.ErrInvalidName):
		return kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
	case errors.Is(err, errQuotaAuthz):
		return kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(err.Error())
	}
	return authz.AdminError(err)
}

// authzClientQuotas is the rule of both APIs: a super user or tenant
// admin, or a principal allowed DESCRIBE_CONFIGS (Describe) or
// ALTER_CONFIGS (Alter) on its tenant's cluster. The handlers narrow it:
// mayAlterQuotas, quotaScope.
func authzClientQuotas(c *authz.Check, body kmsg.Request) authz.Result {
	id := c.ID
	op, what := acl.OpDescribeConfigs, "describe"
	if _, alter := body.(*kmsg.AlterClientQuotasRequest); alter {
		op, what = acl.OpAlterConfigs, "alter"
	}
	if id.IsTenantAdmin() || c.Allow(op, acl.ResourceCluster, acl.ClusterName) {
		return authz.Result{}
	}
	msg := fmt.Sprintf("not authorized: to %s quotas, %s needs %s on the cluster", what, id.Principal, op)
	resp := body.ResponseKind()
	resp.SetVersion(body.GetVersion())
	code := kerr.ClusterAuthorizationFailed.Code
	switch r := resp.(type) {
	case *kmsg.DescribeClientQuotasResponse:
		r.ErrorCode, r.ErrorMessage = code, kmsg.StringPtr(msg)
	case *kmsg.AlterClientQuotasResponse:
		for _, e := range body.(*kmsg.AlterClientQuotasRequest).Entries {
			r.Entries = append(r.Entries, kmsg.AlterClientQuotasResponseEntry{ErrorCode: code,
				ErrorMessage: kmsg.StringPtr(msg), Entity: alteredEntity(e.Entity)})
		}
	}
	return authz.Result{Refused: resp}
}

// errQuotaAuthz refuses an alteration by a caller the rule let through
// but who is no operator (CLUSTER_AUTHORIZATION_FAILED).
var errQuotaAuthz = errors.New("not authorized")

// mayAlterQuotas tells whether the caller, past authzClientQuotas, may
// alter quotas: a super user, a principal of the system tenant (the rule
// has checked its role or ACL), or anyone on a broker that enforces no
// ACLs (development, as every other operation there).
func (b *Server) mayAlterQuotas(caller auth.Identity) error {
	if caller.IsSuper() || caller.Principal.Tenant == meta.SystemTenant || !b.aclsEnforced() {
		return nil
	}
	return fmt.Errorf("%w: quotas are altered by a super user or an operator of tenant %q (tenant admin, or %s on the cluster), and %s is neither",
		errQuotaAuthz, meta.SystemTenant, acl.OpAlterConfigs, caller.Principal)
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

// checkEntityType refuses the entity types quotas are not kept by.
func checkEntityType(typ string) error {
	switch typ {
	case entityTenant, entityUser:
		return nil
	case entityClientID, entityIP:
		return fmt.Errorf("%w: quotas are kept per tenant; entity type %q is not supported (use %q or %q)",
			errQuotaRequest, typ, entityTenant, entityUser)
	}
	return fmt.Errorf("%w: unknown entity type %q (use %q or %q)", errQuotaRequest, typ, entityTenant, entityUser)
}

// entityTenantOf resolves one entity component to its tenant.
func (b *Server) entityTenantOf(ctx context.Context, typ string, name *string) (string, error) {
	if err := checkEntityType(typ); err != nil {
		return "", err
	}
	if name == nil {
		return "", fmt.Errorf("%w: default %s quotas are not supported: quotas are set per tenant", errQuotaRequest, typ)
	}
	if typ == entityTenant {
		return *name, nil
	}
	u, err := b.Store.GetUser(ctx, *name)
	if err != nil {
		return "", fmt.Errorf("user %q: %w", *name, err)
	}
	return u.Tenant, nil
}

func tenantEntity(tenant string) []kmsg.DescribeClientQuotasResponseEntryEntity {
	return []kmsg.DescribeClientQuotasResponseEntryEntity{{Type: entityTenant, Name: kmsg.StringPtr(tenant)}}
}

func alteredEntity(es []kmsg.AlterClientQuotasRequestEntryEntity) []kmsg.AlterClientQuotasResponseEntryEntity {
	out := make([]kmsg.AlterClientQuotasResponseEntryEntity, len(es))
	for i, e := range es {
		out[i] = kmsg.AlterClientQuotasResponseEntryEntity{Type: e.Type, Name: e.Name}
	}
	return out
}

func handleDescribeClientQuotas(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DescribeClientQuotasRequest)
	resp := newResponse(req).(*kmsg.DescribeClientQuotasResponse)
	scope := b.quotaScope(b.callerOf(ctx))
	tenants, err := b.describedTenants(ctx, r, scope)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = quotaErrorCode(err)
		return done(resp), nil
	}
	for _, q := range tenants {
		if len(q.Limits) == 0 || (scope != "" && q.Tenant != scope) {
			continue
		}
		e := kmsg.DescribeClientQuotasResponseEntry{Entity: tenantEntity(q.Tenant)}
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
			errQuotaRequest, entityTenant, entityUser, len(r.Components))
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
			return nil, checkEntityType(c.EntityType) // no defaults are kept
		case 2: // ANY
			if err := checkEntityType(c.EntityType); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: match type %d", errQuotaRequest, c.MatchType)
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
		res := kmsg.AlterClientQuotasResponseEntry{Entity: alteredEntity(e.Entity)}
		err := refused
		if err == nil {
			err = b.alterQuotas(ctx, caller, e, r.ValidateOnly)
		}
		res.ErrorCode, res.ErrorMessage = quotaErrorCode(err)
		resp.Entries = append(resp.Entries, res)
	}
	return done(resp), nil
}

// alterQuotas applies one entry's ops to its tenant's record, or with
// validateOnly checks them and the tenant without writing.
func (b *Server) alterQuotas(ctx context.Context, caller auth.Identity, e kmsg.AlterClientQuotasRequestEntry, validateOnly bool) error {
	if len(e.Entity) != 1 {
		return fmt.Errorf("%w: quotas are kept per tenant: name one entity component (%q or %q), not %d",
			errQuotaRequest, entityTenant, entityUser, len(e.Entity))
	}
	tenant, err := b.entityTenantOf(ctx, e.Entity[0].Type, e.Entity[0].Name)
	if err != nil {
		return err
	}
	set, remove := map[string]float64{}, []string(nil)
	seen := map[string]bool{}
	for _, op := range e.Ops {
		if seen[op.Key] {
			return fmt.Errorf("%w: key %s appears twice", errQuotaRequest, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			if _, ok := quota.Lookup(op.Key); !ok {
				return fmt.Errorf("%w: %w", errQuotaRequest, quota.Check(op.Key, 1))
			}
			remove = append(remove, op.Key)
			continue
		}
		if err := quota.Check(op.Key, op.Value); err != nil {
			return fmt.Errorf("%w: %w", errQuotaRequest, err)
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
