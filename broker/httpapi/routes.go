package httpapi

// This file owns the route table of the pipeline's authorise stage: for
// each public route, the operations it performs on which resources, named
// by the path or by the JSON body, in Kafka's terms (what the same
// operation needs over the Kafka protocol):
//
//	publish                    WRITE topic
//	create topic               CREATE cluster, or CREATE on the topic
//	init producer id           IDEMPOTENT_WRITE cluster
//	group join                 READ group, READ each topic subscribed
//	group fetch, commit, reset READ group, READ each topic named
//	ack, nack (queueapi)       READ group, READ each topic named (a retry
//	                           tier's too: __retry.<group>.…)
//	queue fetch (no topic)     READ group; the assigned topics were
//	                           authorised (READ) when the member joined
//	heartbeat, leave           READ group
//	describe topic, hot keys   DESCRIBE topic
//	list messages (queueapi)   READ topic (dead letters and their history)
//	start a redrive            READ the DLQ, WRITE the body's target
//	list a DLQ's redrives      DESCRIBE the DLQ
//	a redrive, cancel it       authenticated; redriveapi shows a job of the
//	                           caller's tenant only, with DESCRIBE (cancel:
//	                           READ) on its DLQ
//	describe group, lag        DESCRIBE group
//	list topics, groups        authenticated; filtered to the tenant's names
//	                           that DESCRIBE allows
//	brokers, a broker's health authenticated
//	security admin (secapi)    authenticated; secapi decides by role
//	open an upload session     WRITE on the body's topic (objapi)
//	upload bytes, complete,    authenticated; the session or object must be
//	abort, download object     the caller's tenant's (objapi)
//	unclean elections, pprof   super users only
//	metrics, health, openapi   open
//	console (/ui, /ui/)        authenticated; each call of a page or its
//	                           redrive form is the caller's own, as above
//
// Invariant: a rule's resource names are read from the path values the
// mux set and from the body decoded with the handler's own type and
// decoder, over the very bytes the handler then reads, so the stage
// authorises exactly what the handler acts on.
// Invariant: the stage runs after the scope stage (names.go) and decides on
// the tenant-local part of the names it qualified: ACLs are written on a
// tenant's own names, as over the Kafka protocol.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/objapi"
)

// routeRule is how one route is authorised.
type routeRule struct {
	open      bool // no stage at all: health, metrics, the API description
	super     bool // super users only
	op        acl.Operation
	rt        acl.ResourceType // 0: no per-resource check (authenticated is enough)
	pathValue string           // the path value naming the resource; "" with ResourceCluster
	// topicOp on each topic body names (group routes).
	topicOp acl.Operation
	body    bodyNames
	// list filters a listing of resources of this type by DESCRIBE.
	list acl.ResourceType
	// bodyTopic: op on the body's one topic decides, never op on the
	// cluster (an upload session's WRITE).
	bodyTopic bool
}

// names reports whether the route names topics or groups, which the scope
// stage qualifies.
func (rule routeRule) names() bool {
	return rule.rt == acl.ResourceTopic || rule.rt == acl.ResourceGroup || rule.list != 0 || rule.body != nil
}

// bodyNames decodes a buffered body with the handler's own type and
// decoder, calls each on every topic name it holds (each may rewrite the
// name, or refuse it) and returns the body encoded again, names rewritten.
type bodyNames func(raw []byte, each func(name *string) error) ([]byte, error)

// bodyNamesOf is the bodyNames of request type T whose topic names names
// points at.
func bodyNamesOf[T any](names func(*T) []*string) bodyNames {
	return func(raw []byte, each func(*string) error) ([]byte, error) {
		var req T
		if err := decodeBytes(raw, &req); err != nil {
			return nil, err
		}
		for _, n := range names(&req) {
			if err := each(n); err != nil {
				return nil, err
			}
		}
		return json.Marshal(&req)
	}
}

