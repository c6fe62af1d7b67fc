package httpapi

// This file owns the HTTP consumer API's membership, commit and reset
// endpoints. HTTP members are ordinary members of the same groups Kafka
// clients join: they speak the "consumer" protocol type with the "range"
// assignor, and when an HTTP member is the leader the broker computes the
// range assignment for everyone (Kafka clients compute it themselves).
// Generations, fencing and commit rules are the coordinator's, unchanged.
// A request for a group another broker coordinates is forwarded to that
// broker's HTTP API once (marked with forwardedHeader so it is never
// forwarded again); clients may use any broker. The forwarded request is
// the client's own (names as the client wrote them, its credentials), which
// the coordinator's pipeline authenticates and scopes again.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/wal"
)

const (
	httpProtocolType       = "consumer"
	httpAssignor           = "range"
	httpDefaultSession     = 30 * time.Second
	httpDefaultRebalance   = 60 * time.Second
	httpClientID           = "sluice-http"
	httpMaxRebalanceWait   = 5 * time.Minute
	httpDefaultFetchBytes  = 1 << 20
	httpMaxFetchBytes      = 64 << 20
	httpMaxFetchWait       = 30 * time.Second
	httpMaxMessagesPerPoll = 10000
)

func (b *Server) registerGroupAPI(mux routeMux) {
	mux.HandleFunc("POST /v1/groups/{group}/members:join", b.toCoordinator(b.httpJoin))
	mux.HandleFunc("POST /v1/groups/{group}/members:heartbeat", b.toCoordinator(b.httpHeartbeat))
	mux.HandleFunc("POST /v1/groups/{group}/members:leave", b.toCoordinator(b.httpLeave))
	mux.HandleFunc("POST /v1/groups/{group}/messages:fetch", b.toCoordinator(b.httpFetch))
	mux.HandleFunc("POST /v1/groups/{group}/offsets:commit", b.toCoordinator(b.httpCommit))
	mux.HandleFunc("POST /v1/groups/{group}/offsets:reset", b.toCoordinator(b.httpReset))
	mux.HandleFunc("GET /v1/groups/{group}/lag", b.toCoordinator(b.httpLag))
	mux.HandleFunc("POST /v1/groups/{group}/messages:ack", b.toCoordinator(b.queue.HandleAck))   // queueapi
	mux.HandleFunc("POST /v1/groups/{group}/messages:nack", b.toCoordinator(b.queue.HandleNack)) // queueapi
	mux.HandleFunc("POST /v1/groups/{group}/keys:resume", b.toCoordinator(b.queue.HandleResume)) // queueapi: pauses
	mux.HandleFunc("POST /v1/groups/{group}/keys:skip", b.toCoordinator(b.queue.HandleSkip))
	mux.HandleFunc("GET /v1/topics/{topic}/messages", b.queue.HandleList) // queueapi: dead letters
}

// forwardedHeader marks a group request forwarded to its coordinator; its
// value is the forwarding broker's node id.
const forwardedHeader = "X-Sluice-Forwarded-By"

// toCoordinator serves a group request here if this broker coordinates the
// group, and otherwise forwards it to the coordinator's HTTP API. A
// forwarded request is never forwarded again: if the views of the two
// brokers disagree, the client gets a retriable 503.
func (b *Server) toCoordinator(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		groupID := r.PathValue("group")
		co := b.GroupCoordinator(groupID)
		switch {
		case groupID == "" || co.NodeID == b.Cfg.NodeID:
			h(w, r)
		case r.Header.Get(forwardedHeader) != "" || co.HTTP == "":
			b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "not_coordinator",
				Message: fmt.Sprintf("group %q is coordinated by node %d, which is not reachable from here yet; retry", groupID, co.NodeID)})
		default:
			// The coordinator authenticates the client's credentials and
			// scopes its names itself: it gets the request as the client
			// sent it (the path in r.URL is the client's), never names
			// this broker qualified, so nothing crosses a tenant either way.
			restoreClientBody(r)
			target := b.peerURL(co.HTTP)
			proxy := &httputil.ReverseProxy{
				Transport: b.peerTransport,
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.SetURL(target)
					pr.Out.Header.Set(forwardedHeader, strconv.Itoa(int(b.Cfg.NodeID)))
				},
				ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
					b.writeError(w, r, &APIError{Status: http.StatusServiceUnavailable, Code: "coordinator_unreachable",
						Message: fmt.Sprintf("forward to the coordinator of group %q, node %d at %s: %v; retry", groupID, co.NodeID, co.HTTP, err)})
				},
			}
			proxy.ServeHTTP(w, r)
		}
	}
}

