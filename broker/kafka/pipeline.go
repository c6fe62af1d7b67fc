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
//	admit      the Admitter (quota.go): the connection's tenant counted
//	           once known, the request charged to its tenant's rate
//	           quotas; a fetch over its quota is answered empty at once
//	           and a fetch's max_bytes capped to one quota window
//	handle     the API's handler, on what authorisation left of the request,
//	           with the identity in its context (auth.IdentityFrom)
//	respond    the refused items merged back into the handler's response,
//	           each with its *_AUTHORIZATION_FAILED code; the writer sets
//	           throttle_time_ms, sends it, and the connection is not read
//	           until the throttle has passed
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
	"time"

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

// Admitter is the admit stage (quota.go): whether and how a request of an
// authenticated and authorised identity is served, and how long its
// connection is then held (KIP-219: the response goes out at once with
// throttle_time_ms, then the connection is not read for that long). Its
// methods are called on a connection's reader goroutine except Answered
// and Held, which the writer calls; it is shared by every connection.
// Requests of the inter-broker listener are not admitted here.
type Admitter interface {
	// Connected is called once a connection's identity is known (its first
	// request past authentication); a non-empty reason closes it, counted
	// as a refused connection of that reason.
	Connected(id auth.Identity) (refused string)
	// Disconnected ends a connection Connected admitted.
	Disconnected(id auth.Identity)
	// Inflight is how many requests a connection of id may have unanswered
	// before its reader stops reading; 0 is no limit of its own.
	Inflight(id auth.Identity) int
	// Admit runs before the handler; an error closes the connection.
	Admit(ctx context.Context, id auth.Identity, req kmsg.Request) (Admission, error)
	// Handled runs after the handler with the time it took.
	Handled(id auth.Identity, req kmsg.Request, took time.Duration) Hold
	// Answered runs once the response is complete, before it is written.
	Answered(id auth.Identity, req kmsg.Request, resp kmsg.Response) Hold
	// Held counts the time a connection of id was held for reason.
	Held(id auth.Identity, reason string, d time.Duration)
	// Owed is how much longer a held connection stays held for reason's debt.
	Owed(id auth.Identity, reason string) time.Duration
}

// Hold is how long a connection is held after a response, and why (a
// quota key).
type Hold struct {
	Delay  time.Duration
	Reason string
}

// Max is the longer of h and o.
func (h Hold) Max(o Hold) Hold {
	if o.Delay > h.Delay {
		return o
	}
	return h
}

// Admission is the admit stage's answer before the handler.
type Admission struct {
	Hold
	// Answer, when set, is sent at once instead of running the handler
	// (a fetch of a tenant already over its consumer quota).
	Answer kmsg.Response
}

// AdmitAll admits every request and holds nothing: the Admitter of a broker
// without quotas.
type AdmitAll struct{}

func (AdmitAll) Connected(auth.Identity) string { return "" }
func (AdmitAll) Disconnected(auth.Identity)     {}
func (AdmitAll) Inflight(auth.Identity) int     { return 0 }
func (AdmitAll) Admit(context.Context, auth.Identity, kmsg.Request) (Admission, error) {
	return Admission{}, nil
}
func (AdmitAll) Handled(auth.Identity, kmsg.Request, time.Duration) Hold  { return Hold{} }
func (AdmitAll) Answered(auth.Identity, kmsg.Request, kmsg.Response) Hold { return Hold{} }
func (AdmitAll) Held(auth.Identity, string, time.Duration)                {}
func (AdmitAll) Owed(auth.Identity, string) time.Duration                 { return 0 }

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
	var rep reply
	if req.interBroker {
		rep, err = b.handleFair(ctx, a, id, req)
	} else {
		rep, err = b.admitAndHandle(ctx, a, id, req)
	}
	if err != nil || rep == nil || merge == nil {
		return rep, err
	}
	return mergedReply{inner: rep, merge: merge}, nil
}

// handleFair runs the API's handler with the identity in its context. A
// Produce first takes its tenant's turn in the handler lane (fair.go of
// broker/node); a fetch takes its turns pass by pass (api_fetch.go); the
// inter-broker listener's requests never wait behind a tenant.
func (b *Server) handleFair(ctx context.Context, a api, id auth.Identity, req *request) (rep reply, err error) {
	ctx = auth.WithIdentity(ctx, id)
	if req.key != kmsg.Produce.Int16() || req.interBroker {
		return a.handle(b, ctx, req)
	}
	if ferr := b.Fair.RunTimed(ctx, id.Principal.Tenant, func() { rep, err = a.handle(b, ctx, req) }); ferr != nil {
		return nil, ferr
	}
	return rep, err
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
