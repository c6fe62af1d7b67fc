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

	"github.com/sluice-mq/sluice/broker/controller"
	"github.com/sluice-mq/sluice/broker/coordinator"
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

	ln        net.Listener // the client Kafka listener; bound by Listen
	advertise string       // host:port clients are told; set by Listen
	ib        interBroker  // the inter-broker listener (interbroker.go)
	mem       *requestMemory

	conns     sync.WaitGroup
	connMu    sync.Mutex
	openConns map[net.Conn]struct{} // guarded by connMu
}

// New returns the Kafka front end of the broker whose state is n.
func New(n *node.Node, cluster Cluster, coord *coordinator.Coordinator) *Server {
	return &Server{
		Node:      n,
		Cluster:   cluster,
		coord:     coord,
		mem:       newRequestMemory(n.Cfg.QueuedMaxRequestBytes, n.M.RequestMem),
		openConns: make(map[net.Conn]struct{}),
	}
}

// Listen binds the client listener and the inter-broker listener, and
// settles the addresses each advertises.
func (b *Server) Listen() error {
	ln, err := net.Listen("tcp", b.Cfg.KafkaListen)
	if err != nil {
		return fmt.Errorf("kafka listener: %w", err)
	}
	b.ln = ln
	b.advertise = b.Cfg.KafkaAdvertise
	if b.advertise == b.Cfg.KafkaListen {
		b.advertise = ln.Addr().String()
	}
	if err := b.listenInterBroker(); err != nil {
		_ = ln.Close()
		return fmt.Errorf("inter-broker listener: %w", err)
	}
	return nil
}

// Serve accepts client connections until the listener closes.
func (b *Server) Serve(ctx context.Context) error { return b.serveKafka(ctx, b.mem) }

// ServeInterBroker accepts the other brokers' connections until the
// listener closes; their HTTP ones go to InterBrokerHTTP.
func (b *Server) ServeInterBroker(ctx context.Context) error { return b.serveInterBroker(ctx, b.mem) }

// CloseListeners stops accepting connections.
func (b *Server) CloseListeners() {
	if err := b.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.Logger.Warn().Err(err).Msg("kafka listener close")
	}
	if err := b.ib.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.Logger.Warn().Err(err).Msg("inter-broker listener close")
	}
}

// CloseConns closes every open connection so their goroutines end.
func (b *Server) CloseConns() { b.closeConns() }

// Wait returns once every connection's goroutine has ended.
func (b *Server) Wait() { b.conns.Wait() }

// Addr is the bound client listener's address ("" before Listen).
func (b *Server) Addr() string {
	if b == nil || b.ln == nil {
		return ""
	}
	return b.ln.Addr().String()
}

// Advertise is the host:port clients are told.
func (b *Server) Advertise() string { return b.advertise }

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
