// Package adminapi serves the HTTP API's operator routes, for super users:
//
//	POST /v1/admin/partitions/{topic}/{partition}/elections:unclean
//	     202: the controller forces an unclean election of the partition
//	     404: no such topic or partition; 503: no controller reachable (retry)
//	POST   /v1/admin/brokers/{id}/drain   200: the broker's drain mark is set
//	DELETE /v1/admin/brokers/{id}/drain   200: the mark is deleted (undrain)
//	POST /v1/admin/elections:preferred {"topic": optional}
//	     202: the controller moves leadership back to the preferred replicas
//	     now (of one topic, or of every partition)
//	POST   /v1/admin/partitions/{topic}/{partition}/reassign {"replicas":[…]}
//	       202: the reassignment is stored; the controller carries it out
//	       400: a target that breaks a rule; 404: no such partition
//	DELETE /v1/admin/partitions/{topic}/{partition}/reassign
//	       202: cancelled: back to the original replicas; 404: none pending
//	GET    /v1/admin/reassignments   200: the pending ones, with their step
//
// An unclean election is the operator's way out of a partition that stays
// offline because too many of its replicas lost their disks: the most
// complete log among the replicas that answer the next fence becomes the
// leader's, and whatever only the lost replicas held is gone. A drain
// (broker/cluster/drain.go) moves the leaderships and group coordination
// off a broker before an operator stops it; GET /v1/brokers shows each
// broker's draining flag and how many partitions it leads, which is what
// `sluicectl broker drain` waits on. Any broker takes an election request
// and forwards it to the controller (Backend.ForwardToController).
//
// Invariant: nothing here elects by itself; it only asks the controller's
// elector loop, which owns each partition's election core, or writes a
// drain mark the elector reads.
package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/httpapi/apierr"
	"github.com/sluice-mq/sluice/broker/node"
)

// wait bounds the wait for the elector loop or etcd to take a request.
const wait = 5 * time.Second

// maxBody bounds a request body of these routes.
const maxBody = 64 << 10

// Backend is what the routes need of the broker.
type Backend interface {
	// Topic is a topic's id and partition count; ok false if unknown.
	Topic(name string) (id [16]byte, partitions int, ok bool)
	// KnownBroker reports whether id is live or a replica of a partition.
	KnownBroker(id int32) bool
	ForceUnclean(ctx context.Context, key node.PartitionKey) (handled bool, err error)
	PreferredElection(ctx context.Context, topicID [16]byte) (n int, handled bool, err error)
	SetDraining(ctx context.Context, id int32, on bool) error
	// ForwardToController proxies the request to the controller, once.
	ForwardToController(w http.ResponseWriter, r *http.Request)
	// DecodeJSON reads a JSON body strictly (a 4xx error when it cannot).
	DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error
	WriteError(w http.ResponseWriter, r *http.Request, err error)
	NodeID() int32
}

// API serves the routes over a Backend.
type API struct {
	b   Backend
	r   Reassigner // nil: the reassignment routes answer 501 (reassign.go)
	log zerolog.Logger
}

// New returns the API over b, logging with log.
func New(b Backend, log zerolog.Logger) *API { return &API{b: b, log: log} }

// Mux is the part of http.ServeMux the routes are registered on.
type Mux interface {
	HandleFunc(pattern string, h http.HandlerFunc)
}

// Register adds the routes to mux.
func (a *API) Register(mux Mux) {
	mux.HandleFunc("POST /v1/admin/partitions/{topic}/{partition}/elections:unclean", a.electUnclean)
	mux.HandleFunc("POST /v1/admin/brokers/{id}/drain", a.drain)
	mux.HandleFunc("DELETE /v1/admin/brokers/{id}/drain", a.drain)
	mux.HandleFunc("POST /v1/admin/elections:preferred", a.electPreferred)
	mux.HandleFunc("POST /v1/admin/partitions/{topic}/{partition}/reassign", a.reassign)
	mux.HandleFunc("DELETE /v1/admin/partitions/{topic}/{partition}/reassign", a.reassign)
	mux.HandleFunc("GET /v1/admin/reassignments", a.listReassignments)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func unavailable(code, format string, args ...any) *apierr.Error {
	return apierr.Errorf(http.StatusServiceUnavailable, code, format, args...)
}

// uncleanResponse is the 202 answer of an unclean election.
type uncleanResponse struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Controller int32  `json:"controller"`
	Message    string `json:"message"`
}

