package httpapi

// This file owns the HTTP API's tenant scope: the translation between the
// names a tenant's client uses and the internal names (node.QualifyName)
// that the handlers, the registry, etcd, metrics and logs use, as the Kafka
// front end's scope stage does for the Kafka protocol.
//
//	client (tenant acme)               handlers, etcd, logs
//	/v1/topics/orders, group billing ─▶ acme~orders, acme~billing   path values and body names, before the handler
//	"orders"                         ◀─ acme~orders                 names in answers, error messages
//	(nothing)                        ◀─ globex~orders, orders        listings leave them out
//
// The scope stage (scopeRequest) runs in the pipeline after authentication
// and before authorisation, on every route that names topics or groups; it
// puts the request's tenantScope into its context, where the handlers find
// it (scopeFrom) to show names and messages back.
//
// Invariant: after the stage, every topic and group name a handler reads
// from the request is the client's tenant's: a client that is not a super
// user cannot spell another tenant's name ('~' is refused with 400
// invalid_name), so a handler can only find the tenant's own topics and
// groups, or nothing (404).
// Invariant: a scoped answer holds the tenant's names unqualified and no
// other tenant's: listings leave out names that are not the tenant's
// (tenantScope.show), and a message that still holds a separator after the
// tenant's own prefixes are removed is withheld (it might name another
// tenant's resource).
// Invariant: super users are unscoped: they name every topic and group by
// its internal name and see them so. Requests on the inter-broker listener
// (forwarding, listings) carry internal names and are never scoped: they
// have no scope in their context, which reads as unscoped.
//
// Group member metadata (subscriptions, assignments) holds the names of the
// group's own tenant, as a Kafka client writes them (the Kafka front end
// leaves it opaque); memberTopic and memberLocal translate with the group's
// tenant, read from its internal name.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// withheldMessage replaces an error message that might name another
// tenant's resource; the error's code still tells the client what failed.
const withheldMessage = "(the message is withheld: it names a resource outside your tenant)"

// tenantScope is whose names a request uses.
type tenantScope struct {
	tenant   string // the principal's tenant
	unscoped bool   // a super user: internal names both ways
}

// scopeOf is the scope of an identity's requests.
func scopeOf(id auth.Identity) tenantScope {
	return tenantScope{tenant: id.Principal.Tenant, unscoped: id.IsSuper()}
}

// internal returns the internal name of a client's name of the kind
// ("topic", "group"); an empty name stays empty (the handler refuses it).
// A scoped client's name with the separator is refused: it would be
// another tenant's internal form.
func (s tenantScope) internal(kind, client string) (string, error) {
	if s.unscoped || client == "" {
		return client, nil
	}
	if strings.ContainsRune(client, node.TenantSeparator) {
		return "", &APIError{Status: http.StatusBadRequest, Code: "invalid_name",
			Message: fmt.Sprintf("%s %q: '%c' is reserved for the names of other tenants", kind, client, node.TenantSeparator)}
	}
	return node.QualifyName(s.tenant, client), nil
}

// show returns the client's name for an internal name, and false when it
// is not the tenant's: the answer must leave it out.
func (s tenantScope) show(internal string) (string, bool) {
	if s.unscoped || internal == "" {
		return internal, true
	}
	return node.LocalName(s.tenant, internal)
}

// name is show for a name the handler reached through the client's own
// names, so the tenant's; one that is not is shown empty rather than
// leaked.
func (s tenantScope) name(internal string) string {
	n, _ := s.show(internal)
	return n
}

// message readies an error message about internal names for the client.
func (s tenantScope) message(msg string) string {
	if s.unscoped {
		return msg
	}
	out, ok := node.ScrubMessage(msg, s.tenant)
	if !ok {
		return withheldMessage
	}
	return out
}

// aclName is the name ACLs are written on: the tenant-local part of an
// internal name (ACLs are kept per tenant, as the Kafka front end asks).
func aclName(internal string) string {
	_, local := node.SplitName(internal)
	return local
}

