package cluster

// This file owns the transport of election messages between brokers: the
// Fence, FenceAck, LeaderUnreachable and CaughtUp replica.Messages (never
// record data, which followers read with Kafka Fetch), wrapped in envelopes
// and carried over HTTP on the brokers' inter-broker listener
// (interbroker.go) as
//
//	POST /internal/v1/replication     body: JSON array of envelopes (≤ 1 MiB)
//	                                  204: dispatched (each one may still be
//	                                  dropped: the cores retry what matters)
//	                                  400: malformed (also: an epoch whose
//	                                  successor overflows, a fence not
//	                                  from the controller), 413: too large
//
// A receiving broker hands an envelope To replica.ControllerNode to its
// elector when it is the controller now (else drops it), and one To itself
// to its replica of the partition (deliverToPartition).
//
// Invariant: sendToController and sendToReplica never block: they are
// called from partition owner goroutines and the elector loop. Each
// destination has a bounded queue; a full queue drops the newest envelope.
// Invariant: an envelope for this broker itself is dispatched locally,
// without HTTP.
// Invariant: only the three election message types, without batches, are
// sent or accepted, so a body stays small and bounded by its count.
//
// Goroutines: one manager (startReplicationTransport, owned by the cluster
// context and clusterWG) starts a sender per live destination broker and
// stops it when the broker leaves; each sender drains its queue, batching
// what is queued into one POST. replication.mu guards queues; the
// counters are atomics.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
)

const (
	// ReplicationPath is the internal route envelopes are POSTed to.
	ReplicationPath = "/internal/v1/replication"
	// maxReplicationBody bounds one POST body.
	maxReplicationBody = 1 << 20
	// replicationQueue bounds the envelopes queued for one destination.
	replicationQueue = 1024
	// replicationBatch bounds the envelopes in one POST; an election
	// envelope encodes to well under 1 KiB, so a batch stays far below
	// maxReplicationBody.
	replicationBatch = 256
	// replicationSendTimeout bounds one POST.
	replicationSendTimeout = 2 * time.Second
	// replicationPeerPoll is how often the manager matches its senders to
	// the live brokers.
	replicationPeerPoll = 100 * time.Millisecond
	// electorInbox bounds the envelopes waiting for the elector loop.
	electorInbox = 4096
)

// Reasons an envelope is dropped, as metric labels.
const (
	dropQueueFull     = "queue_full"     // the destination's queue is full
	dropNoRoute       = "no_route"       // the destination is not live, or no controller is known
	dropSendFailed    = "send_failed"    // the POST failed or was refused
	dropNotController = "not_controller" // addressed to the controller, which this broker is not
	dropUnsupported   = "unsupported"    // not an election message
	dropMisaddressed  = "misaddressed"   // addressed to another node
	dropNoPartition   = "no_partition"   // no local replica took it
	dropElectorBusy   = "elector_busy"   // the elector's inbox is full
	dropNotReplica    = "not_replica"    // to the controller from a node not a replica of the partition
)

var dropReasons = [...]string{dropQueueFull, dropNoRoute, dropSendFailed, dropNotController,
	dropUnsupported, dropMisaddressed, dropNoPartition, dropElectorBusy, dropNotReplica}

// replication is the Broker's state for the transport and the elector
// (elector.go). Its zero value is ready to use.
type replication struct {
	mu     sync.Mutex
	queues map[int32]*peerQueue // guarded by mu: destinations with a running sender

	// elector is the running elector loop's inbox holder; nil while this
	// broker is not the controller (elector.go).
	elector atomic.Pointer[elector]

	sent      atomic.Uint64                       // envelopes POSTed successfully
	received  atomic.Uint64                       // envelopes accepted over HTTP
	drops     [len(dropReasons)]atomic.Uint64     // by index in dropReasons
	elections [len(electionResults)]atomic.Uint64 // by index in electionResults (elector.go)
	rounds    atomic.Uint64                       // election rounds started (elector.go)
	offline   atomic.Int64                        // partitions blocked by lost disks (elector.go)
	metrics   sync.Once                           // registers the counters above, once
	client    atomic.Pointer[http.Client]         // set by startReplicationTransport
}

// peerQueue is the bounded queue of one destination and its sender's stop.
type peerQueue struct {
	node   int32
	ch     chan envelope
	cancel context.CancelFunc
}

// drop counts one dropped envelope.
func (r *replication) drop(reason string) {
	for i, x := range dropReasons {
		if x == reason {
			r.drops[i].Add(1)
			return
		}
	}
}

// dropped reports how many envelopes were dropped for reason.
func (r *replication) dropped(reason string) uint64 {
	for i, x := range dropReasons {
		if x == reason {
			return r.drops[i].Load()
		}
	}
	return 0
}

