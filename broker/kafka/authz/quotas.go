package authz

// This file owns the pure parts of the client-quota APIs
// (DescribeClientQuotas, AlterClientQuotas; their handlers are package
// kafka's): the authorise rule of both, the entity types quotas are kept
// by, and the mapping of their errors to Kafka codes.
//
// Invariant: quotas are kept per tenant, so only the entity types "tenant"
// and "user" are accepted; every other type is INVALID_REQUEST with a
// message naming the two.
// Invariant: a refused AlterClientQuotas answers every entry, each with
// its own entity echoed, as Kafka does.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/meta"
)

// Entity types of the client-quota APIs.
const (
	EntityTenant   = "tenant"
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"
)

// ErrQuotaRequest marks a request this broker cannot apply
// (INVALID_REQUEST).
var ErrQuotaRequest = errors.New("invalid quota request")

// QuotaErrorCode is the Kafka code of an error of these APIs.
func QuotaErrorCode(err error) (int16, *string) {
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, ErrQuotaRequest), errors.Is(err, meta.ErrInvalidQuota), errors.Is(err, meta.ErrInvalidName):
		return kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
	case errors.Is(err, ErrQuotaAuthz):
		return kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr(err.Error())
	}
	return AdminError(err)
}

// ClientQuotas is the rule of both APIs: a super user or tenant admin, or
// a principal allowed DESCRIBE_CONFIGS (Describe) or ALTER_CONFIGS (Alter)
// on its tenant's cluster. Package kafka's handlers narrow it
// (mayAlterQuotas, quotaScope).
func ClientQuotas(c *Check, body kmsg.Request) Result {
	id := c.ID
	op, what := acl.OpDescribeConfigs, "describe"
	if _, alter := body.(*kmsg.AlterClientQuotasRequest); alter {
		op, what = acl.OpAlterConfigs, "alter"
	}
	if id.IsTenantAdmin() || c.Allow(op, acl.ResourceCluster, acl.ClusterName) {
		return Result{}
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
				ErrorMessage: kmsg.StringPtr(msg), Entity: AlteredEntity(e.Entity)})
		}
	}
	return Result{Refused: resp}
}

// ErrQuotaAuthz refuses an alteration by a caller the rule let through
// but who is no operator (CLUSTER_AUTHORIZATION_FAILED).
var ErrQuotaAuthz = errors.New("not authorized")

// CheckEntityType refuses the entity types quotas are not kept by.
func CheckEntityType(typ string) error {
	switch typ {
	case EntityTenant, EntityUser:
		return nil
	case EntityClientID, EntityIP:
		return fmt.Errorf("%w: quotas are kept per tenant; entity type %q is not supported (use %q or %q)",
			ErrQuotaRequest, typ, EntityTenant, EntityUser)
	}
	return fmt.Errorf("%w: unknown entity type %q (use %q or %q)", ErrQuotaRequest, typ, EntityTenant, EntityUser)
}

// TenantEntity is the entity of a described tenant.
func TenantEntity(tenant string) []kmsg.DescribeClientQuotasResponseEntryEntity {
	return []kmsg.DescribeClientQuotasResponseEntryEntity{{Type: EntityTenant, Name: kmsg.StringPtr(tenant)}}
}

// AlteredEntity echoes an alteration's entity in its result.
func AlteredEntity(es []kmsg.AlterClientQuotasRequestEntryEntity) []kmsg.AlterClientQuotasResponseEntryEntity {
	out := make([]kmsg.AlterClientQuotasResponseEntryEntity, len(es))
	for i, e := range es {
		out[i] = kmsg.AlterClientQuotasResponseEntryEntity{Type: e.Type, Name: e.Name}
	}
	return out
}
