package kafka

// This file owns Kafka connections: accepting them within the connection
// limits (package netconn), framing, request headers, and the ordering of
// responses.
//
// Invariant: responses on a connection are written in request order.
// Invariant: a frame that cannot be parsed closes its connection (with a log
// line); it never reaches a handler and never stops the broker.
// Invariant: a request's frame stays reserved in the broker's request memory
// (package frames) until its reply is written or the request is dropped; an
// acks=0 produce is handled as acks=1 so that the writer can wait for its
// append before releasing it, and nothing is written back for it.
// Invariant: between replies a connection keeps an encoding buffer of at
// most maxKeptReplyBuffer bytes, or maxKeptReplicaReplyBuffer after a
// follower's replica fetch on the inter-broker listener (interbroker.go).
//
// Each connection has a reader goroutine (serveConn), which decodes requests
// and runs handlers in order, and a writer goroutine, which waits for each
// reply in turn and writes it. Produce handlers queue their batches on the
// reader goroutine and return a reply that waits for the fsync, so requests
// pipelined on one connection share group commits. The accept loop owns the
// request memory and the connection limiter; the two goroutines of a
// connection share its netconn.Activity.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/kafka/frames"
	"github.com/sluice-mq/sluice/broker/kafka/netconn"
	"github.com/sluice-mq/sluice/broker/kafka/replybuf"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPipelined bounds the replies a connection may owe before the reader
// stops reading.
const maxPipelined = 16

// request is one decoded Kafka request.
type request struct {
	key, version int16
	correlation  int32
	clientID     string
	remoteHost   string        // the client's address as the coordinator reports it
	interBroker  bool          // arrived on the inter-broker listener (interbroker.go)
	listener     string        // the name of the client listener it arrived on; "" on the inter-broker one
	sec          *connSecurity // the connection's identity state (authn.go); set by the pipeline
	quota        reqQuota      // the admit stage's state (quota.go)
	body         kmsg.Request
}

// reply produces the response of a request, waiting if it must. A nil reply
// means no response is sent (produce with acks=0). ready reports, without
// blocking, whether response would return at once: the writer flushes what
// it has buffered before it waits on a reply that is not ready, so one slow
// reply never holds back the bytes of the replies before it.
type reply interface {
	ready() bool
	response() kmsg.Response
}

// doneReply is a response that is already complete.
type doneReply struct{ resp kmsg.Response }

func (r doneReply) ready() bool             { return true }
func (r doneReply) response() kmsg.Response { return r.resp }

func done(resp kmsg.Response) reply { return doneReply{resp} }

// waitReply is a response that may block (a parked JoinGroup or SyncGroup).
type waitReply func() kmsg.Response

func (f waitReply) ready() bool             { return false }
func (f waitReply) response() kmsg.Response { return f() }

type outbound struct {
	req    *request
	reply  reply
	mem    frames.Reservation // the request's frame, released once answered
	silent bool               // an acks=0 produce: wait for the reply, send nothing
	start  time.Time          // when the request was read (produceack.Metrics.Answered)
}

// errFrame is the frame reader's marker, so a request that parses badly
// ends its connection the same way as a frame that reads badly.
var errFrame = frames.ErrFrame

// serveKafka accepts client connections on kl until it closes. mem is the
// broker's request memory, which the inter-broker listener shares; limiter
// is shared by every client listener.
func (b *Server) serveKafka(ctx context.Context, kl *kafkaListener, limiter *netconn.Limiter, mem *frames.Memory) error {
	// A flood of refused connections must not flood the log.
	refusals := b.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second})
	for {
		nc, err := kl.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			b.Logger.Warn().Err(err).Str("listener", kl.Name).Msg("accept")
			continue
		}
		ip := netconn.RemoteIP(nc.RemoteAddr())
		if reason := limiter.Admit(ip); reason != "" {
			// Counted before the close, so whoever sees the close sees the count.
			b.M.ConnsRefused.WithLabelValues(reason).Inc()
			_ = nc.Close() // refused before any byte is read; nothing to report
			refusals.Warn().Str("remote", nc.RemoteAddr().String()).Str("reason", reason).
				Msg("refused connection (logged at most 5 times per 10s)")
			continue
		}
		b.M.ConnsOpen.Inc()
		b.connMu.Lock()
		b.openConns[nc] = struct{}{}
		b.connMu.Unlock()
		b.conns.Add(1)
		go func() {
			defer b.conns.Done()
			b.serveConn(ctx, nc, mem, kl)
			b.connMu.Lock()
			delete(b.openConns, nc)
			b.connMu.Unlock()
			limiter.Leave(ip)
			b.M.ConnsOpen.Dec()
		}()
	}
}