// registerReplicationMetrics exports the counters in the broker's registry, once.
func (b *Cluster) registerReplicationMetrics() {
	r := &b.repl
	r.metrics.Do(func() {
		if b.M == nil {
			return
		}
		cs := []prometheus.Collector{
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_replication_messages_sent_total", Help: "Election envelopes POSTed to other brokers.",
			}, func() float64 { return float64(r.sent.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_replication_messages_received_total", Help: "Election envelopes received from other brokers.",
			}, func() float64 { return float64(r.received.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_controller_election_rounds_total", Help: "Fence rounds started by this broker as controller.",
			}, func() float64 { return float64(r.rounds.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sluice_partitions_offline_lost_disks",
				Help: "Partitions this broker, as controller, cannot elect a leader for: a quorum answers, but too few of them hold the committed log (replicas that lost their disks and have not caught up).",
			}, func() float64 { return float64(r.offline.Load()) }),
		}
		for i, reason := range dropReasons {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_replication_messages_dropped_total", Help: "Election envelopes dropped, by reason.",
				ConstLabels: prometheus.Labels{"reason": reason},
			}, func() float64 { return float64(r.drops[i].Load()) }))
		}
		for i, result := range electionResults {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "sluice_controller_elections_total", Help: "Leader elections this broker wrote (or tried to) as controller, by result.",
				ConstLabels: prometheus.Labels{"result": result},
			}, func() float64 { return float64(r.elections[i].Load()) }))
		}
		cs = append(cs, newFollowerCollector(b.Node)) // metrics_followers.go
		for _, c := range cs {
			if err := b.M.Reg.Register(c); err != nil {
				b.Logger.Warn().Err(err).Msg("register replication metric")
			}
		}
	})
}

// sendToController sends env to the controller, wherever it is. It never
// blocks; the envelope is dropped if no controller is known or its queue is
// full.
func (b *Cluster) sendToController(env envelope) {
	env.Msg.To = replica.ControllerNode
	if !replica.ElectionMessage(env.Msg) {
		b.dropEnvelope(env, dropUnsupported)
		return
	}
	switch ctrl := b.ControllerID(); {
	case ctrl < 0:
		b.dropEnvelope(env, dropNoRoute)
	case ctrl == b.Cfg.NodeID:
		b.toElector(env)
	default:
		b.enqueue(ctrl, env)
	}
}

// sendToReplica sends env to the replica on broker node. It never blocks;
// the envelope is dropped if node is not live or its queue is full.
func (b *Cluster) sendToReplica(node int32, env envelope) {
	switch {
	case !replica.ElectionMessage(env.Msg):
		b.dropEnvelope(env, dropUnsupported)
		return
	case node < 0:
		b.dropEnvelope(env, dropNoRoute)
		return
	}
	if node == b.Cfg.NodeID {
		b.dispatchEnvelope(env)
		return
	}
	b.enqueue(node, env)
}

// enqueue puts env on node's queue, or drops it.
func (b *Cluster) enqueue(node int32, env envelope) {
	b.repl.mu.Lock()
	q := b.repl.queues[node]
	b.repl.mu.Unlock()
	if q == nil {
		b.dropEnvelope(env, dropNoRoute)
		return
	}
	select {
	case q.ch <- env:
	default:
		b.dropEnvelope(env, dropQueueFull)
	}
}

func (b *Cluster) dropEnvelope(env envelope, reason string) {
	b.repl.drop(reason)
	b.Logger.Debug().Str("reason", reason).Stringer("type", env.Msg.Type).
		Int32("from", int32(env.Msg.From)).Int32("to", int32(env.Msg.To)).
		Str("topic_id", node.UUIDString(env.Key.TopicID)).Int32("partition", env.Key.Partition).
		Msg("replication message dropped")
}

// dispatchEnvelope hands an envelope that reached this broker to its
// elector or to its replica of the partition. It never blocks.
func (b *Cluster) dispatchEnvelope(env envelope) {
	switch env.Msg.To {
	case replica.ControllerNode:
		b.toElector(env)
	case replica.NodeID(b.Cfg.NodeID):
		if !b.deliverToPartition(env) {
			b.dropEnvelope(env, dropNoPartition)
		}
	default:
		b.dropEnvelope(env, dropMisaddressed)
	}
}

// toElector hands env to the elector loop if this broker is the controller.
func (b *Cluster) toElector(env envelope) {
	e := b.repl.elector.Load()
	if e == nil {
		b.dropEnvelope(env, dropNotController)
		return
	}
	select {
	case e.inbox <- env:
	default:
		b.dropEnvelope(env, dropElectorBusy)
	}
}

