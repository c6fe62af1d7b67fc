package scope

// This file owns the scope stage of the request pipeline: the translation
// between the names a tenant's client uses and the internal names
// (node.QualifyName) that everything behind the stage — authorisation,
// handlers, the registry, etcd, metrics and logs — uses.
//
//	client (tenant acme)            handlers, etcd, logs
//	"orders", group "billing"  ──▶  "acme~orders", "acme~billing"   Request
//	"orders"                   ◀──  "acme~orders"                   Response
//	(nothing)                  ◀──  "bob~orders", "orders"          Response drops them
//
// The stage is pure: no I/O, no clock, no locks. Scope is a value built per
// request from the connection's principal; the only outside state it reads
// is TopicOwner, which must be safe for concurrent use.
//
// Invariant: after Request, every non-empty topic name, group id and
// transactional id of a scoped request belongs to the scope's tenant, and
// every topic ID in it is either one of the tenant's topics or a
// placeholder that no topic has (see Refused). The handler therefore
// cannot reach another tenant's topic or group, whatever the client sent.
// Invariant: after Response, a scoped response holds only the tenant's own
// names, unqualified, and topic IDs that are the tenant's or that the
// client sent itself (answered UNKNOWN_TOPIC_ID).
// Invariant: an unscoped (super user) request and response pass unchanged.
//
// Rules that are not obvious:
//   - An empty name stays empty both ways: it names nothing in any tenant,
//     and the handlers refuse it as they did before tenants.
//   - A name a client could not spell legally ("x~y" as a topic) is still
//     qualified ("acme~x~y", "default~x~y"); such an internal name is no
//     valid topic (node.ValidateQualifiedTopicName), so the handler answers
//     it as the unknown or invalid topic it is, and never as tenant x's.
//   - Group member metadata (JoinGroup protocols, SyncGroup assignments,
//     DescribeGroups members) is opaque to the broker: it carries the
//     client's own topic names between members of one group, so of one
//     tenant. Rewriting it would mean decoding every assignor's format, and
//     leaving it alone leaks nothing, so it is left alone.
//   - An error message has its own tenant's prefix ("acme~" at the start of
//     a name) removed; if a separator is still left, the message might name
//     another tenant's resource, so it is dropped (null) and the client
//     reads the error code alone. Messages of an unscoped request are kept.
//   - Only the canonical internal spelling is a tenant's: a response name x
//     is kept only when QualifyName(SplitName(x)) == x, so a super user's
//     "default~orders" is never shown to the default tenant as "orders".

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// ErrNotScoped: the scope stage does not know where the names of this
// request kind or version are, or the scope has no valid tenant. The
// pipeline refuses such a request for a scoped principal: a name the stage
// cannot see could be any tenant's.
var ErrNotScoped = errors.New("request cannot be scoped to a tenant")

// Scope is who a request's names belong to.
type Scope struct {
	// Tenant is the principal's tenant; its names are qualified with it.
	Tenant string
	// Unscoped is set for super users: they address every topic and group
	// by its internal name ("acme~orders"; unqualified is the default
	// tenant's) and see them so. Their requests pass unchanged.
	Unscoped bool
	// TopicOwner returns the internal name of the topic with this ID, and
	// false when no topic has it. Request refuses every topic ID when it is
	// nil: the stage cannot tell the tenant's IDs from another's.
	TopicOwner func(id [16]byte) (internalName string, ok bool)
}

// Refused maps each placeholder topic ID that Request put into a request
// to the ID the client sent: an ID of a topic that is not the tenant's (or
// of no topic). The handler sees only the placeholder, which no topic has,
// and answers it as unknown at once; Response puts the client's ID back and
// makes the answer UNKNOWN_TOPIC_ID, as Kafka answers an ID it does not
// know, so another tenant's topic IDs are indistinguishable from unused ones.
// Nil when nothing was refused.
type Refused map[[16]byte][16]byte

