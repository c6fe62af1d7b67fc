package kafka

// This file owns the request pipeline: the one path every Kafka request
// takes from its decoded frame to its response.
//
//	decode     parseRequest (conn.go): header and body, or the connection closes
//	route      the dispatch table of the listener, and the version range
//	authenticate  the connection's identity (authn.go); before SASL
//	           authentication, or after its session expired, only
//	           ApiVersions, SaslHandshake and SaslAuthenticate pass and any
//	           other request closes the connection
//	authorise  the API's rule (authz.go) asks the Authorizer about every
//	           resource the request names, takes the refused items out of
//	           the request, or refuses it whole
//	admit      the Admitter (quotas; admits everything today)
//	handle     the API's handler, on what authorisation left of the request,
//	           with the identity in its context (auth.IdentityFrom)
//	respond    the refused items merged back into the handler's response,
//	           each with its *_AUTHORIZATION_FAILED code; the writer sends it
//
// Invariant: no handler checks identity on its own: authentication and
// authorisation happen here, before the handler runs, and a handler sees
// only the items its caller may touch. Adding an API means adding its rule
// to authzRules; TestEveryAPIHasAnAuthzRule refuses a table without one.
// Invariant: the requests of the inter-broker listener are not authorised
// here: that listener serves only the other brokers and checks replica
// fetches itself (interbroker.go).

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/broker/kafka/scope"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
)

// Authorizer decides whether an identity, connecting from host (an IP
// address), may perform op on the resource of type rt named name (a topic,
// group or transactional id as the client names it, acl.ClusterName for
// the cluster). The broker's ACL-backed one decides within the identity's
// tenant. It is called on connections' goroutines, concurrently.
type Authorizer interface {
	Authorize(id auth.Identity, host string, op acl.Operation, rt acl.ResourceType, name string) acl.Decision
}

// AllowAll is the Authorizer of a broker without security (`make run`):
// every operation of every principal is allowed, as Kafka's
// allow.everyone.if.no.acl.found with no ACLs.
type AllowAll struct{}

// Authorize allows.
func (AllowAll) Authorize(auth.Identity, string, acl.Operation, acl.ResourceType, string) acl.Decision {
	return acl.Decision{Allowed: true, Reason: "no authoriser configured"}
}

// Admitter is the admit stage: whether a request of an authenticated and
// authorised identity is served now. The quota work fills it; an error
// closes the connection.
type Admitter interface {
	Admit(ctx context.Context, id auth.Identity, req kmsg.Request) error
}

// AdmitAll admits every request.
type AdmitAll struct{}

// Admit admits.
func (AdmitAll) Admit(context.Context, auth.Identity, kmsg.Request) error { return nil }

// serveRequest runs req through the pipeline and returns its reply. An
// error closes the connection.
func (b *Server) serveRequest(ctx context.Context, sec *connSecurity, req *request) (reply, error) {
	a, err := route(req)
	if err != nil {
		return nil, err
	}
	req.sec = sec
	id, err := sec.authenticate(req, b.now())
	if err != nil {
		return nil, err
	}
	if b.identify != nil && id.Principal.User != "" {
		id = b.identify(id.Principal)
	}
	var merge func(kmsg.Response)
	if !req.interBroker && !preAuthAPI(req.key) {
		// Scope: the tenant's names become internal names (tenant~name),
		// and back in the response, where other tenants' are removed.
		sc := scope.Scope{Tenant: id.Principal.Tenant, Unscoped: id.IsSuper(), TopicOwner: b.topicOwner}
		foreign, err := sc.Request(req.body)
		if err != nil {
			return nil, fmt.Errorf("%s from %s: %w", apiName(req.key), id.Principal, err)
		}
		refused, m, whole := b.authorise(id, sec.ip, req)
		if whole {
			sc.Response(refused, foreign)
			return done(refused), nil
		}
		merge = func(resp kmsg.Response) {
			if m != nil {
				m(resp)
			}
			sc.Response(resp, foreign)
		}
	}
	if err := b.admitter.Admit(ctx, id, req.body); err != nil {
		return nil, fmt.Errorf("%s not admitted: %w", apiName(req.key), err)
	}
	var rep reply
	ctx = auth.WithIdentity(ctx, id)
	if req.key == kmsg.Produce.Int16() && !req.interBroker {
		// Produce takes its tenant's turn in the handler lane (fair.go of
		// broker/node); a fetch takes its turns pass by pass (api_fetch.go).
		err = b.Fair.RunTimed(ctx, id.Principal.Tenant, func() { rep, err = a.handle(b, ctx, req) })
	} else {
		rep, err = a.handle(b, ctx, req)
	}
	if err != nil || rep == nil || merge == nil {
		return rep, err
	}
	return mergedReply{inner: rep, merge: merge}, nil
}

// mergedReply is a handler's reply with the authorise stage's refused items
// merged into its response once it is complete.
type mergedReply struct {
	inner reply
	merge func(kmsg.Response)
}

func (r mergedReply) ready() bool { return r.inner.ready() }
func (r mergedReply) response() kmsg.Response {
	resp := r.inner.response()
	r.merge(resp)
	return resp
}

// apiName names an API key for logs.
func apiName(key int16) string { return kmsg.NameForKey(key) }

// topicOwner is the internal name of the topic with id, for the scope
// stage's check of topic IDs.
func (b *Server) topicOwner(id [16]byte) (string, bool) {
	if t := b.LookupTopicID(id); t != nil {
		return t.Meta.Name, true
	}
	return "", false
}
