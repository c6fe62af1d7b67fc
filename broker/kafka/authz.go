package kafka

// This file owns the authorise stage of the pipeline (pipeline.go): the
// table of which resources each API touches with which operation, and the
// mechanics of taking refused items out of a request and putting them back
// into its response with their *_AUTHORIZATION_FAILED codes.
//
// Design: a rule per API key (authzRules) reads the request, asks the
// Authorizer about every resource it names, and either refuses the request
// whole (a response the handler never sees: JoinGroup of a refused group)
// or removes the refused items (topics, groups, config resources) from the
// request and returns a merge that adds them, refused, to the handler's
// response. Handlers therefore never call the Authorizer; what they see is
// what the identity may touch. Listings that have no items in the request
// (Metadata of all topics, ListGroups, OffsetFetch of all topics) are
// filtered by the merge instead.
//
// Invariant: every key of the client dispatch table has a rule (noAuthz
// for the ones answered before authentication).
// Invariant: a rule asks about a topic by the name the client uses; a
// topic named by id is looked up first, and an id that names no topic is
// left to the handler (UNKNOWN_TOPIC_ID), so an id never tells more than a
// name would.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
)

// authzCheck asks the Authorizer for one request, remembering answers (a
// request may name a topic in many places).
type authzCheck struct {
	b     *Server
	id    auth.Identity
	host  string
	cache map[authzKey]bool
}

type authzKey struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string
}

func (c *authzCheck) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	k := authzKey{op, rt, name}
	if v, ok := c.cache[k]; ok {
		return v
	}
	// Names reach this stage scoped (tenant~name, scope.go); ACLs are
	// written on the tenant's own names.
	local := name
	if rt == acl.ResourceTopic || rt == acl.ResourceGroup || rt == acl.ResourceTransactionalID {
		_, local = node.SplitName(name)
	}
	d := c.b.authorizer.Authorize(c.id, c.host, op, rt, local)
	if !d.Allowed {
		c.b.Logger.Debug().Str("principal", c.id.Principal.String()).Str("tenant", c.id.Principal.Tenant).
			Str("host", c.host).Stringer("operation", op).Stringer("resource_type", rt).Str("resource", name).
			Str("reason", d.Reason).Msg("refused")
	}
	c.cache[k] = d.Allowed
	return d.Allowed
}

func (c *authzCheck) topic(op acl.Operation, name string) bool {
	return c.allowed(op, acl.ResourceTopic, name)
}

func (c *authzCheck) group(op acl.Operation, name string) bool {
	return c.allowed(op, acl.ResourceGroup, name)
}

func (c *authzCheck) cluster(op acl.Operation) bool {
	return c.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

// topicName is the name of a topic the request names by id, "" when the id
// names none.
func (c *authzCheck) topicName(id [16]byte) string {
	if t := c.b.LookupTopicID(id); t != nil {
		return t.Meta.Name
	}
	return ""
}

// authzResult is a rule's answer: refused (non-nil) answers the request
// without its handler; otherwise merge (may be nil) completes the
// handler's response.
type authzResult struct {
	refused kmsg.Response
	merge   func(kmsg.Response)
}

type authzRule func(c *authzCheck, req *request) authzResult

// noAuthz is the rule of the APIs every connection may use.
func noAuthz(*authzCheck, *request) authzResult { return authzResult{} }

// authzRules is the authorise stage's table, by API key. Filled once in
// init, never changed.
var authzRules map[int16]authzRule

func init() {
	authzRules = map[int16]authzRule{
		0:                   authzProduce,
		1:                   authzFetch,
		2:                   authzListOffsets,
		3:                   authzMetadata,
		8:                   authzOffsetCommit,
		9:                   authzOffsetFetch,
		10:                  authzFindCoordinator,
		11:                  authzGroupMember,
		12:                  authzGroupMember,
		13:                  authzGroupMember,
		14:                  authzGroupMember,
		15:                  authzDescribeGroups,
		16:                  authzListGroups,
		17:                  noAuthz,
		apiVersionsKey:      noAuthz,
		19:                  authzCreateTopics,
		20:                  authzDeleteTopics,
		21:                  authzDeleteRecords,
		22:                  authzInitProducerID,
		23:                  authzOffsetForLeaderEpoch,
		29:                  authzManageACLs(acl.OpDescribe),
		30:                  authzManageACLs(acl.OpAlter),
		31:                  authzManageACLs(acl.OpAlter),
		32:                  authzDescribeConfigs,
		33:                  authzAlterConfigs,
		saslAuthenticateKey: noAuthz,
		37:                  authzCreatePartitions,
		42:                  authzDeleteGroups,
		44:                  authzIncrementalAlterConfigs,
		47:                  authzOffsetDelete,
		50:                  authzManageUsers,
		51:                  authzManageUsers,
	}
}

// authorise runs the rule of req. whole: refused is the answer and the
// handler must not run.
func (b *Server) authorise(id auth.Identity, host string, req *request) (refused kmsg.Response, merge func(kmsg.Response), whole bool) {
	rule, ok := authzRules[req.key]
	if !ok {
		// Unreachable while TestEveryAPIHasAnAuthzRule passes; refuse
		// rather than serve an API nobody decided about.
		resp := newResponse(req)
		setTopLevelError(resp, kerr.ClusterAuthorizationFailed.Code)
		return resp, nil, true
	}
	c := &authzCheck{b: b, id: id, host: host, cache: make(map[authzKey]bool)}
	res := rule(c, req)
	if res.refused != nil {
		return res.refused, nil, true
	}
	return nil, res.merge, false
}

// keepAllowed splits items into those whose resource allow accepts and the
// rest, keeping order.
func keepAllowed[T any](items []T, allow func(*T) bool) (kept, refused []T) {
	kept = items[:0:0]
	for i := range items {
		if allow(&items[i]) {
			kept = append(kept, items[i])
		} else {
			refused = append(refused, items[i])
		}
	}
	return kept, refused
}

// refusedMessage is the message of a refusal where the version has one.
func refusedMessage(op acl.Operation, rt acl.ResourceType, name string) *string {
	return kmsg.StringPtr(fmt.Sprintf("not authorized: %s on %s %q", op, rt, name))
}

// setTopLevelError sets the top-level error code of the responses that
// have one, for a request refused whole.
func setTopLevelError(resp kmsg.Response, code int16) {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
		r.MemberID = ""
		r.Generation = -1
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.InitProducerIDResponse:
		r.ErrorCode = code
		r.ProducerID, r.ProducerEpoch = -1, -1
	case *kmsg.FindCoordinatorResponse:
		r.ErrorCode = code
		r.NodeID, r.Port = -1, -1
	case *kmsg.ListGroupsResponse:
		r.ErrorCode = code
	case *kmsg.OffsetFetchResponse:
		r.ErrorCode = code
	}
}