// groupHTTPError gives the coordinator's retriable refusals (not the
// coordinator, taking the group over) a 503, as the HTTP API's other
// retriable errors; anything else is writeError's.
func (b *Server) groupHTTPError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, coordinator.ErrNotCoordinator) || errors.Is(err, coordinator.ErrCoordinatorLoading) {
		err = &APIError{Status: http.StatusServiceUnavailable, Code: "coordinator_not_available", Message: err.Error() + "; retry"}
	}
	b.writeError(w, r, err)
}

type joinRequest struct {
	Topics             []string `json:"topics"`
	MemberID           string   `json:"member_id"`
	SessionTimeoutMs   int64    `json:"session_timeout_ms"`
	RebalanceTimeoutMs int64    `json:"rebalance_timeout_ms"`
}

type assignedTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type membership struct {
	MemberID         string          `json:"member_id"`
	Generation       int32           `json:"generation"`
	SessionTimeoutMs int64           `json:"session_timeout_ms"`
	Assignment       []assignedTopic `json:"assignment"`
}

type memberRef struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
}

// groupFromPath returns the {group} path value, or an error for an empty one.
func groupFromPath(r *http.Request) (string, error) {
	g := r.PathValue("group")
	if g == "" {
		return "", BadRequest("group id must not be empty")
	}
	return g, nil
}

