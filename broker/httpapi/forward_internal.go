package httpapi

// This file owns the internal HTTP calls one broker makes on another's
// inter-broker listener to serve an HTTP API request for a partition it
// does not lead (forward.go), and their handlers:
//
//	POST /internal/v1/partitions/{topic}/{partition}/batches
//	     body: record batches, back to back, for the partition, in order
//	     200 {"results": [{"base": 12, "dup": false} | {"error": {...}}]}
//	POST /internal/v1/partitions/{topic}/{partition}/read
//	     body: {"offset", "max_bytes", "wait_ms"}; 200: a fetchResponse
//	POST /internal/v1/partitions/{topic}/{partition}/offsets
//	     body: {"to": "earliest"|"latest"|"", "timestamp_ms"}
//	     200 {"offset", "log_start", "high_watermark"}
//
// Only the partition's leader answers them (others: NOT_LEADER_FOR_PARTITION
// as an HTTP 503 error body, which the caller retries once its view of the
// leader changes). Errors travel as the public API's error bodies, so the
// caller hands the leader's code and message to its client unchanged.
//
// Invariant: the batches call carries the client's own producer id and
// sequences (an idempotent HTTP publish), so re-sending it after a leader
// change or a lost answer is answered as a duplicate, never appended twice.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
)

const (
	internalPartitionPath = "/internal/v1/partitions/"
	// maxInternalBody bounds a forwarded body (the public API's bound plus
	// room for batch framing).
	maxInternalBody = maxHTTPBody + 1<<20
	// maxInternalAnswer bounds an internal answer read into memory: a read
	// of httpMaxFetchBytes carries each payload as text and as base64.
	maxInternalAnswer = 4 * httpMaxFetchBytes
	// leaderChangeWait is how long a forwarded call that found no leader
	// waits for this broker's view of the leader to change before trying
	// again; it is also the pause between attempts.
	leaderChangeWait = 200 * time.Millisecond
)

// registerInternalAPI adds the forwarding handlers to the inter-broker
// listener's mux.
func (b *Server) registerInternalAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST "+internalPartitionPath+"{topic}/{partition}/batches", b.internalBatches)
	mux.HandleFunc("POST "+internalPartitionPath+"{topic}/{partition}/read", b.internalRead)
	mux.HandleFunc("POST "+internalPartitionPath+"{topic}/{partition}/offsets", b.internalOffsets)
}

// internalLeader resolves the path's partition to its local replica, which
// must be the leader.
func (b *Server) internalLeader(r *http.Request) (*node.Topic, *partition.Partition, error) {
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil {
		return nil, nil, BadRequest("partition %q is not a number", r.PathValue("partition"))
	}
	t := b.LookupTopic(name)
	if t == nil {
		return nil, nil, fmt.Errorf("%w: %s", node.ErrUnknownTopic, name)
	}
	p, err := t.Local(int32(n))
	if err != nil {
		return nil, nil, err
	}
	if !b.Leads(t, int32(n)) {
		return nil, nil, fmt.Errorf("%w: node %d does not lead %s-%d", node.ErrNotLeader, b.Cfg.NodeID, name, n)
	}
	return t, p, nil
}

type internalBatchResult struct {
	Base  int64     `json:"base"`
	Dup   bool      `json:"dup,omitempty"`
	Error *APIError `json:"error,omitempty"`
}