// Request rewrites every topic name, group id and transactional id of req
// in place to its internal name, and replaces every topic ID that is not the
// tenant's with a placeholder, recorded in the returned Refused, which the
// pipeline hands to Response with this request's response. ErrNotScoped
// when req is of a kind or version the stage does not cover.
func (s Scope) Request(req kmsg.Request) (Refused, error) {
	if s.Unscoped {
		return nil, nil
	}
	if err := meta.ValidateTenantName(s.Tenant); err != nil {
		return nil, fmt.Errorf("kafka: scope: %w: %w", ErrNotScoped, err)
	}
	e, ok := scopeTable[req.Key()]
	if !ok || req.GetVersion() > e.maxVersion {
		return nil, fmt.Errorf("kafka: scope %s v%d: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), ErrNotScoped)
	}
	p := pass{s: s}
	if e.request != nil {
		e.request(&p, req)
	}
	return p.refused, nil
}

// Response rewrites resp in place for the client: internal names of the
// tenant lose their prefix, entries naming another tenant's topic or group
// are removed, error messages are cleaned (see the rules above), and the
// placeholders of refused become the client's IDs again, answered
// UNKNOWN_TOPIC_ID. refused is what Request returned for the request resp
// answers.
func (s Scope) Response(resp kmsg.Response, refused Refused) {
	if s.Unscoped {
		return
	}
	e, ok := scopeTable[resp.Key()]
	if !ok || e.response == nil {
		return
	}
	p := pass{s: s, refused: refused}
	e.response(&p, resp)
}

// pass is one run of the stage over a request or a response.
type pass struct {
	s       Scope
	refused Refused // filled by Request, read by Response
}

// name returns the internal name of a client's name.
func (p *pass) name(client string) string {
	if client == "" {
		return ""
	}
	return node.QualifyName(p.s.Tenant, client)
}

func (p *pass) names(client []string) {
	for i := range client {
		client[i] = p.name(client[i])
	}
}

func (p *pass) namePtr(client *string) {
	if client != nil {
		*client = p.name(*client)
	}
}

// id returns id if it is one of the tenant's topics' IDs, the zero ID
// (none) as it is, and otherwise a new placeholder remembered in refused.
func (p *pass) id(id [16]byte) [16]byte {
	if id == ([16]byte{}) || p.ownsID(id) {
		return id
	}
	ph := placeholderID(len(p.refused))
	if p.refused == nil {
		p.refused = make(Refused)
	}
	p.refused[ph] = id
	return ph
}

func (p *pass) ownsID(id [16]byte) bool {
	if p.s.TopicOwner == nil {
		return false
	}
	internal, ok := p.s.TopicOwner(id)
	if !ok {
		return false
	}
	tenant, _ := node.SplitName(internal)
	return tenant == p.s.Tenant
}

// foreignID reports whether id is known to be another tenant's topic. A
// response entry whose name is the tenant's vouches for an ID no topic has
// any more (deleted meanwhile); only a known other owner removes it.
func (p *pass) foreignID(id [16]byte) bool {
	if id == ([16]byte{}) || p.s.TopicOwner == nil {
		return false
	}
	internal, ok := p.s.TopicOwner(id)
	if !ok {
		return false
	}
	tenant, _ := node.SplitName(internal)
	return tenant != p.s.Tenant
}

// placeholderID is the n-th placeholder of one request: "~~~~" and n, with
// the UUID version nibble 0. Topic IDs are random version-4 UUIDs, so no
// topic ever has one.
func placeholderID(n int) [16]byte {
	return [16]byte{'~', '~', '~', '~', 12: byte(n >> 24), 13: byte(n >> 16), 14: byte(n >> 8), 15: byte(n)}
}

// restore puts the client's ID back in place of a placeholder and reports
// whether id was one.
func (p *pass) restore(id *[16]byte) bool {
	orig, ok := p.refused[*id]
	if ok {
		*id = orig
	}
	return ok
}

// client returns the client's name for an internal name, and false when it
// is not the tenant's (in its canonical spelling): the caller removes the
// entry.
func (p *pass) client(internal string) (string, bool) {
	if internal == "" {
		return "", true
	}
	return node.LocalName(p.s.Tenant, internal)
}

// clientIn rewrites *name to the client's name; false to remove its entry.
func (p *pass) clientIn(name *string) bool {
	c, ok := p.client(*name)
	*name = c
	return ok
}

// topic is the rule for one topic entry of a response, by name and ID:
// a placeholder is put back (restored true), a foreign name or ID removes
// the entry (keep false), and the tenant's name loses its prefix.
func (p *pass) topic(name *string, id *[16]byte) (keep, restored bool) {
	if p.restore(id) {
		if name != nil {
			*name = ""
		}
		return true, true
	}
	if name != nil && !p.clientIn(name) {
		return false, false
	}
	return !p.foreignID(*id), false
}

// message applies the error-message rule to a nullable message.
func (p *pass) message(m **string) {
	if *m == nil {
		return
	}
	out, ok := scrubMessage(**m, p.s.Tenant)
	if !ok {
		*m = nil
		return
	}
	*m = &out
}

// scrubMessage is node.ScrubMessage, shared with the HTTP front end.
func scrubMessage(msg, tenant string) (string, bool) { return node.ScrubMessage(msg, tenant) }

// keep removes, in place, the elements of xs for which f is false; f may
// rewrite the element. A nil slice stays nil and a non-nil one non-nil
// (several responses distinguish null from empty).
func keep[T any](xs []T, f func(*T) bool) []T {
	out := xs[:0]
	for i := range xs {
		if f(&xs[i]) {
			out = append(out, xs[i])
		}
	}
	return out
}

// Covers reports whether requests of API key at version are scoped: the
// broker serves only what the stage sees (broker/kafka checks its
// dispatch tables against it).
func Covers(key, version int16) bool {
	e, ok := scopeTable[key]
	return ok && version <= e.maxVersion
}