func (b *Server) httpJoin(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req joinRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil {
		var m membership
		if m, err = b.joinHTTP(r, groupID, req); err == nil {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	b.groupHTTPError(w, r, err)
}

// joinHTTP runs a JoinGroup and SyncGroup round for an HTTP member.
func (b *Server) joinHTTP(r *http.Request, groupID string, req joinRequest) (membership, error) {
	if len(req.Topics) == 0 {
		return membership{}, BadRequest("topics must not be empty")
	}
	// The subscription holds the group's tenant's names, as a Kafka
	// member's does (names.go).
	topics := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if b.LookupTopic(t) == nil {
			return membership{}, fmt.Errorf("%w: %s", node.ErrUnknownTopic, t)
		}
		local, ok := memberLocal(groupID, t)
		if !ok {
			return membership{}, BadRequest("topic %q is not of the tenant of group %q; a group's members subscribe to its tenant's topics", t, groupID)
		}
		topics = append(topics, local)
	}
	sort.Strings(topics)
	topics = slices.Compact(topics)
	session := time.Duration(req.SessionTimeoutMs) * time.Millisecond
	if session == 0 {
		session = httpDefaultSession
	}
	rebalance := time.Duration(req.RebalanceTimeoutMs) * time.Millisecond
	if rebalance == 0 {
		rebalance = httpDefaultRebalance
	}
	if rebalance < 0 || rebalance > httpMaxRebalanceWait {
		return membership{}, BadRequest("rebalance_timeout_ms must be in (0, %d]", httpMaxRebalanceWait.Milliseconds())
	}
	subscription := kmsg.ConsumerMemberMetadata{Topics: topics}
	res := b.coord.Join(r.Context(), groupID, group.JoinRequest{
		MemberID: req.MemberID, ClientID: httpClientID, ClientHost: "/" + r.RemoteAddr,
		SessionTimeout: session, RebalanceTimeout: rebalance, ProtocolType: httpProtocolType,
		Protocols: []group.Protocol{{Name: httpAssignor, Metadata: subscription.AppendTo(nil)}},
	})
	if res.Err != nil {
		return membership{}, res.Err
	}
	var assignments map[string][]byte
	if res.Leader == res.MemberID {
		if res.Protocol != httpAssignor {
			return membership{}, fmt.Errorf("%w: the group chose assignor %q; HTTP members assign with %q",
				group.ErrInconsistentProtocol, res.Protocol, httpAssignor)
		}
		assignments = b.rangeAssign(groupID, res.Members)
	}
	sres := b.coord.Sync(r.Context(), groupID, group.SyncRequest{
		MemberID: res.MemberID, Generation: res.Generation,
		ProtocolType: httpProtocolType, Protocol: res.Protocol, Assignments: assignments,
	})
	if sres.Err != nil {
		return membership{}, sres.Err
	}
	m := membership{MemberID: res.MemberID, Generation: int32(res.Generation), SessionTimeoutMs: session.Milliseconds(),
		Assignment: []assignedTopic{}}
	if len(sres.Assignment) > 0 {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(sres.Assignment); err != nil {
			return membership{}, fmt.Errorf("decode assignment: %w", err)
		}
		m.Assignment = showAssignment(scopeFrom(r.Context()), groupID, a)
	}
	return m, nil
}

// rangeAssign is Kafka's range assignor: per topic, subscribers in member
// id order each take a contiguous run of partitions, the first ones one
// extra when the count does not divide evenly. Subscriptions and
// assignments name topics as the group's tenant does.
func (b *Server) rangeAssign(groupID string, members []group.MemberInfo) map[string][]byte {
	subscribers := map[string][]string{}
	for _, m := range members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.Metadata); err != nil {
			b.Logger.Warn().Err(err).Str("member", m.ID).Msg("undecodable subscription; the member gets nothing")
			continue
		}
		for _, t := range md.Topics {
			subscribers[t] = append(subscribers[t], m.ID)
		}
	}
	owned := map[string][]kmsg.ConsumerMemberAssignmentTopic{}
	topics := make([]string, 0, len(subscribers))
	for t := range subscribers {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		tp := b.LookupTopic(memberTopic(groupID, t))
		if tp == nil {
			continue
		}
		ids := subscribers[t]
		sort.Strings(ids)
		ids = slices.Compact(ids)
		n, k := len(tp.States), len(ids)
		for i, id := range ids {
			start := i*(n/k) + min(i, n%k)
			count := n / k
			if i < n%k {
				count++
			}
			if count == 0 {
				continue
			}
			parts := make([]int32, count)
			for j := range parts {
				parts[j] = int32(start + j)
			}
			owned[id] = append(owned[id], kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: parts})
		}
	}
	out := make(map[string][]byte, len(members))
	for _, m := range members {
		a := kmsg.ConsumerMemberAssignment{Topics: owned[m.ID]}
		out[m.ID] = a.AppendTo(nil)
	}
	return out
}

func (b *Server) httpHeartbeat(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req memberRef
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil && (req.MemberID == "" || req.Generation == nil) {
		err = BadRequest("member_id and generation are required")
	}
	if err == nil {
		err = b.coord.Heartbeat(groupID, req.MemberID, "", group.Generation(*req.Generation))
	}
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (b *Server) httpLeave(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req memberRef
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	if err == nil && req.MemberID == "" {
		err = BadRequest("member_id is required")
	}
	if err == nil {
		err = b.coord.Leave(groupID, req.MemberID, "")
	}
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "left"})
}

type commitRequest struct {
	MemberID   string `json:"member_id"`
	Generation *int32 `json:"generation"`
	Offsets    []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	} `json:"offsets"`
}

func (b *Server) httpCommit(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req commitRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	switch {
	case err != nil:
	case req.MemberID == "" || req.Generation == nil:
		err = BadRequest("member_id and generation are required; a commit without a generation could overwrite a newer member's progress")
	case len(req.Offsets) == 0:
		err = BadRequest("offsets must not be empty")
	}
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	offsets := make(map[group.TopicPartition]coordinator.OffsetCommit, len(req.Offsets))
	for _, o := range req.Offsets {
		if o.Offset < 0 {
			b.writeError(w, r, BadRequest("offset %d of %s-%d is negative", o.Offset, o.Topic, o.Partition))
			return
		}
		offsets[group.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = coordinator.OffsetCommit{Offset: o.Offset, LeaderEpoch: -1}
	}
	if err := b.checkCommitRange(r.Context(), offsets); err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	perPartition, err := b.coord.CommitOffsets(r.Context(), groupID, req.MemberID, "", group.Generation(*req.Generation), offsets)
	if err == nil {
		for tp, perr := range perPartition {
			if perr != nil {
				err = fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, perr)
				break
			}
		}
	}
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "committed", "count": len(offsets)})
}