// publicRoutes is the table; routeMux refuses a route missing from it.
var publicRoutes = map[string]routeRule{
	"GET /metrics":             {open: true},
	"GET /healthz":             {open: true},
	"GET /readyz":              {open: true},
	"GET /v1/openapi.json":     {open: true},
	"GET /debug/pprof/":        {super: true},
	"GET /debug/pprof/profile": {super: true},
	"GET /debug/pprof/trace":   {super: true},
	"GET /debug/pprof/symbol":  {super: true},
	// The operator console (console.go): authenticated; its pages ask
	// the routes below as the caller, each authorised by its own rule.
	"GET /ui":  {},
	"GET /ui/": {}, "POST /ui/": {},

	"POST /v1/topics":                          {op: acl.OpCreate, rt: acl.ResourceTopic, body: createTopicName},
	"POST /v1/topics/{topic}/messages:publish": {op: acl.OpWrite, rt: acl.ResourceTopic, pathValue: "topic"},
	"POST /v1/producers":                       {op: acl.OpIdempotentWrite, rt: acl.ResourceCluster},
	"GET /v1/topics":                           {list: acl.ResourceTopic},
	"GET /v1/topics/{topic}":                   {op: acl.OpDescribe, rt: acl.ResourceTopic, pathValue: "topic"},
	"GET /v1/topics/{topic}/hot-keys":          {op: acl.OpDescribe, rt: acl.ResourceTopic, pathValue: "topic"},
	"GET /v1/topics/{topic}/messages":          {op: acl.OpRead, rt: acl.ResourceTopic, pathValue: "topic"},
	"GET /v1/brokers":                          {},
	"GET /v1/brokers/{id}/health":              {}, // healthapi

	// Dead-letter redrive (redriveapi).
	"POST /v1/dlq/{topic}/redrives": {op: acl.OpRead, rt: acl.ResourceTopic, pathValue: "topic", topicOp: acl.OpWrite, body: redriveTarget},
	"GET /v1/dlq/{topic}/redrives":  {op: acl.OpDescribe, rt: acl.ResourceTopic, pathValue: "topic"},
	"GET /v1/redrives/{id}":         {},
	"POST /v1/redrives/{id}/cancel": {},

	"POST /v1/groups/{group}/members:join":      {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: joinTopics},
	"POST /v1/groups/{group}/members:heartbeat": {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group"},
	"POST /v1/groups/{group}/members:leave":     {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group"},
	"POST /v1/groups/{group}/messages:fetch":    {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: fetchTopics},
	"POST /v1/groups/{group}/offsets:commit":    {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: commitTopics},
	"POST /v1/groups/{group}/offsets:reset":     {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: resetTopics},
	"GET /v1/groups/{group}/lag":                {op: acl.OpDescribe, rt: acl.ResourceGroup, pathValue: "group"},
	"POST /v1/groups/{group}/messages:ack":      {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: ackTopics},
	"POST /v1/groups/{group}/messages:nack":     {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: nackTopics},
	"POST /v1/groups/{group}/keys:resume":       {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: keyTopic},
	"POST /v1/groups/{group}/keys:skip":         {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, body: keyTopic},
	"GET /v1/groups":                            {list: acl.ResourceGroup},
	"GET /v1/groups/{group}":                    {op: acl.OpDescribe, rt: acl.ResourceGroup, pathValue: "group"},

	"POST /v1/admin/partitions/{topic}/{partition}/elections:unclean": {super: true},
	"POST /v1/admin/brokers/{id}/drain":                               {super: true},
	"DELETE /v1/admin/brokers/{id}/drain":                             {super: true},
	"POST /v1/admin/elections:preferred":                              {super: true},
	"POST /v1/admin/partitions/{topic}/{partition}/reassign":          {super: true},
	"DELETE /v1/admin/partitions/{topic}/{partition}/reassign":        {super: true},
	"GET /v1/admin/reassignments":                                     {super: true},

	// The security admin API (secapi): authenticated here, decided by role there.
	"POST /v1/tenants":               {},
	"GET /v1/tenants":                {},
	"DELETE /v1/tenants/{name}":      {},
	"POST /v1/users":                 {},
	"GET /v1/users":                  {},
	"DELETE /v1/users/{name}":        {},
	"PUT /v1/users/{name}/password":  {},
	"POST /v1/users/{name}/api-keys": {},
	"GET /v1/users/{name}/api-keys":  {},
	"DELETE /v1/api-keys/{id}":       {},
	"POST /v1/acls":                  {},
	"GET /v1/acls":                   {},
	"POST /v1/acls:delete":           {},

	// Large payloads (objapi): a session is opened for a topic the caller
	// may WRITE; the rest acts on the caller's tenant's sessions only.
	"POST /v1/uploads":        {op: acl.OpWrite, rt: acl.ResourceTopic, body: uploadTopic, bodyTopic: true},
	"PUT /v1/uploads/{id}":    {},
	"POST /v1/uploads/{id}":   {},
	"DELETE /v1/uploads/{id}": {},
	"GET /v1/objects/{ref}":   {},

	// secapi's quota routes (quotas.go): likewise.
	"GET /v1/quotas":                    {},
	"GET /v1/tenants/{name}/quotas":     {},
	"PUT /v1/tenants/{name}/quotas":     {},
	"PUT /v1/tenants/{name}/scheduling": {},
}

// secapiRoutes are the routes secapi.Register adds, mounted behind the
// pipeline.
var secapiRoutes = []string{
	"POST /v1/tenants", "GET /v1/tenants", "DELETE /v1/tenants/{name}",
	"POST /v1/users", "GET /v1/users", "DELETE /v1/users/{name}", "PUT /v1/users/{name}/password",
	"POST /v1/users/{name}/api-keys", "GET /v1/users/{name}/api-keys", "DELETE /v1/api-keys/{id}",
	"POST /v1/acls", "GET /v1/acls", "POST /v1/acls:delete",
	"GET /v1/quotas", "GET /v1/tenants/{name}/quotas", "PUT /v1/tenants/{name}/quotas", "PUT /v1/tenants/{name}/scheduling",
}

// decodeBytes decodes a buffered body as decodeJSON does.
func decodeBytes(raw []byte, v any) error { return decodeBody(bytes.NewReader(raw), v) }

var (
	createTopicName = bodyNamesOf(func(r *createTopicRequest) []*string { return []*string{&r.Name} })
	joinTopics      = bodyNamesOf(func(r *joinRequest) []*string {
		out := make([]*string, len(r.Topics))
		for i := range r.Topics {
			out[i] = &r.Topics[i]
		}
		return out
	})
	fetchTopics = bodyNamesOf(func(r *fetchRequest) []*string {
		if r.Topic == "" { // a queue fetch: the topics are the member's assignment, authorised at join
			return nil
		}
		return []*string{&r.Topic}
	})
	commitTopics = bodyNamesOf(func(r *commitRequest) []*string {
		out := make([]*string, len(r.Offsets))
		for i := range r.Offsets {
			out[i] = &r.Offsets[i].Topic
		}
		return out
	})
	resetTopics = bodyNamesOf(func(r *resetRequest) []*string { return []*string{&r.Topic} })
	uploadTopic = bodyNamesOf(func(r *objapi.BeginRequest) []*string { return []*string{&r.Topic} })
)

// authorise runs the authorise stage of rule for id, on the names the
// scope stage qualified; ACLs are decided on their tenant-local part. It
// returns the request to go on with (with a buffered body, or a listing's
// filter), or the refusal: 403 naming what was refused, or the body's 4xx.
func (b *Server) authorise(w http.ResponseWriter, r *http.Request, rule routeRule, id auth.Identity) (*http.Request, error) {
	host := clientHost(r)
	allowed := func(op acl.Operation, rt acl.ResourceType, name string) error {
		d := b.sec.Authorize(id, host, op, rt, name)
		if d.Allowed {
			return nil
		}
		return forbidden(id, op, rt, name, d.Reason)
	}
	switch {
	case rule.super:
		if !b.sec.Enabled() || id.IsSuper() {
			return r, nil
		}
		return r, &APIError{Status: http.StatusForbidden, Code: "forbidden",
			Message: fmt.Sprintf("%s %s is for super users; %s (tenant %q) is not one", r.Method, r.URL.Path, id.Principal, id.Principal.Tenant)}
	case rule.list != 0:
		// A listing shows the tenant's own names (the scope's) that
		// DESCRIBE allows.
		s := scopeFrom(r.Context())
		enabled := b.sec.Enabled()
		visible := func(internal string) bool {
			if _, ok := s.show(internal); !ok {
				return false
			}
			return !enabled || b.sec.Authorize(id, host, acl.OpDescribe, rule.list, aclName(internal)).Allowed
		}
		return r.WithContext(context.WithValue(r.Context(), visibleKey{}, visible)), nil
	case rule.rt == 0 || !b.sec.Enabled():
		return r, nil
	}
	if rule.body == nil {
		name := acl.ClusterName
		if rule.pathValue != "" {
			name = aclName(r.PathValue(rule.pathValue))
		}
		return r, allowed(rule.op, rule.rt, name)
	}
	raw, err := bufferBody(w, r)
	if err != nil {
		return r, err
	}
	var names []string
	if _, err := rule.body(raw, func(n *string) error {
		names = append(names, aclName(*n))
		return nil
	}); err != nil {
		return r, err
	}
	if rule.pathValue == "" {
		// Create topic, Kafka's rule for CreateTopics: CREATE on the
		// cluster, or on the topic itself.
		if !rule.bodyTopic && b.sec.Authorize(id, host, rule.op, acl.ResourceCluster, acl.ClusterName).Allowed {
			return r, nil
		}
		return r, allowed(rule.op, rule.rt, names[0])
	}
	// A group route: the group first (as Kafka checks it), then each topic.
	if err := allowed(rule.op, rule.rt, aclName(r.PathValue(rule.pathValue))); err != nil {
		return r, err
	}
	for _, t := range names {
		if err := allowed(rule.topicOp, acl.ResourceTopic, t); err != nil {
			return r, err
		}
	}
	return r, nil
}

// forbidden is the 403 of a refused operation, naming it as the client
// named it.
func forbidden(id auth.Identity, op acl.Operation, rt acl.ResourceType, name, reason string) *APIError {
	what := fmt.Sprintf("%s %q", rt, name)
	if rt == acl.ResourceCluster {
		what = "the cluster"
	}
	return &APIError{Status: http.StatusForbidden, Code: "forbidden",
		Message: fmt.Sprintf("%s (tenant %q) may not %s %s: %s", id.Principal, id.Principal.Tenant, op, what, reason)}
}