// memberTopic is the internal name of a topic named in the member
// metadata of group (a subscription or an assignment), which holds the
// names of the group's tenant.
func memberTopic(groupID, local string) string {
	tenant, _ := node.SplitName(groupID)
	return node.QualifyName(tenant, local)
}

// memberLocal is the name of an internal topic name in the member metadata
// of group, and false when the topic is not of the group's tenant (a super
// user's mistake): it cannot be written there.
func memberLocal(groupID, internal string) (string, bool) {
	tenant, _ := node.SplitName(groupID)
	return node.LocalName(tenant, internal)
}

// scopeKey and originalBodyKey are the context keys of a request's scope
// and of the body as the client sent it.
type (
	scopeKey        struct{}
	originalBodyKey struct{}
)

// scopeFrom is the scope the pipeline put in ctx; without one (the
// inter-broker listener's routes) names are internal both ways.
func scopeFrom(ctx context.Context) tenantScope {
	if s, ok := ctx.Value(scopeKey{}).(tenantScope); ok {
		return s
	}
	return tenantScope{unscoped: true}
}

// namedPathValues are the path values that name a topic or a group.
var namedPathValues = []string{"topic", "group"}

// scopeRequest is the pipeline's scope stage for rule and id: it returns r
// with its topic and group names qualified (path values and, where the
// rule reads names from the body, the body) and its scope in the context,
// or the refusal with r as it came, unscoped: the refusal names what the
// client sent and is answered as it is.
func (b *Server) scopeRequest(w http.ResponseWriter, r *http.Request, rule routeRule, id auth.Identity) (*http.Request, error) {
	s := scopeOf(id)
	if !s.unscoped {
		if err := meta.ValidateTenantName(s.tenant); err != nil {
			return r, &APIError{Status: http.StatusForbidden, Code: "forbidden",
				Message: fmt.Sprintf("%s has no valid tenant (%v); its names cannot be scoped", id.Principal, err)}
		}
	}
	out := r.WithContext(context.WithValue(r.Context(), scopeKey{}, s))
	if s.unscoped || !rule.names() {
		return out, nil
	}
	for _, v := range namedPathValues {
		q, err := s.internal(v, out.PathValue(v))
		if err != nil {
			return r, err
		}
		if q != "" {
			out.SetPathValue(v, q)
		}
	}
	if rule.body == nil {
		return out, nil
	}
	raw, err := bufferBody(w, out)
	if err != nil {
		return r, err
	}
	scoped, err := rule.body(raw, func(name *string) error {
		q, err := s.internal("topic", *name)
		*name = q
		return err
	})
	if err != nil {
		return r, err
	}
	out = out.WithContext(context.WithValue(out.Context(), originalBodyKey{}, raw))
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(scoped)), int64(len(scoped))
	return out, nil
}

// restoreClientBody gives r back the body its client sent, for a request
// forwarded to another broker's public API, which scopes it itself.
func restoreClientBody(r *http.Request) {
	if raw, ok := r.Context().Value(originalBodyKey{}).([]byte); ok {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	}
}

// showAssignment is a member's assignment in group as the scope shows it:
// the member metadata's names are the group's tenant's; a topic the scope
// may not see is left out.
func showAssignment(s tenantScope, groupID string, a kmsg.ConsumerMemberAssignment) []assignedTopic {
	out := []assignedTopic{}
	for _, t := range a.Topics {
		if name, ok := s.show(memberTopic(groupID, t.Topic)); ok {
			out = append(out, assignedTopic{Topic: name, Partitions: t.Partitions})
		}
	}
	return out
}

// showLags is a group's lag as the scope shows it: another tenant's topics
// are left out (a super user may have committed them in the tenant's
// group, as the Kafka front end's OffsetFetch leaves them out), names are
// the client's and messages scrubbed.
func (s tenantScope) showLags(lags []groupPartitionLag) []groupPartitionLag {
	out := make([]groupPartitionLag, 0, len(lags))
	for _, l := range lags {
		name, ok := s.show(l.Topic)
		if !ok {
			continue
		}
		l.Topic = name
		if l.Error != "" {
			l.Error = s.message(l.Error)
		}
		out = append(out, l)
	}
	return out
}