func (b *Server) internalBatches(w http.ResponseWriter, r *http.Request) {
	t, p, err := b.internalLeader(r)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxInternalBody))
	}
	var pbs []*publishBatch
	if err == nil {
		pbs, err = splitBatches(body, p.Index())
	}
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	outs := b.appendLocal(r.Context(), t, pbs)
	res := make([]internalBatchResult, len(outs))
	for i, o := range outs {
		res[i] = internalBatchResult{Base: int64(o.Base), Dup: o.Dup}
		if o.Err != nil {
			res[i].Error = httpStatusFor(o.Err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": res})
}

// splitBatches cuts a body of back-to-back record batches into batches for
// partition index. Each batch is checked whole later (validateBatch); here
// only its length must fit.
func splitBatches(body []byte, index int32) ([]*publishBatch, error) {
	var pbs []*publishBatch
	for len(body) > 0 {
		h, err := wal.ParseBatchHeader(body)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", node.ErrCorruptMessage, err)
		}
		if h.Size() > len(body) {
			return nil, fmt.Errorf("%w: batch of %d bytes in %d", node.ErrCorruptMessage, h.Size(), len(body))
		}
		pbs = append(pbs, &publishBatch{partition: index, raw: body[:h.Size()], count: int(max(h.RecordCount, 0))})
		body = body[h.Size():]
	}
	if len(pbs) == 0 {
		return nil, BadRequest("no record batch")
	}
	return pbs, nil
}

type internalReadRequest struct {
	Offset   int64 `json:"offset"`
	MaxBytes int   `json:"max_bytes"`
	WaitMs   int64 `json:"wait_ms"`
}

func (b *Server) internalRead(w http.ResponseWriter, r *http.Request) {
	serveAtLeader(b, w, r, func(ctx context.Context, p *partition.Partition, req internalReadRequest) (fetchResponse, error) {
		wait := min(time.Duration(req.WaitMs)*time.Millisecond, httpMaxFetchWait)
		return b.readMessages(ctx, p, req.Offset, min(req.MaxBytes, httpMaxFetchBytes), wait)
	})
}

// serveAtLeader serves an internal JSON call for a partition this broker
// leads: it decodes the request, runs serve on the leader's replica and
// writes its answer or its error.
func serveAtLeader[Req, Resp any](b *Server, w http.ResponseWriter, r *http.Request,
	serve func(context.Context, *partition.Partition, Req) (Resp, error),
) {
	_, p, err := b.internalLeader(r)
	var req Req
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	var resp Resp
	if err == nil {
		resp, err = serve(r.Context(), p, req)
	}
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

type internalOffsetsRequest struct {
	To          string `json:"to"`
	TimestampMs int64  `json:"timestamp_ms"`
}

type partitionOffsets struct {
	Offset        int64 `json:"offset"`
	LogStart      int64 `json:"log_start"`
	HighWatermark int64 `json:"high_watermark"`
	// LogEnd is the leader's log end offset (records above the high
	// watermark are appended, not yet acknowledged); absent from brokers
	// before it was reported.
	LogEnd int64 `json:"log_end,omitempty"`
}

func (b *Server) internalOffsets(w http.ResponseWriter, r *http.Request) {
	serveAtLeader(b, w, r, b.localOffsets)
}

// localOffsets answers an offsets query from the local replica.
func (b *Server) localOffsets(ctx context.Context, p *partition.Partition, req internalOffsetsRequest) (partitionOffsets, error) {
	hw, _ := p.HighWatermark()
	out := partitionOffsets{LogStart: int64(b.LogStart(ctx, p)), HighWatermark: int64(hw), LogEnd: int64(p.Log().EndOffset())}
	switch req.To {
	case "earliest":
		out.Offset = out.LogStart
	case "latest":
		out.Offset = out.HighWatermark
	case "":
		off, _, err := b.ListOffset(p, req.TimestampMs)
		if err != nil {
			return out, err
		}
		if off < 0 { // nothing at or after the time: the end, as Kafka resets
			off = out.HighWatermark
		}
		out.Offset = off
	default:
		return out, BadRequest("to must be earliest or latest, not %q", req.To)
	}
	return out, nil
}

// partitionOffsetsOf answers an offsets query for any partition: here when
// this broker leads it, else from its leader.
func (b *Server) partitionOffsetsOf(ctx context.Context, t *node.Topic, index int32, req internalOffsetsRequest) (partitionOffsets, error) {
	var out partitionOffsets
	err := b.atLeader(ctx, t, index, func(ctx context.Context, p *partition.Partition) error {
		var err error
		out, err = b.localOffsets(ctx, p, req)
		return err
	}, func(ctx context.Context, leader int32) error {
		return b.callPeer(ctx, leader, t, index, "offsets", req, &out)
	})
	return out, err
}

// readAtLeader reads messages of any partition: here when this broker leads
// it, else at its leader.
func (b *Server) readAtLeader(ctx context.Context, t *node.Topic, index int32, from int64, maxBytes int, wait time.Duration) (fetchResponse, error) {
	var out fetchResponse
	err := b.atLeader(ctx, t, index, func(ctx context.Context, p *partition.Partition) error {
		var err error
		out, err = b.readMessages(ctx, p, from, maxBytes, wait)
		return err
	}, func(ctx context.Context, leader int32) error {
		req := internalReadRequest{Offset: from, MaxBytes: maxBytes, WaitMs: wait.Milliseconds()}
		return b.callPeer(ctx, leader, t, index, "read", req, &out)
	})
	return out, err
}

// atLeader runs here when this broker leads the partition and remote
// otherwise, trying again while the answer is that the leader moved, until
// ctx ends or a short retry budget is spent.
func (b *Server) atLeader(ctx context.Context, t *node.Topic, index int32,
	here func(context.Context, *partition.Partition) error, remote func(context.Context, int32) error,
) error {
	if index < 0 || int(index) >= len(t.States) {
		return fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, t.Meta.Name, index)
	}
	deadline := time.Now().Add(publishTimeout)
	for attempt := 0; ; attempt++ {
		cur := b.LookupTopic(t.Meta.Name)
		if cur == nil || cur.Meta.ID != t.Meta.ID {
			return fmt.Errorf("%w: %s", node.ErrUnknownTopic, t.Meta.Name)
		}
		var err error
		if b.Leads(cur, index) {
			err = here(ctx, cur.Partitions[index])
		} else if leader := cur.States[index].Leader; leader < 0 || b.InterBrokerAddr(leader) == "" {
			err = fmt.Errorf("%w: %s-%d has no live leader", node.ErrNotLeader, t.Meta.Name, index)
		} else {
			err = remote(ctx, leader)
		}
		if err == nil || !leaderMoved(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		node.SleepCtx(ctx, leaderChangeWait)
	}
}

// leaderMoved reports whether err says the call went to a broker that does
// not lead the partition (any more), or could not reach it.
func leaderMoved(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code == kerr.NotLeaderForPartition.Message || ae.Code == "peer_unreachable"
	}
	return errors.Is(err, node.ErrNotLeader)
}

// forwardBatches sends one partition's batches of an idempotent publish to
// its leader, and sends again, in order, those that failed because the
// leader moved, until they land or the context ends.
func (b *Server) forwardBatches(ctx context.Context, t *node.Topic, pbs []*publishBatch) []partition.AppendResult {
	out := make([]partition.AppendResult, len(pbs))
	todo := make([]int, len(pbs))
	for i := range todo {
		todo[i] = i
	}
	index := pbs[0].partition
	for len(todo) > 0 {
		var body []byte
		for _, i := range todo {
			body = append(body, pbs[i].raw...)
		}
		var resp struct {
			Results []internalBatchResult `json:"results"`
		}
		var moved []int
		err := b.atLeader(ctx, t, index, func(ctx context.Context, _ *partition.Partition) error {
			sub := make([]*publishBatch, len(todo))
			for j, i := range todo {
				sub[j] = pbs[i]
			}
			for j, o := range b.appendLocal(ctx, t, sub) {
				resp.Results = append(resp.Results, internalBatchResult{Base: int64(o.Base), Dup: o.Dup})
				if o.Err != nil {
					resp.Results[j].Error = httpStatusFor(o.Err)
				}
			}
			return nil
		}, func(ctx context.Context, leader int32) error {
			return b.postPeer(ctx, leader, t, index, "batches", "application/octet-stream", body, &resp)
		})
		if err == nil && len(resp.Results) != len(todo) {
			err = fmt.Errorf("%w: the leader answered %d results for %d batches", node.ErrStorage, len(resp.Results), len(todo))
		}
		if err != nil {
			for _, i := range todo {
				out[i].Err = err
			}
			return out
		}
		for j, i := range todo {
			res := resp.Results[j]
			out[i] = partition.AppendResult{Base: wal.Offset(res.Base), Dup: res.Dup}
			if res.Error != nil {
				out[i].Err = res.Error
				if leaderMoved(res.Error) && ctx.Err() == nil {
					moved = append(moved, i)
				}
			}
		}
		todo = moved
		if len(todo) > 0 {
			node.SleepCtx(ctx, leaderChangeWait)
		}
	}
	return out
}

// callPeer posts a JSON request to a partition's internal endpoint on node
// and decodes the answer into out.
func (b *Server) callPeer(ctx context.Context, peer int32, t *node.Topic, index int32, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return b.postPeer(ctx, peer, t, index, op, "application/json", body, out)
}

// postPeer posts body to a partition's internal endpoint on node. A
// refusal comes back as the leader's *APIError; a broker that cannot be
// reached as one with code peer_unreachable.
func (b *Server) postPeer(ctx context.Context, peer int32, t *node.Topic, index int32, op, contentType string, body []byte, out any) error {
	path := internalPartitionPath + url.PathEscape(t.Meta.Name) + "/" + strconv.Itoa(int(index)) + "/" + op
	who := fmt.Sprintf("peer %d, the leader of %s-%d,", peer, t.Meta.Name, index)
	return b.peerCall(ctx, peer, who, http.MethodPost, path, contentType, body, out)
}

// peerCall sends one internal request to node's inter-broker listener and
// decodes its 200 answer into out. who names the node in messages. A
// refusal comes back as the node's *APIError (its status kept); a node that
// is not live or does not answer as one with code peer_unreachable (503);
// an answer that is not ours as peer_error (502).
func (b *Server) peerCall(ctx context.Context, peer int32, who, method, pathQuery, contentType string, body []byte, out any) error {
	addr := b.InterBrokerAddr(peer)
	if addr == "" {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "peer_unreachable",
			Message: fmt.Sprintf("%s is not live; retry", who)}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+pathQuery, rd)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := b.peerHTTP().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: call to peer %d: %w", node.ErrRequestTimedOut, peer, ctx.Err())
		}
		return &APIError{Status: http.StatusServiceUnavailable, Code: "peer_unreachable",
			Message: fmt.Sprintf("%s did not answer: %v; retry", who, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInternalAnswer))
	if err != nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "peer_unreachable",
			Message: fmt.Sprintf("%s: reading its answer: %v; retry", who, err)}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *APIError `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error == nil {
			return &APIError{Status: http.StatusBadGateway, Code: "peer_error",
				Message: fmt.Sprintf("%s answered %s: %s", who, resp.Status, bytes.TrimSpace(data))}
		}
		e.Error.Status = resp.StatusCode
		return e.Error
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &APIError{Status: http.StatusBadGateway, Code: "peer_error",
			Message: fmt.Sprintf("%s answered undecodable JSON: %v", who, err)}
	}
	return nil
}