// HTTPReplication receives a batch of envelopes from another broker.
func (b *Cluster) HTTPReplication(w http.ResponseWriter, r *http.Request) {
	envs, err := decodeEnvelopes(w, r)
	if err != nil {
		httpapi.WriteError(b.Logger, w, r, err)
		return
	}
	b.repl.received.Add(uint64(len(envs)))
	for _, env := range envs {
		b.dispatchEnvelope(env)
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeEnvelopes reads a JSON array of election envelopes of at most
// maxReplicationBody bytes.
func decodeEnvelopes(w http.ResponseWriter, r *http.Request) ([]envelope, error) {
	envs, err := replica.DecodeEnvelopes(http.MaxBytesReader(w, r.Body, maxReplicationBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &httpapi.APIError{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
				Message: fmt.Sprintf("replication body exceeds %d bytes", maxReplicationBody)}
		}
		return nil, httpapi.BadRequest("malformed replication body: %v", err)
	}
	return envs, nil
}

// startReplicationTransport starts the manager of the senders; it and they
// stop when ctx ends and are waited for by clusterWG.
func (b *Cluster) startReplicationTransport(ctx context.Context) {
	b.registerReplicationMetrics()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2
	// The URL stays http://: under SSL the dial itself is the TLS client
	// (with this broker's certificate), and HTTP/1.1 runs inside it.
	tr.DialContext = b.DialInterBroker
	b.repl.client.Store(&http.Client{Transport: tr})
	b.clusterWG.Add(1)
	go func() {
		defer b.clusterWG.Done()
		defer tr.CloseIdleConnections()
		b.managePeers(ctx)
	}()
}

// managePeers keeps one sender per live broker other than this one.
func (b *Cluster) managePeers(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		b.repl.mu.Lock()
		for node, q := range b.repl.queues {
			q.cancel()
			delete(b.repl.queues, node)
		}
		b.repl.mu.Unlock()
		wg.Wait()
	}()
	t := time.NewTicker(replicationPeerPoll)
	defer t.Stop()
	for {
		live := map[int32]bool{}
		for _, bi := range b.Brokers() {
			if bi.NodeID != b.Cfg.NodeID {
				live[bi.NodeID] = true
			}
		}
		b.repl.mu.Lock()
		if b.repl.queues == nil {
			b.repl.queues = map[int32]*peerQueue{}
		}
		for node, q := range b.repl.queues {
			if !live[node] {
				q.cancel()
				delete(b.repl.queues, node)
			}
		}
		for node := range live {
			if b.repl.queues[node] != nil {
				continue
			}
			qctx, cancel := context.WithCancel(ctx)
			q := &peerQueue{node: node, ch: make(chan envelope, replicationQueue), cancel: cancel}
			b.repl.queues[node] = q
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.runSender(qctx, q)
			}()
		}
		b.repl.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runSender POSTs what is queued for one destination, a batch at a time.
// The first failure of a streak is logged at warn, its end at info: a
// controller that cannot reach a replica elects nothing it needs.
func (b *Cluster) runSender(ctx context.Context, q *peerQueue) {
	batch := make([]envelope, 0, replicationBatch)
	failing := false
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case env := <-q.ch:
			batch = append(batch, env)
		}
	fill:
		for len(batch) < replicationBatch {
			select {
			case env := <-q.ch:
				batch = append(batch, env)
			default:
				break fill
			}
		}
		if err := b.post(ctx, q.node, batch); err != nil {
			for range batch {
				b.repl.drop(dropSendFailed)
			}
			if ctx.Err() == nil {
				ev := b.Logger.Debug()
				if !failing {
					ev = b.Logger.Warn()
				}
				failing = true
				ev.Err(err).Int32("to", q.node).Int("messages", len(batch)).Msg("election messages not delivered")
			}
			continue
		}
		if failing {
			failing = false
			b.Logger.Info().Int32("to", q.node).Msg("election messages delivered again")
		}
		b.repl.sent.Add(uint64(len(batch)))
	}
}

// post sends one batch to node's inter-broker address, as the registry has
// it now.
func (b *Cluster) post(ctx context.Context, node int32, batch []envelope) error {
	addr := b.InterBrokerAddr(node)
	if addr == "" {
		return fmt.Errorf("broker: replication to node %d: not live", node)
	}
	body, err := replica.EncodeEnvelopes(batch)
	if err != nil {
		return fmt.Errorf("broker: replication to node %d: %w", node, err)
	}
	if len(body) > maxReplicationBody {
		return fmt.Errorf("broker: replication to node %d: batch of %d bytes exceeds %d", node, len(body), maxReplicationBody)
	}
	ctx, cancel := context.WithTimeout(ctx, replicationSendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+ReplicationPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("broker: replication to node %d at %s: %w", node, addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := b.repl.client.Load()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("broker: replication to node %d at %s: %w", node, addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("broker: replication to node %d at %s: %s: %s", node, addr, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
