package kafka

// This file owns the authorise stage's table (which rule of
// broker/kafka/authz decides each API key) and its run for one request:
// the Check asks the Authorizer on the tenant's own names (the scope stage
// has made them tenant~name) and logs each refusal.
//
// Invariant: every key of the client dispatch table has a rule (authz.None
// for the ones answered before authentication); TestEveryAPIHasAnAuthzRule
// refuses a table without one.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/kafka/authz"
	"github.com/sluice-mq/sluice/broker/node"
)

// authzRules is the authorise stage's table, by API key. Filled once in
// init, never changed.
var authzRules map[int16]authz.Rule

func init() {
	authzRules = map[int16]authz.Rule{
		0:                   authz.Produce,
		1:                   authz.Fetch,
		2:                   authz.ListOffsets,
		3:                   authz.Metadata,
		8:                   authz.OffsetCommit,
		9:                   authz.OffsetFetch,
		10:                  authz.FindCoordinator,
		11:                  authz.GroupMember,
		12:                  authz.GroupMember,
		13:                  authz.GroupMember,
		14:                  authz.GroupMember,
		15:                  authz.DescribeGroups,
		16:                  authz.ListGroups,
		17:                  authz.None,
		apiVersionsKey:      authz.None,
		19:                  authz.CreateTopics,
		20:                  authz.DeleteTopics,
		21:                  authz.DeleteRecords,
		22:                  authz.InitProducerID,
		23:                  authz.OffsetForLeaderEpoch,
		29:                  authz.ManageACLs(acl.OpDescribe),
		30:                  authz.ManageACLs(acl.OpAlter),
		31:                  authz.ManageACLs(acl.OpAlter),
		32:                  authz.DescribeConfigs,
		33:                  authz.AlterConfigs,
		saslAuthenticateKey: authz.None,
		37:                  authz.CreatePartitions,
		42:                  authz.DeleteGroups,
		44:                  authz.IncrementalAlterConfigs,
		47:                  authz.OffsetDelete,
		48:                  authz.ClientQuotas, // api_client_quotas.go
		49:                  authz.ClientQuotas,
		50:                  authz.ManageUsers,
		51:                  authz.ManageUsers,
	}
}

// authorise runs the rule of req. whole: refused is the answer and the
// handler must not run.
func (b *Server) authorise(id auth.Identity, host string, req *request) (refused kmsg.Response, merge func(kmsg.Response), whole bool) {
	rule, ok := authzRules[req.key]
	if !ok {
		// Unreachable while TestEveryAPIHasAnAuthzRule passes; refuse
		// rather than serve an API nobody decided about.
		return authz.Refuse(req.body, kerr.ClusterAuthorizationFailed.Code), nil, true
	}
	c := &authz.Check{
		ID: b.withRole(id),
		Allow: func(op acl.Operation, rt acl.ResourceType, name string) bool {
			// Names reach this stage scoped (tenant~name); ACLs are
			// written on the tenant's own names.
			local := name
			if rt == acl.ResourceTopic || rt == acl.ResourceGroup || rt == acl.ResourceTransactionalID {
				_, local = node.SplitName(name)
			}
			d := b.authorizer.Authorize(id, host, op, rt, local)
			if !d.Allowed {
				b.Logger.Debug().Str("principal", id.Principal.String()).Str("tenant", id.Principal.Tenant).
					Str("host", host).Stringer("operation", op).Stringer("resource_type", rt).Str("resource", name).
					Str("reason", d.Reason).Msg("refused")
			}
			return d.Allowed
		},
		TopicByID: func(tid [16]byte) string {
			if t := b.LookupTopicID(tid); t != nil {
				return t.Meta.Name
			}
			return ""
		},
		TopicExists:     func(name string) bool { return b.LookupTopic(name) != nil },
		MetadataBrokers: func() []kmsg.MetadataResponseBroker { return b.metadataBrokers(req) },
	}
	res := rule(c, req.body)
	if res.Refused != nil {
		return res.Refused, nil, true
	}
	return nil, res.Merge, false
}