type resetRequest struct {
	Topic       string `json:"topic"`
	Partition   *int32 `json:"partition"`
	Offset      *int64 `json:"offset"`
	TimestampMs *int64 `json:"timestamp_ms"`
	To          string `json:"to"`
}

func (b *Server) httpReset(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	var req resetRequest
	if err == nil {
		err = decodeJSON(w, r, &req)
	}
	var targets map[int32]int64
	if err == nil {
		targets, err = b.resetTargets(r.Context(), req)
	}
	if err == nil {
		err = b.coord.ResetOffsets(r.Context(), groupID, map[string]map[int32]int64{req.Topic: targets})
	}
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	type reset struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	}
	var out []reset
	for p, o := range targets {
		out = append(out, reset{p, o})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	writeJSON(w, http.StatusOK, map[string]any{"topic": scopeFrom(r.Context()).name(req.Topic), "offsets": out})
}

// resetTargets resolves a reset request to an offset per partition.
func (b *Server) resetTargets(ctx context.Context, req resetRequest) (map[int32]int64, error) {
	given := 0
	for _, set := range []bool{req.Offset != nil, req.TimestampMs != nil, req.To != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, BadRequest("give exactly one of offset, timestamp_ms and to")
	}
	if req.To != "" && req.To != "earliest" && req.To != "latest" {
		return nil, BadRequest("to must be earliest or latest, not %q", req.To)
	}
	t := b.LookupTopic(req.Topic)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", node.ErrUnknownTopic, req.Topic)
	}
	parts := make([]int32, len(t.States))
	for i := range parts {
		parts[i] = int32(i)
	}
	if req.Partition != nil {
		if *req.Partition < 0 || int(*req.Partition) >= len(t.States) {
			return nil, fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, req.Topic, *req.Partition)
		}
		parts = []int32{*req.Partition}
	}
	q := internalOffsetsRequest{To: req.To}
	if req.TimestampMs != nil {
		q.TimestampMs = *req.TimestampMs
	}
	if req.Offset != nil {
		q.To = "latest"
	}
	out := make(map[int32]int64, len(parts))
	for _, i := range parts {
		pos, err := b.partitionOffsetsOf(ctx, t, i, q)
		if err != nil {
			return nil, err
		}
		off := pos.Offset
		if req.Offset != nil {
			off = *req.Offset
		}
		switch {
		case off < pos.LogStart:
			return nil, fmt.Errorf("%w: %s-%d offset %d is below the log start %d", wal.ErrOffsetOutOfRange,
				req.Topic, i, off, pos.LogStart)
		case off > pos.HighWatermark:
			return nil, BadRequest("%s-%d offset %d is beyond the log end %d; the readable range is [%d, %d]",
				req.Topic, i, off, pos.HighWatermark, pos.LogStart, pos.HighWatermark)
		}
		out[i] = off
	}
	return out, nil
}

// checkCommitRange refuses a commit of an offset beyond a partition's log
// end (every later fetch would find nothing there) or of an unknown
// partition.
func (b *Server) checkCommitRange(ctx context.Context, offsets map[group.TopicPartition]coordinator.OffsetCommit) error {
	for tp, o := range offsets {
		t := b.LookupTopic(tp.Topic)
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.States) {
			return fmt.Errorf("%w: %s-%d", node.ErrUnknownTopic, tp.Topic, tp.Partition)
		}
		pos, err := b.partitionOffsetsOf(ctx, t, tp.Partition, internalOffsetsRequest{To: "latest"})
		if err != nil {
			return err
		}
		if o.Offset > pos.HighWatermark {
			return BadRequest("offset %d of %s-%d is beyond the log end %d; commit the offset of the next message to read, at most %d",
				o.Offset, tp.Topic, tp.Partition, pos.HighWatermark, pos.HighWatermark)
		}
	}
	return nil
}
