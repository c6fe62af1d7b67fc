package kafka

// This file owns the inter-broker listener (--inter-broker-listen, or the
// listener of --listeners that --inter-broker-listener names): the one
// port on which a broker serves the other brokers, and the checks of what
// arrives there. It carries two protocols, told apart by a connection's
// first byte: Kafka (a request frame starts with its 4-byte big-endian
// size, whose first byte is 0 below 16 MiB) for followers' replica fetches,
// and HTTP (an ASCII method) for the election envelopes of
// replication_transport.go (POST /internal/v1/replication). Its address is
// registered in etcd (meta.BrokerInfo.InterBroker) and never named to
// clients: Metadata gives the Kafka listener's.
//
// Invariant: a replica fetch reaches a partition's core only over this
// listener, from a broker whose id and current registration (its
// incarnation, sent as the KIP-903 broker epoch) the live-broker view
// holds, and only for partitions it is an assigned replica of. The client
// Kafka listener answers a replica fetch CLUSTER_AUTHORIZATION_FAILED
// without touching a core, and the public HTTP listener has no /internal/
// route (404).
// Invariant: the envelope route exists only on this listener's HTTP server.
//
// Invariant: under --inter-broker-security-protocol SSL a connection is
// served (its first byte read) only after a TLS handshake that verified a
// client certificate whose principal node.Config.InterBrokerPeerAllowed
// accepts; any other is closed, counted (sluice_inter_broker_refused_total)
// and logged, before any Kafka or HTTP byte is read.
//
// Under PLAINTEXT (the default) nothing here authenticates a peer: anyone
// who can reach this port can still claim to be a broker it names (with
// that broker's incarnation). Keep the port on the brokers' network.
//
// Goroutines: the accept loop (serveInterBroker, started by Run) starts one
// goroutine per connection, counted in Broker.conns, which reads the first
// byte (at most interBrokerHandshake) and then serves Kafka on it (conn.go)
// or hands it to the listener's HTTP server through httpConns. A
// connection is in Broker.openConns until it is handed over, so closeConns
// ends a silent one at shutdown.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/kafka/frames"
	"github.com/sluice-mq/sluice/broker/kafka/netconn"
	"github.com/sluice-mq/sluice/broker/listener"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// interBrokerHandshake bounds the wait for a new connection's first byte.
	interBrokerHandshake = 10 * time.Second
	// interBrokerMaxConns bounds the listener's open connections, apart
	// from the client listener's: a peer needs a few (one fetcher per
	// leader, a couple of pooled HTTP connections), and clients flooding
	// the Kafka port cannot take them.
	interBrokerMaxConns = 1024
)

// Reasons a replica fetch is refused, as metric labels.
const (
	RefuseClientListener = "client_listener"    // a replica fetch on the client Kafka listener
	RefuseNoReplicaState = "no_replica_state"   // a fetch on the inter-broker listener naming no replica
	RefuseBrokerEpoch    = "stale_broker_epoch" // the id or its incarnation is not in the live view
	RefuseNotReplica     = "not_replica"        // a partition the fetcher is no assigned replica of
)

var fetchRefusals = [...]string{RefuseClientListener, RefuseNoReplicaState, RefuseBrokerEpoch, RefuseNotReplica}

// Reasons an inter-broker connection is refused under SSL, as metric labels.
const (
	RefuseTLSHandshake = "tls_handshake" // no client certificate, one the CA did not sign, or no TLS at all
	RefusePrincipal    = "principal"     // a verified certificate of a principal that is not a broker's
)

var connRefusals = [...]string{RefuseTLSHandshake, RefusePrincipal}

// interBroker is the Broker's state for the inter-broker listener.
type interBroker struct {
	ln           net.Listener   // bound in Run before the registration
	advertise    string         // registered for the other brokers; set with ln
	httpConns    *netconn.Queue // connections for the HTTP server
	refusals     zerolog.Logger
	refused      [len(fetchRefusals)]atomic.Uint64 // by index in fetchRefusals
	connsRefused [len(connRefusals)]atomic.Uint64  // by index in connRefusals
	metrics      sync.Once
}

// interBrokerAPIs is the dispatch table of the inter-broker listener: what
// a follower's fetcher and another broker's forwarding producer send
// (forward.go), and nothing else. Fetch starts at v15, the
// first with ReplicaState, which carries the broker epoch every replica
// fetch must present. Filled once in init, never changed.
var interBrokerAPIs map[int16]api

func init() {
	interBrokerAPIs = map[int16]api{
		1:              {min: 15, max: 15, handle: handleFetch},
		0:              apiTable()[0],              // Produce: forwarded HTTP publishes (forward.go)
		3:              apiTable()[3],              // Metadata: names the brokers' inter-broker addresses
		22:             apiTable()[22],             // InitProducerId: the forwarding producer's id
		apiVersionsKey: apiTable()[apiVersionsKey], // not apis: the order of init functions is not ours to rely on
	}
}

