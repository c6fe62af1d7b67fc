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
//	heartbeat, leave           READ group
//	describe topic             DESCRIBE topic
//	describe group, lag        DESCRIBE group
//	list topics, groups        authenticated; filtered to what DESCRIBE allows
//	brokers                    authenticated
//	security admin (secapi)    authenticated; secapi decides by role
//	unclean elections, pprof   super users only
//	metrics, health, openapi   open
//
// Invariant: a rule's resource names are read from the path values the
// mux set and from the body decoded with the handler's own type and
// decoder, over the very bytes the handler then reads, so the stage
// authorises exactly what the handler acts on.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/meta"
)

// routeRule is how one route is authorised.
type routeRule struct {
	open      bool // no stage at all: health, metrics, the API description
	super     bool // super users only
	op        acl.Operation
	rt        acl.ResourceType // 0: no per-resource check (authenticated is enough)
	pathValue string           // the path value naming the resource; "" with ResourceCluster
	// topicOp on each topic bodyTopics names (group routes).
	topicOp    acl.Operation
	bodyTopics func(raw []byte) ([]string, error)
	// list filters a listing of resources of this type by DESCRIBE.
	list acl.ResourceType
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

	"POST /v1/topics":                          {op: acl.OpCreate, rt: acl.ResourceTopic, bodyTopics: createTopicName},
	"POST /v1/topics/{topic}/messages:publish": {op: acl.OpWrite, rt: acl.ResourceTopic, pathValue: "topic"},
	"POST /v1/producers":                       {op: acl.OpIdempotentWrite, rt: acl.ResourceCluster},
	"GET /v1/topics":                           {list: acl.ResourceTopic},
	"GET /v1/topics/{topic}":                   {op: acl.OpDescribe, rt: acl.ResourceTopic, pathValue: "topic"},
	"GET /v1/brokers":                          {},

	"POST /v1/groups/{group}/members:join":      {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, bodyTopics: joinTopics},
	"POST /v1/groups/{group}/members:heartbeat": {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group"},
	"POST /v1/groups/{group}/members:leave":     {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group"},
	"POST /v1/groups/{group}/messages:fetch":    {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, bodyTopics: fetchTopics},
	"POST /v1/groups/{group}/offsets:commit":    {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, bodyTopics: commitTopics},
	"POST /v1/groups/{group}/offsets:reset":     {op: acl.OpRead, rt: acl.ResourceGroup, pathValue: "group", topicOp: acl.OpRead, bodyTopics: resetTopics},
	"GET /v1/groups/{group}/lag":                {op: acl.OpDescribe, rt: acl.ResourceGroup, pathValue: "group"},
	"GET /v1/groups":                            {list: acl.ResourceGroup},
	"GET /v1/groups/{group}":                    {op: acl.OpDescribe, rt: acl.ResourceGroup, pathValue: "group"},

	"POST /v1/admin/partitions/{topic}/{partition}/elections:unclean": {super: true},

	// The security admin API (secapi): authentication here, the decision
	// by role there.
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

func createTopicName(raw []byte) ([]string, error) {
	var req createTopicRequest
	err := decodeBytes(raw, &req)
	return []string{req.Name}, err
}

func joinTopics(raw []byte) ([]string, error) {
	var req joinRequest
	err := decodeBytes(raw, &req)
	return req.Topics, err
}

func fetchTopics(raw []byte) ([]string, error) {
	var req fetchRequest
	err := decodeBytes(raw, &req)
	return []string{req.Topic}, err
}

func commitTopics(raw []byte) ([]string, error) {
	var req commitRequest
	err := decodeBytes(raw, &req)
	out := make([]string, 0, len(req.Offsets))
	for _, o := range req.Offsets {
		out = append(out, o.Topic)
	}
	return out, err
}

func resetTopics(raw []byte) ([]string, error) {
	var req resetRequest
	err := decodeBytes(raw, &req)
	return []string{req.Topic}, err
}

// authorise runs the authorise stage of rule for id. It returns the
// request to go on with (with a buffered body, or a listing's filter), or
// the refusal: 403 naming what was refused, or the body's 4xx.
func (b *Server) authorise(w http.ResponseWriter, r *http.Request, rule routeRule, id auth.Identity) (*http.Request, error) {
	host := clientHost(r)
	allowed := func(op acl.Operation, rt acl.ResourceType, name string) error {
		d := b.sec.Authorize(id, host, op, rt, name)
		if d.Allowed {
			return nil
		}
		return forbidden(id, op, rt, name, d.Reason)
	}
	if err := tenantServed(r, rule, id, b.sec.Enabled()); err != nil {
		return r, err
	}
	switch {
	case rule.super:
		if !b.sec.Enabled() || id.IsSuper() {
			return r, nil
		}
		return r, &APIError{Status: http.StatusForbidden, Code: "forbidden",
			Message: fmt.Sprintf("%s %s is for super users; %s (tenant %q) is not one", r.Method, r.URL.Path, id.Principal, id.Principal.Tenant)}
	case rule.list != 0:
		visible := func(string) bool { return true }
		if b.sec.Enabled() {
			visible = func(name string) bool { return b.sec.Authorize(id, host, acl.OpDescribe, rule.list, name).Allowed }
		}
		return r.WithContext(context.WithValue(r.Context(), visibleKey{}, visible)), nil
	case rule.rt == 0 || !b.sec.Enabled():
		return r, nil
	}
	if rule.bodyTopics == nil {
		name := acl.ClusterName
		if rule.pathValue != "" {
			name = r.PathValue(rule.pathValue)
		}
		return r, allowed(rule.op, rule.rt, name)
	}
	raw, err := bufferBody(w, r)
	if err != nil {
		return r, err
	}
	names, err := rule.bodyTopics(raw)
	if err != nil {
		return r, err
	}
	if !id.IsSuper() {
		for _, n := range names {
			if strings.ContainsRune(n, meta.TenantSeparator) {
				return r, &APIError{Status: http.StatusBadRequest, Code: "invalid_name",
					Message: fmt.Sprintf("topic %q: '%c' is reserved for the names of other tenants", n, meta.TenantSeparator)}
			}
		}
	}
	if rule.pathValue == "" {
		// Create topic, Kafka's rule for CreateTopics: CREATE on the
		// cluster, or on the topic itself.
		if b.sec.Authorize(id, host, rule.op, acl.ResourceCluster, acl.ClusterName).Allowed {
			return r, nil
		}
		return r, allowed(rule.op, rule.rt, names[0])
	}
	// A group route: the group first (as Kafka checks it), then each topic.
	if err := allowed(rule.op, rule.rt, r.PathValue(rule.pathValue)); err != nil {
		return r, err
	}
	for _, t := range names {
		if err := allowed(rule.topicOp, acl.ResourceTopic, t); err != nil {
			return r, err
		}
	}
	return r, nil
}

// forbidden is the 403 of a refused operation, naming it.
func forbidden(id auth.Identity, op acl.Operation, rt acl.ResourceType, name, reason string) *APIError {
	what := fmt.Sprintf("%s %q", rt, name)
	if rt == acl.ResourceCluster {
		what = "the cluster"
	}
	return &APIError{Status: http.StatusForbidden, Code: "forbidden",
		Message: fmt.Sprintf("%s (tenant %q) may not %s %s: %s", id.Principal, id.Principal.Tenant, op, what, reason)}
}

// tenantServed refuses what the HTTP API cannot yet serve a tenant. Names
// over HTTP are not scoped to tenants as the Kafka protocol's are
// (broker/kafka/scope.go): a topic or group named here is the default
// tenant's, stored unqualified. So with security on, routes that name
// topics or groups serve the default tenant and super users (who address
// every tenant's names by their internal form, tenant~name), and refuse
// another tenant's identity rather than let it at the default tenant's
// names; and no one but a super user may name an internal form, which
// would reach another tenant's topic or group.
func tenantServed(r *http.Request, rule routeRule, id auth.Identity, enabled bool) error {
	if !enabled || id.IsSuper() {
		return nil
	}
	names := rule.rt == acl.ResourceTopic || rule.rt == acl.ResourceGroup || rule.list != 0 || rule.bodyTopics != nil
	if names && id.Principal.Tenant != auth.DefaultTenant {
		return &APIError{Status: http.StatusForbidden, Code: "tenant_not_served",
			Message: fmt.Sprintf("the HTTP API serves topics and groups of the default tenant (and super users); %s is in tenant %q, whose topics and groups are served over the Kafka protocol", id.Principal, id.Principal.Tenant)}
	}
	for _, v := range []string{"topic", "group"} {
		if strings.ContainsRune(r.PathValue(v), meta.TenantSeparator) {
			return &APIError{Status: http.StatusBadRequest, Code: "invalid_name",
				Message: fmt.Sprintf("%s %q: '%c' is reserved for the names of other tenants", v, r.PathValue(v), meta.TenantSeparator)}
		}
	}
	return nil
}
