package httpapi

// This file owns dead-letter redrive's hook (redriveapi): the Backend its
// runner needs (reads at the leader, the publish path) and the Frontend its
// handlers need (decoding, answers, tenant scope, ACL checks), over this
// package's plumbing.
//
// Invariant: the runner reads and publishes through the same paths as the
// queue API (queue.go): reads at each partition's leader, publishes
// acknowledged by the replicas like any publish, each copy's object
// references claimed before it is appended (produceCopy, http_objref.go).

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-mq/sluice/broker/acl"
	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/httpapi/redriveapi"
	"github.com/sluice-mq/sluice/broker/node"
)

// redriveBackend is redriveapi.Backend and Frontend over a Server.
type redriveBackend struct{ b *Server }

// RunRedrives runs the redrive jobs this broker claims until ctx ends.
func (b *Server) RunRedrives(ctx context.Context, reg redriveapi.Registration) {
	b.redrive.Run(ctx, reg)
}

func (b *Server) registerRedriveAPI(mux routeMux) {
	api := redriveapi.NewAPI(b.redrive, redriveBackend{b})
	mux.HandleFunc("POST /v1/dlq/{topic}/redrives", api.HandleStart)
	mux.HandleFunc("GET /v1/dlq/{topic}/redrives", api.HandleList)
	mux.HandleFunc("GET /v1/redrives/{id}", api.HandleGet)
	mux.HandleFunc("POST /v1/redrives/{id}/cancel", api.HandleCancel)
}

// redriveTarget is the start request's body name (routes.go).
var redriveTarget = bodyNamesOf(func(r *redriveapi.StartRequest) []*string { return []*string{&r.Target} })

func (q redriveBackend) Read(ctx context.Context, topic string, partition int32, from int64, maxBytes int) ([]redriveapi.Record, error) {
	recs, err := queueBackend(q).Read(ctx, queueapi.TP{Topic: topic, Partition: partition}, from, maxBytes)
	if err != nil {
		return nil, err
	}
	out := make([]redriveapi.Record, len(recs))
	for i, r := range recs {
		out[i] = redriveapi.Record{Offset: r.Offset, TimestampMs: r.TimestampMs, Key: r.Key, Value: r.Value, Headers: r.Headers, MessageID: r.MessageID}
	}
	return out, nil
}

// Produce writes a redriven copy (produceCopy); a copy refused for good
// (a 4xx: a reference that cannot be claimed, a record too large) fails
// the job rather than being tried again forever.
func (q redriveBackend) Produce(ctx context.Context, topic string, partition int32, rec redriveapi.Record) (int64, error) {
	off, err := q.b.produceCopy(ctx, topic, partition, queueapi.Record{Offset: rec.Offset, TimestampMs: rec.TimestampMs,
		Key: rec.Key, Value: rec.Value, Headers: rec.Headers, MessageID: rec.MessageID})
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < http.StatusInternalServerError {
		err = fmt.Errorf("%w: %w", redriveapi.ErrRefused, err)
	}
	return off, err
}

func (q redriveBackend) Bounds(ctx context.Context, topic string, partition int32) (redriveapi.Bounds, error) {
	t := q.b.LookupTopic(topic)
	if t == nil {
		return redriveapi.Bounds{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, topic)
	}
	o, err := q.b.partitionOffsetsOf(ctx, t, partition, internalOffsetsRequest{To: "latest"})
	return redriveapi.Bounds{Start: o.LogStart, HW: o.HighWatermark, End: o.LogEnd}, err
}

func (q redriveBackend) Partitions(topic string) (int32, bool) {
	t := q.b.LookupTopic(topic)
	if t == nil {
		return 0, false
	}
	return int32(len(t.States)), true
}

func (q redriveBackend) Decode(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSON(w, r, v)
}

func (q redriveBackend) WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func (q redriveBackend) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var re *redriveapi.Error
	if errors.As(err, &re) {
		err = &APIError{Status: re.Status, Code: re.Code, Message: re.Message}
	}
	q.b.writeError(w, r, err)
}

func (q redriveBackend) Show(r *http.Request, internal string) (string, bool) {
	return scopeFrom(r.Context()).show(internal)
}

func (q redriveBackend) Tenant(internal string) string {
	tenant, _ := node.SplitName(internal)
	return tenant
}

func (q redriveBackend) Allowed(r *http.Request, op string, topic string) error {
	if !q.b.sec.Enabled() {
		return nil
	}
	id, ok := auth.IdentityFrom(r.Context())
	if !ok {
		return &APIError{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the request was not authenticated"}
	}
	aop := acl.OpDescribe
	if op == "read" {
		aop = acl.OpRead
	}
	name := aclName(topic)
	if d := q.b.sec.Authorize(id, clientHost(r), aop, acl.ResourceTopic, name); !d.Allowed {
		return forbidden(id, aop, acl.ResourceTopic, name, d.Reason)
	}
	return nil
}