// apisOf is the dispatch table of the listener req arrived on.
func apisOf(req *request) map[int16]api {
	if req.interBroker {
		return interBrokerAPIs
	}
	return apis
}

// listenInterBroker binds the listener (--inter-broker-listen, or the
// listener --inter-broker-listener names) and settles the address the
// other brokers are given: the configured one (--inter-broker-advertise,
// or the named listener's --advertised-listeners entry), or the bound
// address (with the Kafka advertised host when bound to all interfaces).
func (b *Server) listenInterBroker() error {
	bind := b.Cfg.InterBrokerBind()
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return err
	}
	b.ib.ln = ln
	b.ib.advertise = b.Cfg.InterBrokerAdvertised()
	if b.ib.advertise == "" || b.ib.advertise == bind {
		b.ib.advertise = node.AdvertisedHTTP(ln.Addr().String(), b.Advertise())
	}
	b.ib.httpConns = netconn.NewQueue(ln.Addr())
	b.ib.refusals = b.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second})
	b.registerInterBrokerMetrics()
	return nil
}

// serveInterBroker accepts connections until the listener closes.
func (b *Server) serveInterBroker(ctx context.Context, mem *frames.Memory) error {
	limiter := netconn.NewLimiter(interBrokerMaxConns, 0, refusalReasons)
	for {
		nc, err := b.ib.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			b.Logger.Warn().Err(err).Msg("inter-broker accept")
			continue
		}
		ip := netconn.RemoteIP(nc.RemoteAddr())
		if reason := limiter.Admit(ip); reason != "" {
			_ = nc.Close() // refused before any byte is read
			b.ib.refusals.Warn().Str("remote", nc.RemoteAddr().String()).Str("reason", reason).
				Msg("refused inter-broker connection (logged at most 5 times per 10s)")
			continue
		}
		b.trackConn(nc, true)
		b.conns.Add(1)
		go func() {
			defer b.conns.Done()
			b.serveInterBrokerConn(ctx, nc, mem, func() { limiter.Leave(ip) })
		}()
	}
}

// serveInterBrokerConn tells the connection's protocol by its first byte
// and serves it; leave runs once the connection is closed.
func (b *Server) serveInterBrokerConn(ctx context.Context, nc net.Conn, mem *frames.Memory, leave func()) {
	raw := nc // what closeConns holds; closing it ends a TLS conn over it too
	if b.InterBrokerTLS != nil {
		tc, ok := b.authenticatePeer(ctx, nc)
		if !ok {
			_ = nc.Close()
			b.trackConn(raw, false)
			leave()
			return
		}
		nc = tc
	}
	br := bufio.NewReaderSize(nc, 16)
	_ = nc.SetReadDeadline(time.Now().Add(interBrokerHandshake))
	first, err := br.Peek(1)
	_ = nc.SetReadDeadline(time.Time{})
	pc := &netconn.Peeked{Conn: nc, R: br}
	switch {
	case err != nil:
		_ = nc.Close() // silent, gone, or closed at shutdown: nothing to serve
	case first[0] == 0:
		b.serveConn(ctx, pc, mem, nil)
	default:
		b.trackConn(raw, false)
		hc := &netconn.CloseHook{Conn: pc, OnClose: leave}
		if !b.ib.httpConns.Put(hc) {
			_ = hc.Close()
		}
		return
	}
	b.trackConn(raw, false)
	leave()
}

// authenticatePeer runs the TLS handshake of an inter-broker connection
// (the source requires a client certificate that chains to the CA) and
// checks the certificate's principal. It returns the TLS conn, or false
// after counting and logging the refusal; the caller closes nc.
func (b *Server) authenticatePeer(ctx context.Context, nc net.Conn) (*tls.Conn, bool) {
	tc := tls.Server(nc, b.InterBrokerTLS.ServerConfig())
	hctx, cancel := context.WithTimeout(ctx, interBrokerHandshake)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			b.ib.refuseConn(RefuseTLSHandshake, nc.RemoteAddr().String(), "", err)
		}
		return nil, false
	}
	user, ok := listener.PeerPrincipal(tc.ConnectionState())
	principal := "User:" + user
	if !ok || !b.Cfg.InterBrokerPeerAllowed(principal) {
		b.ib.refuseConn(RefusePrincipal, nc.RemoteAddr().String(), principal, nil)
		return nil, false
	}
	return tc, true
}

// refuseConn counts and logs (sampled) a refused inter-broker connection.
func (ib *interBroker) refuseConn(reason, remote, principal string, err error) {
	if i := slices.Index(connRefusals[:], reason); i >= 0 {
		ib.connsRefused[i].Add(1)
	}
	ev := ib.refusals.Warn().Str("reason", reason).Str("remote", remote)
	if principal != "" {
		ev = ev.Str("principal", principal)
	}
	ev.Err(err).Msg("inter-broker connection refused (logged at most 5 times per 10s)")
}

