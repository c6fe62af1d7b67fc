package kafka

// This file owns the Server: the Kafka protocol front end of one broker,
// over its Node (broker/node), the group coordinator (broker/coordinator)
// and what it needs of the cluster (Cluster, implemented by the broker
// package).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/kafka/frames"
	"github.com/sluice-mq/sluice/broker/kafka/netconn"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// Cluster is what the Kafka front end needs of the cluster around this
// broker.
type Cluster interface {
	// Brokers is the live brokers (this one included once registered).
	Brokers() []meta.BrokerInfo
	// ControllerID is the controller's node id, -1 when unknown.
	ControllerID() int32
	// ReportedInSync is the in-sync set of a partition as its leader
	// published it, restricted to live brokers.
	ReportedInSync(st meta.PartitionState, live map[int32]bool) []int32
	// PlacementBrokers are the brokers new partitions may be placed on.
	PlacementBrokers() []controller.Broker
	// GroupCoordinator is the broker that coordinates a group.
	GroupCoordinator(groupID string) meta.BrokerInfo
}

// Server serves Kafka connections.
type Server struct {
	*node.Node
	Cluster
	coord *coordinator.Coordinator

	listeners []*kafkaListener // the client listeners (listeners.go); bound by Listen
	ib        interBroker      // the inter-broker listener (interbroker.go)
	mem       *frames.Memory

	// The pipeline's dependencies (pipeline.go), fixed by New's options.
	credentials auth.CredentialLookup // SASL logins; nil: node.Config's SASLCredentials
	authorizer  Authorizer
	admitter    Admitter
	certTenant  func(user string) (tenant string, ok bool) // tenant of a client-certificate user
	identify    func(p auth.Principal) auth.Identity       // the role of an authenticated principal; nil: ordinary
	failDelay   *auth.FailureDelay
	now         func() time.Time

	conns     sync.WaitGroup
	connMu    sync.Mutex
	openConns map[net.Conn]struct{} // guarded by connMu
}

// Option sets one of the Server's dependencies.
type Option func(*Server)

// WithCredentials is where SASL logins find users' SCRAM credentials (the
// broker's cache of etcd); it wins over node.Config's SASLCredentials.
func WithCredentials(lookup auth.CredentialLookup) Option {
	return func(b *Server) { b.credentials = lookup }
}

// WithIdentities gives each authenticated principal its identity: its
// role (a super user is not scoped to a tenant's names; a tenant admin may
// manage its tenant's ACLs and users).
func WithIdentities(fn func(p auth.Principal) auth.Identity) Option {
	return func(b *Server) { b.identify = fn }
}

// WithAuthorizer sets the authorise stage's decider; without it every
// operation is allowed (AllowAll, the development default).
func WithAuthorizer(a Authorizer) Option { return func(b *Server) { b.authorizer = a } }

// WithAdmitter sets the admit stage (quotas); without it every request is
// admitted.
func WithAdmitter(a Admitter) Option { return func(b *Server) { b.admitter = a } }

// WithCertTenant names the tenant of a user authenticated by a client
// certificate; ok false closes the connection. Without it such users are
// in auth.DefaultTenant.
func WithCertTenant(fn func(user string) (tenant string, ok bool)) Option {
	return func(b *Server) { b.certTenant = fn }
}

// WithFailureDelay shares a failed-authentication delay table (per client
// IP) with other front ends; without it the Server keeps its own.
func WithFailureDelay(d *auth.FailureDelay) Option { return func(b *Server) { b.failDelay = d } }

// WithClock replaces time.Now for SASL session lifetimes.
func WithClock(now func() time.Time) Option { return func(b *Server) { b.now = now } }

// New returns the Kafka front end of the broker whose state is n.
func New(n *node.Node, cluster Cluster, coord *coordinator.Coordinator, opts ...Option) *Server {
	b := &Server{
		Node:       n,
		Cluster:    cluster,
		coord:      coord,
		mem:        frames.NewMemory(n.Cfg.QueuedMaxRequestBytes, n.M.RequestMem),
		openConns:  make(map[net.Conn]struct{}),
		authorizer: AllowAll{},
		admitter:   AdmitAll{},
		now:        time.Now,
	}
	for _, o := range opts {
		o(b)
	}
	if b.failDelay == nil {
		b.failDelay = auth.NewFailureDelay(auth.FailureDelayConfig{Now: b.now})
	}
	return b
}

// Listen binds the client listeners and the inter-broker listener, and
// settles the addresses each advertises.
func (b *Server) Listen() error {
	if err := b.listenClients(); err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	if err := b.listenInterBroker(); err != nil {
		for _, kl := range b.listeners {
			_ = kl.ln.Close() // undoing a failed Listen
		}
		return fmt.Errorf("inter-broker listener: %w", err)
	}
	return nil
}

// refusalReasons names a refused connection as the broker's metrics label
// it (sluice_connections_refused_total{reason}).
var refusalReasons = netconn.Reasons{MaxConnections: node.RefusedMaxConnections, MaxPerIP: node.RefusedMaxPerIP}

// Serve accepts client connections on every client listener until they
// close.
func (b *Server) Serve(ctx context.Context) error {
	limiter := netconn.NewLimiter(b.Cfg.MaxConnections, b.Cfg.MaxConnectionsPerIP, refusalReasons)
	errc := make(chan error, len(b.listeners))
	for _, kl := range b.listeners {
		go func() { errc <- b.serveKafka(ctx, kl, limiter, b.mem) }()
	}
	var first error
	for range b.listeners {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ServeInterBroker accepts the other brokers' connections until the
// listener closes; their HTTP ones go to InterBrokerHTTP.
func (b *Server) ServeInterBroker(ctx context.Context) error { return b.serveInterBroker(ctx, b.mem) }

// CloseListeners stops accepting connections.
func (b *Server) CloseListeners() {
	for _, kl := range b.listeners {
		if err := kl.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			b.Logger.Warn().Err(err).Str("listener", kl.Name).Msg("kafka listener close")
		}
	}
	if err := b.ib.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.Logger.Warn().Err(err).Msg("inter-broker listener close")
	}
}

// CloseConns closes every open connection so their goroutines end.
func (b *Server) CloseConns() { b.closeConns() }

// Wait returns once every connection's goroutine has ended.
func (b *Server) Wait() { b.conns.Wait() }

// Addr is the bound address of the first client listener ("" before
// Listen).
func (b *Server) Addr() string {
	if b == nil || len(b.listeners) == 0 {
		return ""
	}
	return b.listeners[0].ln.Addr().String()
}

// Advertise is the host:port clients are told for the first client
// listener (meta.BrokerInfo.Kafka).
func (b *Server) Advertise() string {
	if len(b.listeners) == 0 {
		return ""
	}
	return b.listeners[0].advertise
}

// InterBrokerAddr is the bound inter-broker listener's address.
func (b *Server) InterBrokerAddr() string { return b.ib.ln.Addr().String() }

// InterBrokerAdvertise is the inter-broker address registered for the
// other brokers.
func (b *Server) InterBrokerAdvertise() string { return b.ib.advertise }

// InterBrokerHTTP is the listener of the inter-broker port's HTTP
// connections, for the broker's internal HTTP server.
func (b *Server) InterBrokerHTTP() net.Listener { return b.ib.httpConns }

// FetchesRefused reports how many replica fetches (or partitions of one)
// were refused for reason.
func (b *Server) FetchesRefused(reason string) uint64 { return b.ib.fetchesRefused(reason) }
