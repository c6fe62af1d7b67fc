package httpapi

// This file owns what one broker tells another for the HTTP listings
// (http_listings.go): the internal routes on the inter-broker listener's
// HTTP server (interbroker.go), their handlers, and the client side that
// asks the peers concurrently.
//
//	GET  /internal/v1/partitions?topic=t  200: {"topic_id","partitions":[partitionStats]}
//	                                      for the partitions of t this broker leads;
//	                                      404: no such topic here
//	GET  /internal/v1/groups              200: {"groups":[GroupListing]} this broker
//	                                      coordinates; 503: not loaded yet
//	POST /internal/v1/lag                 body {"group","partitions":[lagQuery]}
//	                                      200: {"partitions":[groupPartitionLag]}, one
//	                                      per query, with "error" where this broker
//	                                      does not lead the partition
//	GET  /internal/v1/health              200: this broker's health (healthapi)
//
// Invariant: a partition's figures (high watermark, log start, sizes,
// in-sync set, lag) are read only on the replica that leads it, so every
// broker that lists the partition reports the same replica's view.
// Invariant: a peer that does not answer within listingPeerTimeout costs the
// listing only that peer's part, reported in the answer; never the whole
// listing.
//
// Nothing here changes state: the handlers read the partitions' published
// state and the coordinator's groups under their own locks.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/coordinator"
	"github.com/sluice-mq/sluice/broker/hotkeys"
	"github.com/sluice-mq/sluice/broker/httpapi/healthapi"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/wal"
)

const (
	InternalPartitionsPath = "/internal/v1/partitions"
	internalGroupsPath     = "/internal/v1/groups"
	internalLagPath        = "/internal/v1/lag"
	// listingPeerTimeout bounds one question to a peer.
	listingPeerTimeout = 3 * time.Second
)

// partitionStats is what a partition's leader reports of it.
type partitionStats struct {
	Partition   int32   `json:"partition"`
	LeaderEpoch int32   `json:"leader_epoch"`
	InSync      []int32 `json:"in_sync"`
	PartitionFigures
	Ingress *hotkeys.Report `json:"ingress,omitempty"` // http_hotkeys.go
}

// PartitionFigures are a partition's offsets and sizes on its leader
// (exported only so that a JSON decoder can fill the pointer that
// partitionDescription embeds).
type PartitionFigures struct {
	HighWatermark int64 `json:"high_watermark"`
	// LogStart is the log start clients see: the remote one while
	// anything is tiered below the local log.
	LogStart      int64 `json:"log_start"`
	LocalLogStart int64 `json:"local_log_start"`
	LocalBytes    int64 `json:"local_bytes"`
	// The remote log is [RemoteLogStart, RemoteEnd), in objects of
	// RemoteBytes in all; RemoteError says why they could not be read.
	RemoteLogStart int64  `json:"remote_log_start"`
	RemoteEnd      int64  `json:"remote_end"`
	RemoteBytes    int64  `json:"remote_bytes"`
	RemoteError    string `json:"remote_error,omitempty"`
}

// PartitionsAnswer is the body of GET /internal/v1/partitions.
type PartitionsAnswer struct {
	TopicID    string           `json:"topic_id"`
	Partitions []partitionStats `json:"partitions"`
}

// lagQuery asks a leader for one partition's lag from a committed offset.
type lagQuery struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
}

type lagQuestion struct {
	Group      string     `json:"group"`
	Partitions []lagQuery `json:"partitions"`
}

// groupPartitionLag is a partition's lag, or why its leader could not tell.
type groupPartitionLag struct {
	PartitionLag
	Error string `json:"error,omitempty"`
}

// registerListingInternal adds the internal listing routes to the
// inter-broker listener's mux.
func (b *Server) registerListingInternal(mux *http.ServeMux) {
	mux.HandleFunc("GET "+InternalPartitionsPath, b.httpInternalPartitions)
	mux.HandleFunc("GET "+internalGroupsPath, b.httpInternalGroups)
	mux.HandleFunc("POST "+internalLagPath, b.httpInternalLag)
	mux.HandleFunc("GET "+healthapi.InternalPath, healthapi.Internal(b.Node)) // this broker's health
}

// leading returns the local replica of partition i of t if it leads it now.
func leading(t *node.Topic, i int32) *partition.Partition {
	if i < 0 || int(i) >= len(t.Partitions) || t.Partitions[i] == nil {
		return nil
	}
	if p := t.Partitions[i]; p.ReplicaStatus().Role == replica.RoleLeader {
		return p
	}
	return nil
}