// trackConn adds nc to, or removes it from, the connections closeConns ends.
func (b *Server) trackConn(nc net.Conn, open bool) {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	if open {
		b.openConns[nc] = struct{}{}
	} else {
		delete(b.openConns, nc)
	}
}

// fetchReplica is the broker a Fetch names as its sender and the broker
// epoch it presents (-1: none): ReplicaState from v15 (KIP-903), the
// ReplicaID field before.
func fetchReplica(r *kmsg.FetchRequest) (id int32, epoch int64) {
	if r.Version >= 15 {
		return r.ReplicaState.ID, r.ReplicaState.Epoch
	}
	return r.ReplicaID, -1
}

// authorizeReplicaFetch checks who sends a replica fetch: it returns the
// sending broker's id, or the whole request's refusal. A replica fetch is
// served only on the inter-broker listener (Kafka answers one from a client
// without the cluster-action right with an authorization error; the
// cluster code names the missing right exactly), and only to a broker the
// live view holds with the incarnation it presents: an older one is a
// previous run of that broker, whose fetches must not count as the current
// one's durable end.
func (b *Server) authorizeReplicaFetch(req *request, r *kmsg.FetchRequest) (int32, kmsg.Response) {
	id, epoch := fetchReplica(r)
	refuse := func(reason string, code int16) (int32, kmsg.Response) {
		b.ib.countRefusal(reason)
		b.ib.refusals.Warn().Str("reason", reason).Str("remote", req.remoteHost).Str("client", req.clientID).
			Int32("replica", id).Int64("broker_epoch", epoch).
			Msg("replica fetch refused (logged at most 5 times per 10s)")
		return 0, refusedFetch(req, r, code)
	}
	switch {
	case !req.interBroker:
		return refuse(RefuseClientListener, kerr.ClusterAuthorizationFailed.Code)
	case id < 0:
		return refuse(RefuseNoReplicaState, kerr.ClusterAuthorizationFailed.Code)
	}
	for _, bi := range b.Brokers() {
		if bi.NodeID == id && bi.Incarnation == epoch && id != b.Cfg.NodeID {
			return id, nil
		}
	}
	// Not live, another incarnation, or this broker itself. A follower
	// that registered again is refused until this broker's view catches
	// up; its fetcher retries after a tick.
	return refuse(RefuseBrokerEpoch, kerr.StaleBrokerEpoch.Code)
}

// notReplicaCode is the error for a replica fetch of partition part of t
// from broker from, when from is not one of its assigned replicas as this
// broker knows them (Kafka answers NOT_LEADER_OR_FOLLOWER), or 0. An
// unknown partition is left to the lookup that follows.
func (b *Server) notReplicaCode(t *node.Topic, part, from int32) int16 {
	if part < 0 || int(part) >= len(t.States) || slices.Contains(t.States[part].Replicas, from) {
		return 0
	}
	b.ib.countRefusal(RefuseNotReplica)
	b.ib.refusals.Warn().Str("reason", RefuseNotReplica).Str("topic", t.Meta.Name).Int32("partition", part).
		Int32("replica", from).Msg("replica fetch refused (logged at most 5 times per 10s)")
	return kerr.NotLeaderForPartition.Code
}

// refusedFetch is the answer to a fetch refused as a whole: the code at
// the top (v7+) and on every partition.
func refusedFetch(req *request, r *kmsg.FetchRequest, code int16) kmsg.Response {
	resp := newResponse(req).(*kmsg.FetchResponse)
	resp.ErrorCode = code
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (ib *interBroker) countRefusal(reason string) {
	if i := slices.Index(fetchRefusals[:], reason); i >= 0 {
		ib.refused[i].Add(1)
	}
}

// fetchesRefused reports how many replica fetches (or partitions of one,
// for RefuseNotReplica) were refused for reason.
func (ib *interBroker) fetchesRefused(reason string) uint64 {
	if i := slices.Index(fetchRefusals[:], reason); i >= 0 {
		return ib.refused[i].Load()
	}
	return 0
}

func (b *Server) registerInterBrokerMetrics() {
	b.ib.metrics.Do(func() {
		if b.M == nil {
			return
		}
		for i, reason := range fetchRefusals {
			c := prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_replica_fetches_refused_total", Help: "Replica fetches (or partitions of one) refused, by reason.",
				ConstLabels: prometheus.Labels{"reason": reason},
			}, func() float64 { return float64(b.ib.refused[i].Load()) })
			if err := b.M.Reg.Register(c); err != nil {
				b.Logger.Warn().Err(err).Msg("register inter-broker metric")
			}
		}
		for i, reason := range connRefusals {
			c := prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_inter_broker_refused_total", Help: "Inter-broker connections refused under SSL, by reason.",
				ConstLabels: prometheus.Labels{"reason": reason},
			}, func() float64 { return float64(b.ib.connsRefused[i].Load()) })
			if err := b.M.Reg.Register(c); err != nil {
				b.Logger.Warn().Err(err).Msg("register inter-broker metric")
			}
		}
	})
}