func (a *API) electUnclean(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || n < 0 {
		a.b.WriteError(w, r, apierr.BadRequest("partition %q is not a partition number", r.PathValue("partition")))
		return
	}
	id, parts, ok := a.b.Topic(name)
	if !ok || int(n) >= parts {
		a.b.WriteError(w, r, apierr.Errorf(http.StatusNotFound, "unknown_topic_or_partition", "no partition %s-%d", name, n))
		return
	}
	key := node.PartitionKey{TopicID: id, Partition: int32(n)}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	handled, err := a.b.ForceUnclean(ctx, key)
	switch {
	case !handled:
		a.b.ForwardToController(w, r)
		return
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		a.b.WriteError(w, r, unavailable("controller_busy", "the elector did not answer in time; retry"))
		return
	case err != nil:
		a.b.WriteError(w, r, unavailable("unknown_to_controller", "partition %s-%d: %v; retry", name, key.Partition, err))
		return
	}
	a.log.Warn().Str("topic", name).Int32("partition", key.Partition).Str("remote", r.RemoteAddr).
		Msg("unclean election requested over the admin API")
	writeJSON(w, http.StatusAccepted, uncleanResponse{Topic: name, Partition: key.Partition, Controller: a.b.NodeID(),
		Message: "unclean election forced: the next fence round elects the most complete log among the replicas that answer"})
}

// drainResponse is the answer of a drain or undrain.
type drainResponse struct {
	Broker   int32  `json:"broker"`
	Draining bool   `json:"draining"`
	Message  string `json:"message"`
}

func (a *API) drain(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id < 0 {
		a.b.WriteError(w, r, apierr.BadRequest("broker %q is not a node id", r.PathValue("id")))
		return
	}
	on := r.Method == http.MethodPost
	if on && !a.b.KnownBroker(int32(id)) {
		a.b.WriteError(w, r, apierr.Errorf(http.StatusNotFound, "unknown_broker", "broker %d is neither live nor a replica of any partition", id))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	if err := a.b.SetDraining(ctx, int32(id), on); err != nil {
		a.b.WriteError(w, r, unavailable("metadata_unavailable", "write the drain mark of broker %d: %v; retry", id, err))
		return
	}
	msg := "drain mark deleted: broker %d takes part in elections and group placement again"
	if on {
		msg = "drain mark set: within a few seconds broker %d leads no partition another replica can take and coordinates no group; GET /v1/brokers shows its leaders"
	}
	a.log.Info().Int64("broker", id).Bool("draining", on).Str("remote", r.RemoteAddr).Msg("drain mark changed over the admin API")
	writeJSON(w, http.StatusOK, drainResponse{Broker: int32(id), Draining: on, Message: fmt.Sprintf(msg, id)})
}

// preferredResponse is the 202 answer of a preferred election.
type preferredResponse struct {
	Partitions int    `json:"partitions"`
	Controller int32  `json:"controller"`
	Message    string `json:"message"`
}

func (a *API) electPreferred(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Topic string `json:"topic"`
	}
	// The body is kept to be sent on when this broker forwards the
	// request to the controller.
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(raw) > maxBody {
		a.b.WriteError(w, r, apierr.BadRequest("the request body is unreadable or over %d bytes", maxBody))
		return
	}
	body := func() { r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw)) }
	if len(raw) > 0 {
		body()
		if err := a.b.DecodeJSON(w, r, &req); err != nil {
			a.b.WriteError(w, r, err)
			return
		}
	}
	var topicID [16]byte
	if req.Topic != "" {
		id, _, ok := a.b.Topic(req.Topic)
		if !ok {
			a.b.WriteError(w, r, apierr.Errorf(http.StatusNotFound, "unknown_topic_or_partition", "no topic %q", req.Topic))
			return
		}
		topicID = id
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	n, handled, err := a.b.PreferredElection(ctx, topicID)
	switch {
	case !handled:
		body()
		a.b.ForwardToController(w, r)
		return
	case err != nil:
		a.b.WriteError(w, r, unavailable("controller_busy", "the elector did not answer in time; retry"))
		return
	}
	writeJSON(w, http.StatusAccepted, preferredResponse{Partitions: n, Controller: a.b.NodeID(),
		Message: "each partition not led by its preferred replica starts an election now; the preferred replica wins if it is live, caught up and not draining"})
}
