package httpapi

// This file owns forwarding: how a broker serves an HTTP request for
// partitions it does not lead, by handing each part to the partition's
// leader over the leader's inter-broker listener (interbroker.go).
//
//   - Records of an ordinary HTTP publish travel through one Kafka producer
//     per broker (franz-go, idempotent, acks=all) that speaks to the other
//     brokers' inter-broker listeners. Its producer id, epoch and sequences
//     are what make a retry after a leader change safe: the new leader
//     answers a batch it already holds as a duplicate, never appends it
//     twice. The producer finds leaders with Metadata asked on the
//     inter-broker listener, which names the brokers by their inter-broker
//     addresses.
//   - A publish that carries the client's own producer id and sequences is
//     forwarded as the encoded batch (forward_internal.go), which the
//     client's sequences already make safe to retry.
//   - Reads, offset lookups and partition positions go to the leader as
//     internal HTTP calls on the same listener (forward_internal.go).
//
// Invariant: a forwarded publish is retried only within the request's
// deadline and only through a producer id and sequence, so no retry can
// duplicate a record. A part appended on this broker is never also
// forwarded; one it enqueued as the leader goes on to the new leader only
// when the partition refused it before it reached the log because the
// leadership had moved (partition.ErrNotAppended; publishPart).
// Invariant: forwarding never goes through a broker's client listeners;
// Config.PeerInterBroker routes it like the replication traffic.
//
// Goroutines: franz-go's client owns its own; it is created on first use
// and closed by Run's shutdown (closeForwarder).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// publishTimeout bounds one HTTP publish, its forwarding and retries
	// included, unless the request asks for less.
	publishTimeout = 30 * time.Second
	// forwardMetadataAge is how stale the producer's view of leaders may
	// get before a leader change sends it to ask again.
	forwardMetadataAge = 250 * time.Millisecond
)

// forwarder holds the clients that reach other brokers' inter-broker
// listeners. Its zero value is ready; the producer is built on first use.
type forwarder struct {
	mu     sync.Mutex
	cl     *kgo.Client // guarded by mu; nil until first use or after close
	closed bool        // guarded by mu
	http   *http.Client
	once   sync.Once
}

// producer returns the forwarding producer, creating it on first use.
func (b *Server) producer() (*kgo.Client, error) {
	f := &b.fwd
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, node.ErrShuttingDown
	}
	if f.cl != nil {
		return f.cl, nil
	}
	var seeds []string
	for _, bi := range b.Brokers() {
		if addr := b.InterBrokerAddr(bi.NodeID); addr != "" {
			seeds = append(seeds, addr)
		}
	}
	if len(seeds) == 0 {
		seeds = []string{b.LocalInterBrokerAddr()}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("sluice-forward-"+strconv.Itoa(int(b.Cfg.NodeID))),
		kgo.Dialer(b.dialPeer),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.MetadataMinAge(forwardMetadataAge),
		kgo.RecordDeliveryTimeout(publishTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	)
	if err != nil {
		return nil, fmt.Errorf("broker: forwarding producer: %w", err)
	}
	f.cl = cl
	return cl, nil
}

// closeForwarder closes the forwarding producer, failing what it holds.
func (b *Server) closeForwarder() {
	f := &b.fwd
	f.mu.Lock()
	cl := f.cl
	f.cl, f.closed = nil, true
	f.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

// dialPeer dials a broker's inter-broker listener. The address is the one
// the broker registered (Metadata on the inter-broker listener names those);
// Config.PeerInterBroker may route that node elsewhere. Under
// --inter-broker-security-protocol SSL the conn is a TLS client with this
// broker's certificate (node.DialInterBroker), so the internal calls keep
// their http:// URLs.
func (b *Server) dialPeer(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, bi := range b.Brokers() {
		if bi.InterBroker == addr {
			if to, ok := b.Cfg.PeerInterBroker[bi.NodeID]; ok {
				addr = to
			}
			break
		}
	}
	return b.DialInterBroker(ctx, network, addr)
}

// peerHTTP is the HTTP client of the internal calls, dialling like
// dialPeer.
func (b *Server) peerHTTP() *http.Client {
	f := &b.fwd
	f.once.Do(func() {
		f.http = &http.Client{Transport: &http.Transport{
			DialContext:         b.dialPeer,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     time.Minute,
		}}
	})
	return f.http
}

// forwardRecords produces the messages of pb through the forwarding
// producer and fills their results.
func (b *Server) forwardRecords(ctx context.Context, t *node.Topic, pb *publishBatch, results []publishResult) {
	cl, err := b.producer()
	if err != nil {
		b.failPublish(pb, err, results)
		return
	}
	var wg sync.WaitGroup
	for _, i := range pb.msgs {
		rec := pb.recs[i]
		kr := &kgo.Record{
			Topic: t.Meta.Name, Partition: pb.partition, Key: rec.Key, Value: rec.Value,
			Timestamp: time.UnixMilli(rec.TimestampDelta64), Context: ctx,
		}
		for _, h := range rec.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		wg.Add(1)
		cl.Produce(ctx, kr, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				err = forwardError(err)
				results[i] = publishResult{Partition: pb.partition, Offset: -1, Status: httpStatusFor(err).Code, Error: err.Error()}
				return
			}
			results[i] = publishResult{Partition: r.Partition, Offset: r.Offset, Status: "ok"}
		})
	}
	wg.Wait()
}

// forwardError names the producer's own give-ups as the request timing out,
// which clients retry; the leaders' refusals keep their Kafka codes.
func forwardError(err error) error {
	switch {
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: forwarding to the partition leader: %w", node.ErrRequestTimedOut, err)
	case errors.Is(err, kgo.ErrClientClosed):
		return fmt.Errorf("%w: %w", node.ErrShuttingDown, err)
	}
	return err
}
