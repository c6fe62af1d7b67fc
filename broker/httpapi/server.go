package httpapi

// This file owns the Server: the HTTP front end of one broker (the JSON
// API, its OpenAPI document, health, readiness, metrics and profiles, and
// the internal routes the other brokers call), over its Node, the group
// coordinator and what it needs of the cluster (Cluster, implemented by the
// broker package).

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/httpapi/lagstat"
	"github.com/sluice-mq/sluice/broker/httpapi/objapi"
	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/httpapi/redriveapi"
	"github.com/sluice-mq/sluice/broker/listener"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// Cluster is what the HTTP front end needs of the cluster around this
// broker.
type Cluster interface {
	// Brokers is the live brokers (this one included once registered).
	Brokers() []meta.BrokerInfo
	// ControllerID is the controller's node id, -1 when unknown.
	ControllerID() int32
	// ReportedInSync is the in-sync set of a partition as its leader
	// published it, restricted to live brokers.
	ReportedInSync(st meta.PartitionState, live map[int32]bool) []int32
	// GroupCoordinator is the broker that coordinates a group.
	GroupCoordinator(groupID string) meta.BrokerInfo
	// InterBrokerAddr is where to dial a live broker's inter-broker
	// listener, "" when it is not live.
	InterBrokerAddr(id int32) string
	// ForceUnclean asks this broker's elector to force an unclean
	// election; handled is false when this broker is not the controller.
	ForceUnclean(ctx context.Context, key node.PartitionKey) (handled bool, err error)
	// PreferredElection asks this broker's elector to move leadership back
	// to the preferred replicas now; handled is false when this broker is
	// not the controller.
	PreferredElection(ctx context.Context, topicID [16]byte) (n int, handled bool, err error)
	// Draining is the node ids with a drain mark, sorted.
	Draining() []int32
	// Serving reports whether the broker serves Kafka and HTTP.
	Serving() bool
	// LocalInterBrokerAddr is this broker's own bound inter-broker address.
	LocalInterBrokerAddr() string
}

// Server serves the broker's HTTP API.
type Server struct {
	*node.Node
	Cluster
	coord *coordinator.Coordinator
	sec   Security            // the pipeline's authentication and authorisation (pipeline.go)
	admit Admitter            // the pipeline's admit stage; set before Handler
	tls   *listener.TLSSource // the public listener's TLS, nil without; set by Listen
	// peerTransport reaches the other brokers' public listeners when a
	// group or election request is forwarded (https when tls is set).
	peerTransport http.RoundTripper

	objects objapi.Service // large payloads (objapi); nil: its routes answer 501
	console ConsoleMount   // the operator console at /ui (console.go); nil: 404

	fwd       forwarder           // clients of the other brokers' inter-broker listeners (forward.go)
	lagRates  lagstat.Rates       // commit-rate samples for consumer lag
	rrPublish atomic.Uint64       // round-robin partition choice for unkeyed HTTP messages
	queue     *queueapi.API       // the queue API: fetch without a partition, ack, nack (queue.go)
	redrive   *redriveapi.Manager // dead-letter redrive jobs (redrive.go)
}

// New returns the HTTP front end of the broker whose state is n. sec
// authenticates and authorises its requests; nil means security off
// (anonymous, everything allowed).
func New(n *node.Node, cluster Cluster, coord *coordinator.Coordinator, sec Security) *Server {
	if sec == nil {
		sec = openSecurity{}
	}
	s := &Server{Node: n, Cluster: cluster, coord: coord, sec: sec, admit: admitAll{}}
	s.queue = queueapi.New(queueBackend{s}, n.Logger)
	s.redrive = redriveapi.New(redriveBackend{s}, n.Store, n.Cfg.NodeID, n.Logger)
	return s
}

// SetLargeObjects serves the large-payload API (objapi) with svc; call it
// before Handler.
func (b *Server) SetLargeObjects(svc objapi.Service) { b.objects = svc }

// SetAdmitter replaces the admit stage (quotas); call it before Handler.
func (b *Server) SetAdmitter(a Admitter) { b.admit = a }

// PartitionRange is the log start and high watermark of a partition at its
// leader, which may be another broker.
func (b *Server) PartitionRange(ctx context.Context, t *node.Topic, index int32) (logStart, hw int64, err error) {
	pos, err := b.partitionOffsetsOf(ctx, t, index, internalOffsetsRequest{To: "latest"})
	return pos.LogStart, pos.HighWatermark, err
}

// Handler is the public HTTP listener's handler.
func (b *Server) Handler() http.Handler { return b.httpHandler() }

// RegisterInternal adds the routes the other brokers call to the
// inter-broker listener's mux: forwarding and listings.
func (b *Server) RegisterInternal(mux *http.ServeMux) {
	b.registerInternalAPI(mux)     // forward_internal.go
	b.registerListingInternal(mux) // http_listings_internal.go
}

// Close releases the clients of the other brokers.
func (b *Server) Close() { b.closeForwarder() }