func (b *Server) httpInternalPartitions(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	t := b.LookupTopic(name)
	if t == nil {
		b.writeError(w, r, fmt.Errorf("%w: %s", node.ErrUnknownTopic, name))
		return
	}
	out := PartitionsAnswer{TopicID: node.UUIDString(t.Meta.ID), Partitions: []partitionStats{}}
	for i := range t.Partitions {
		if p := leading(t, int32(i)); p != nil {
			out.Partitions = append(out.Partitions, b.localPartitionStats(r.Context(), p))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// localPartitionStats reads the figures of a partition this broker leads.
func (b *Server) localPartitionStats(ctx context.Context, p *partition.Partition) partitionStats {
	rs := p.ReplicaStatus()
	hw, _ := p.HighWatermark()
	s := partitionStats{Partition: p.Index(), LeaderEpoch: int32(rs.Epoch), InSync: []int32{},
		PartitionFigures: PartitionFigures{HighWatermark: int64(hw), LogStart: int64(b.LogStart(ctx, p)),
			LocalLogStart: int64(p.Log().StartOffset()), LocalBytes: p.Log().Size()}}
	for _, id := range rs.InSync {
		s.InSync = append(s.InSync, int32(id))
	}
	slices.Sort(s.InSync)
	ingress := p.Ingress(0)
	s.Ingress = &ingress
	if b.Tiers == nil {
		return s
	}
	r, n, err := b.remoteBytes(ctx, p)
	if err != nil {
		s.RemoteError = err.Error()
	}
	s.RemoteLogStart, s.RemoteEnd, s.RemoteBytes = int64(r.LogStart), int64(r.RemoteEnd), n
	return s
}

// remoteBytes is the partition's remote range and the size of the objects
// that hold it, read from its remote index (etcd and the manifests).
func (b *Server) remoteBytes(ctx context.Context, p *partition.Partition) (tier.Range, int64, error) {
	objs, h, err := b.Tiers.Objects(ctx, p.TopicID(), p.Index())
	if err != nil {
		return tier.Range{}, 0, fmt.Errorf("read the remote index: %w", err)
	}
	var n int64
	for _, o := range objs {
		if int64(o.Next) > h.LogStart { // objects wholly below the log start await deletion
			n += o.Size
		}
	}
	return tier.Range{LogStart: wal.Offset(h.LogStart), RemoteEnd: wal.Offset(h.RemoteEnd)}, n, nil
}

func (b *Server) httpInternalGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := b.localGroups(r.Context())
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": gs})
}

// localGroups lists the groups this broker coordinates, once it has taken
// them over after starting.
func (b *Server) localGroups(ctx context.Context) ([]GroupListing, error) {
	if b.coord == nil {
		return nil, coordinator.ErrCoordinatorLoading
	}
	if err := b.coord.AwaitPlaced(ctx); err != nil {
		return nil, err
	}
	out := []GroupListing{}
	for _, g := range b.coord.ListGroups() {
		out = append(out, GroupListing{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Coordinator: b.Cfg.NodeID})
	}
	return out, nil
}

func (b *Server) httpInternalLag(w http.ResponseWriter, r *http.Request) {
	var q lagQuestion
	if err := decodeJSON(w, r, &q); err != nil {
		b.writeError(w, r, err)
		return
	}
	now := time.Now()
	out := make([]groupPartitionLag, 0, len(q.Partitions))
	for _, lq := range q.Partitions {
		out = append(out, b.localLag(q.Group, lq, now))
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": out})
}

// localLag is the lag of a partition this broker leads, without the commit
// rate (partitionBacklog), or an entry saying it does not lead it.
func (b *Server) localLag(groupID string, lq lagQuery, now time.Time) groupPartitionLag {
	var p *partition.Partition
	if t := b.LookupTopic(lq.Topic); t != nil {
		p = leading(t, lq.Partition)
	}
	if p == nil {
		return groupPartitionLag{PartitionLag: PartitionLag{Topic: lq.Topic, Partition: lq.Partition, Committed: lq.Committed},
			Error: fmt.Sprintf("node %d does not lead %s-%d", b.Cfg.NodeID, lq.Topic, lq.Partition)}
	}
	return groupPartitionLag{PartitionLag: partitionBacklog(p, lq.Committed, now)}
}

// askPeer sends one internal request to node id's inter-broker listener,
// within listingPeerTimeout, and decodes its 200 answer into out (peerCall).
func (b *Server) askPeer(ctx context.Context, id int32, method, pathQuery string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, listingPeerTimeout)
	defer cancel()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return fmt.Errorf("node %d: encode: %w", id, err)
		}
	}
	return b.peerCall(ctx, id, fmt.Sprintf("node %d", id), method, pathQuery, "application/json", raw, out)
}