// closeConns closes every open connection so their goroutines end.
func (b *Server) closeConns() {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	for nc := range b.openConns {
		_ = nc.Close() // only to unblock its reader; serveConn closes it again
	}
}

// serveConn serves one Kafka connection that came to the client listener
// kl, or, with kl nil, to the inter-broker listener, whose dispatch table
// it is served from.
func (b *Server) serveConn(ctx context.Context, nc net.Conn, mem *frames.Memory, kl *kafkaListener) {
	interBroker := kl == nil
	logger := b.Logger.With().Str("remote", nc.RemoteAddr().String()).Logger()
	sec, nc, err := b.openConnSecurity(ctx, nc, kl)
	if err != nil {
		_ = nc.Close() // the handshake failed; that is what is logged
		logger.Debug().Err(err).Msg("closing connection before its first request")
		return
	}
	act := netconn.NewActivity(time.Now())
	cq := newConnQuota(b.admitter)
	out := make(chan outbound, maxPipelined)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeReplies(nc, out, mem, act, cq, logger)
	}()
	defer func() {
		close(out)
		<-writerDone
		_ = nc.Close() // may already be closed by closeConns or writeReplies
		if cq.known {
			b.admitter.Disconnected(cq.id)
		}
	}()

	remoteHost := "/" + netconn.RemoteIP(nc.RemoteAddr()) // Kafka's form: "/host"
	fr := b.newFrameReader(nc, netconn.NewIdleReader(nc, b.Cfg.ConnectionsMaxIdle, act), mem)
	defer fr.Close()
	for {
		// Held by a quota, or at its tenant's inflight_requests: not read.
		if cq.wait(ctx) != nil {
			return
		}
		// The share is looked up per frame: SASL authenticates mid-connection.
		frame, res, err := fr.Next(ctx, memShare(sec))
		if err != nil {
			switch {
			case errors.Is(err, netconn.ErrIdle):
				b.M.ConnsIdle.Inc()
				logger.Debug().Err(err).Msg("closing idle connection")
			case errors.Is(err, frames.ErrSlowReceive): // counted by the frame reader; here by its share
				b.Tenants.Rejected(memShare(sec), quota.RejectSlowReceive)
				logger.Debug().Err(err).Msg("closing connection")
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil:
				peerLevel(logger, interBroker).Err(err).Msg("closing connection")
			}
			return
		}
		act.Started()
		drop := func() {
			mem.Release(&res)
			act.Finished(time.Now())
		}
		req, err := parseRequest(frame)
		if err != nil {
			drop()
			peerLevel(logger, interBroker).Err(err).Msg("closing connection on an unparsable request")
			return
		}
		req.remoteHost, req.interBroker, req.listener = remoteHost, interBroker, sec.listener
		req.quota.conn = cq
		silent := answerAcksZeroSilently(req)
		start := time.Now()
		rep, err := b.serveRequest(ctx, sec, req)
		if err != nil {
			drop()
			ev := logger.Warn() // the handler failed
			switch {
			case errors.Is(err, errFrame):
				ev = peerLevel(logger, interBroker) // an API or version not served
			case errors.Is(err, errUnauthenticated):
				ev = logger.Debug() // the client's to see; a flood of them must not flood the log
			case errors.Is(err, errQuotaClosed):
				ev = logger.Info() // counted in sluice_connections_refused_total
			}
			ev.Err(err).Str("api", kmsg.NameForKey(req.key)).Int16("version", req.version).
				Str("client", req.clientID).Msg("closing connection")
			return
		}
		b.M.ObserveRequest(req.key, start)
		if rep == nil {
			drop()
			continue
		}
		cq.sent()
		select {
		case out <- outbound{req: req, reply: rep, mem: res, silent: silent, start: start}:
		case <-ctx.Done():
			drop()
			return
		}
		if sec.closeAfterReply {
			// A failed authentication: its answer is written (after its
			// delay) by the writer, which the deferred close waits for.
			logger.Debug().Str("api", kmsg.NameForKey(req.key)).Msg("closing connection after a failed authentication")
			return
		}
	}
}

// peerLevel is the level of a connection closed for what its peer did (a
// bad frame, an unserved API or version, a reset): a client's mistake or
// disconnect is debug, the client's to see, not the operator's; the same
// from another broker (inter-broker listener) is a warning, as brokers of
// one cluster should speak one protocol.
func peerLevel(logger zerolog.Logger, interBroker bool) *zerolog.Event {
	if interBroker {
		return logger.Warn()
	}
	return logger.Debug()
}

// answerAcksZeroSilently turns an acks=0 produce into an acks=1 one whose
// reply is awaited but not sent, and reports whether it did: its batches are
// referenced until they are appended, so its request memory must stay
// reserved until then.
func answerAcksZeroSilently(req *request) bool {
	if pr, ok := req.body.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		pr.Acks = 1
		return true
	}
	return false
}

