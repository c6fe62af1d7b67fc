// Package authz is the Kafka request pipeline's authorise stage: a rule
// per API reads a decoded request, asks about every resource it names,
// and either refuses the request whole (a response the handler never
// sees: JoinGroup of a refused group) or removes the refused items
// (topics, groups, config resources) from the request and returns a merge
// that adds them, refused with their *_AUTHORIZATION_FAILED codes, to the
// handler's response. Listings that name no items (Metadata of all topics,
// ListGroups, OffsetFetch of all topics) are filtered by the merge. The
// table of rules by API key lives with the dispatch table (broker/kafka).
//
// Invariant: a rule asks about a topic by the name the request carries; a
// topic named by id is looked up first, and an id that names no topic is
// left to the handler (UNKNOWN_TOPIC_ID), so an id never tells more than a
// name would.
package authz

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
)

// Check asks about the resources of one request, remembering answers (a
// request may name a topic in many places).
type Check struct {
	ID auth.Identity
	// Allow decides one operation on one resource.
	Allow func(op acl.Operation, rt acl.ResourceType, name string) bool
	// TopicByID is the name of the topic with an id, "" when none.
	TopicByID func(id [16]byte) string
	// TopicExists reports whether a topic of that name exists.
	TopicExists func(name string) bool
	// MetadataBrokers are the brokers a Metadata answer names.
	MetadataBrokers func() []kmsg.MetadataResponseBroker

	cache map[key]bool
}

type key struct {
	op   acl.Operation
	rt   acl.ResourceType
	name string
}

func (c *Check) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	k := key{op, rt, name}
	if v, ok := c.cache[k]; ok {
		return v
	}
	if c.cache == nil {
		c.cache = make(map[key]bool)
	}
	v := c.Allow(op, rt, name)
	c.cache[k] = v
	return v
}

func (c *Check) topic(op acl.Operation, name string) bool {
	return c.allowed(op, acl.ResourceTopic, name)
}

func (c *Check) group(op acl.Operation, name string) bool {
	return c.allowed(op, acl.ResourceGroup, name)
}

func (c *Check) cluster(op acl.Operation) bool {
	return c.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

// topicName is the name of a topic the request names by id, "" when the id
// names none.
func (c *Check) topicName(id [16]byte) string { return c.TopicByID(id) }

// Result is a rule's answer: Refused (non-nil) answers the request
// without its handler; otherwise Merge (may be nil) completes the
// handler's response.
type Result struct {
	Refused kmsg.Response
	Merge   func(kmsg.Response)
}

// Rule is the authorise rule of one API.
type Rule func(c *Check, body kmsg.Request) Result

// None is the rule of the APIs every connection may use.
func None(*Check, kmsg.Request) Result { return Result{} }

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

// newResponse is the response of body at its version.
func newResponse(body kmsg.Request) kmsg.Response {
	resp := body.ResponseKind()
	resp.SetVersion(body.GetVersion())
	return resp
}

// Refuse is the whole-request refusal of body with code at the top level
// where the response has one.
func Refuse(body kmsg.Request, code int16) kmsg.Response {
	resp := newResponse(body)
	SetTopLevelError(resp, code)
	return resp
}

// SetTopLevelError sets the top-level error code of the responses that
// have one, for a request refused whole.
func SetTopLevelError(resp kmsg.Response, code int16) {
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

// The coordinator key types of FindCoordinator.
const (
	coordinatorKeyGroup       = 0
	coordinatorKeyTransaction = 1
)

// fetchReplica is the broker a Fetch names as its sender (-1: a
// consumer): ReplicaState from v15 (KIP-903), the ReplicaID field before.
func fetchReplica(r *kmsg.FetchRequest) (id int32, epoch int64) {
	if r.Version >= 15 {
		return r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	return r.ReplicaID, -1
}

// metadataTopicError is a Metadata answer of one requested topic with code.
func metadataTopicError(rt kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = rt.Topic
	t.TopicID = rt.TopicID
	t.ErrorCode = code
	return t
}