// fanOut runs ask for every node in ids concurrently and returns each
// node's error (nil where it succeeded). ask must be safe to run
// concurrently.
func fanOut(ids []int32, ask func(id int32) error) map[int32]error {
	var mu sync.Mutex
	errs := make(map[int32]error, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ask(id)
			mu.Lock()
			errs[id] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errs
}

// leaderStats collects the stats of every partition of t from its leader:
// this broker's own replicas where it leads, the other leaders' answers
// otherwise. A partition missing from the result has its reason in errs.
func (b *Server) leaderStats(ctx context.Context, t *node.Topic) (map[int32]partitionStats, map[int32]string) {
	stats := make(map[int32]partitionStats, len(t.States))
	errs := make(map[int32]string)
	byLeader := make(map[int32][]int32)
	for i, st := range t.States {
		part := int32(i)
		switch p := leading(t, part); {
		case p != nil:
			stats[part] = b.localPartitionStats(ctx, p)
		case st.Leader < 0:
			errs[part] = "the partition has no leader"
		case st.Leader == b.Cfg.NodeID:
			errs[part] = fmt.Sprintf("node %d is taking the leadership over; retry", st.Leader)
		default:
			byLeader[st.Leader] = append(byLeader[st.Leader], part)
		}
	}
	var mu sync.Mutex
	q := InternalPartitionsPath + "?topic=" + url.QueryEscape(t.Meta.Name)
	failed := fanOut(mapKeys(byLeader), func(id int32) error {
		var ans PartitionsAnswer
		if err := b.askPeer(ctx, id, http.MethodGet, q, nil, &ans); err != nil {
			return err
		}
		if ans.TopicID != node.UUIDString(t.Meta.ID) {
			return fmt.Errorf("node %d knows topic %s as id %s, not %s", id, t.Meta.Name, ans.TopicID, node.UUIDString(t.Meta.ID))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range ans.Partitions {
			if slices.Contains(byLeader[id], s.Partition) {
				stats[s.Partition] = s
			}
		}
		return nil
	})
	for id, parts := range byLeader {
		for _, part := range parts {
			if _, ok := stats[part]; ok {
				continue
			}
			if err := failed[id]; err != nil {
				errs[part] = err.Error()
			} else {
				errs[part] = fmt.Sprintf("node %d does not lead the partition (yet); retry", id)
			}
		}
	}
	return stats, errs
}

// leaderLag computes the lag of each queried partition on its leader:
// here where this broker leads it, by asking the leader otherwise. The
// answer keeps the order of qs.
func (b *Server) leaderLag(ctx context.Context, groupID string, qs []lagQuery) []groupPartitionLag {
	now := time.Now()
	out := make([]groupPartitionLag, len(qs))
	byLeader := make(map[int32][]int) // indexes into qs
	for i, lq := range qs {
		out[i] = groupPartitionLag{PartitionLag: PartitionLag{Topic: lq.Topic, Partition: lq.Partition, Committed: lq.Committed}}
		t := b.LookupTopic(lq.Topic)
		switch {
		case t == nil || lq.Partition < 0 || int(lq.Partition) >= len(t.States):
			out[i].Error = "no such partition"
		case leading(t, lq.Partition) != nil:
			out[i] = b.localLag(groupID, lq, now)
		case t.States[lq.Partition].Leader < 0:
			out[i].Error = "the partition has no leader"
		default:
			l := t.States[lq.Partition].Leader
			byLeader[l] = append(byLeader[l], i)
		}
	}
	failed := fanOut(mapKeys(byLeader), func(id int32) error {
		idx := byLeader[id]
		question := lagQuestion{Group: groupID}
		for _, i := range idx {
			question.Partitions = append(question.Partitions, qs[i])
		}
		var ans struct {
			Partitions []groupPartitionLag `json:"partitions"`
		}
		if err := b.askPeer(ctx, id, http.MethodPost, internalLagPath, question, &ans); err != nil {
			return err
		}
		if len(ans.Partitions) != len(idx) {
			return fmt.Errorf("node %d answered %d partitions of %d", id, len(ans.Partitions), len(idx))
		}
		for k, i := range idx { // each index belongs to this goroutine alone
			out[i] = ans.Partitions[k]
		}
		return nil
	})
	for id, err := range failed {
		if err != nil {
			for _, i := range byLeader[id] {
				out[i].Error = err.Error()
			}
		}
	}
	// The commit rate is the one this broker, the coordinator, observed.
	for i := range out {
		if out[i].Error == "" {
			out[i].PartitionLag = b.withCommitRate(groupID, out[i].PartitionLag, now)
		}
	}
	return out
}

// mapKeys lists m's keys in ascending order.
func mapKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