// writeReplies writes each reply in order and then releases its request.
// After a write error it keeps draining so the reader never blocks on a dead
// connection.
func (b *Server) writeReplies(nc net.Conn, out <-chan outbound, mem *frames.Memory, act *netconn.Activity, cq *connQuota, logger zerolog.Logger) {
	w := bufio.NewWriterSize(nc, 64<<10)
	var bufs replybuf.Conn
	failed := false
	for o := range out {
		if !failed && w.Buffered() > 0 && !o.reply.ready() {
			if err := w.Flush(); err != nil {
				logger.Debug().Err(err).Msg("write response")
				failed = true
				_ = nc.Close()
			}
		}
		resp := o.reply.response()
		b.M.Produce.Answered(o.req.body, resp, o.silent, o.start)
		hold := cq.answer(&o, resp)
		var err error
		if !failed && !o.silent {
			keep, pool := maxKeptReplyBuffer, true
			if isReplicaFetch(o.req) {
				keep, pool = maxKeptReplicaReplyBuffer, false
			}
			buf := encodeResponse(bufs.Take(fetchReplySize(resp), pool), o.req, resp)
			_, err = w.Write(buf)
			bufs.Done(buf, keep)
			if err == nil && len(out) == 0 {
				err = w.Flush()
			}
		}
		mem.Release(&o.mem)
		act.Finished(time.Now())
		cq.answeredOne(hold)
		if err != nil {
			logger.Debug().Err(err).Msg("write response")
			failed = true
			_ = nc.Close() // the write error is logged above; this unblocks the reader
		}
	}
	if !failed {
		_ = w.Flush()
	}
}

// maxKeptReplyBuffer is the largest encoding buffer a connection keeps for
// its next reply; a larger consumer reply's buffer goes back to the shared
// pools (replybuf), so an idle connection does not pin its largest reply.
const maxKeptReplyBuffer = replybuf.Min

// maxKeptReplicaReplyBuffer is the same for a reply to a follower's replica
// fetch, which can hold node.ReplicaFetchMaxBytes of records and a first batch
// past them. A follower fetches without pause and from few connections (one
// per broker it follows), so keeping its replies' buffer costs a bounded
// amount per peer and saves allocating, zeroing and growing one per reply
// (27% of a leader's allocated bytes at full speed before).
const maxKeptReplicaReplyBuffer = node.ReplicaFetchMaxBytes + 2<<20

// isReplicaFetch reports whether req is a follower's replica fetch, which
// only the inter-broker listener serves.
func isReplicaFetch(req *request) bool {
	f, ok := req.body.(*kmsg.FetchRequest)
	if !ok || !req.interBroker {
		return false
	}
	id, _ := fetchReplica(f)
	return id >= 0
}

// fetchReplySize is a close upper estimate of the encoded size of a fetch
// response (its records plus a generous allowance for the rest), or 0 for
// any other response.
func fetchReplySize(resp kmsg.Response) int {
	f, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for i := range f.Topics {
		t := &f.Topics[i]
		n += 64 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 128 + len(p.RecordBatches) + 32*len(p.AbortedTransactions)
		}
	}
	return n
}

// parseRequest decodes the request header and, for a known key and a
// version kmsg can parse, the body. Version checks against what this broker
// advertises happen in dispatch.
func parseRequest(frame []byte) (*request, error) {
	req := &request{
		key:         int16(binary.BigEndian.Uint16(frame[0:])),
		version:     int16(binary.BigEndian.Uint16(frame[2:])),
		correlation: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	body := kmsg.RequestForKey(req.key)
	if body == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", errFrame, req.key)
	}
	rest := frame[8:]
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: missing client id", errFrame)
	}
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return nil, fmt.Errorf("%w: client id length %d past the frame", errFrame, idLen)
		}
		req.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	if req.version < 0 || req.version > body.MaxVersion() {
		if req.key == apiVersionsKey {
			// Answered with the v0 error response before parsing the body.
			req.body = body
			return req, nil
		}
		return nil, fmt.Errorf("%w: %s version %d is unknown", errFrame, kmsg.NameForKey(req.key), req.version)
	}
	body.SetVersion(req.version)
	if body.IsFlexible() {
		var err error
		if rest, err = frames.SkipTags(rest); err != nil {
			return nil, fmt.Errorf("%w: %w", errFrame, err)
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("%w: %s v%d body: %w", errFrame, kmsg.NameForKey(req.key), req.version, err)
	}
	req.body = body
	return req, nil
}

// encodeResponse appends a size-prefixed response frame to dst.
func encodeResponse(dst []byte, req *request, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(req.correlation))
	// The ApiVersions response header never carries tags (KIP-511).
	if resp.IsFlexible() && req.key != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}
