package httpapi

// This file owns the HTTP API's listings and descriptions:
//
//	GET /v1/topics           every topic: name, id, partition count, replication factor
//	GET /v1/topics/{topic}   its partitions (leader, replicas, in-sync set, high
//	                         watermark, log start, local and remote bytes) and configs
//	GET /v1/groups           every group of the cluster with its coordinator
//	GET /v1/groups/{group}   state, members and their assignments, committed
//	                         offsets with lag (answered by the coordinator)
//	GET /v1/brokers          every broker: id, AZ, pool, addresses, controller, live
//	GET /v1/brokers/{id}/health  a live broker's etcd round trip, disk level, fsync latency (healthapi)
//
// Any broker answers any of them with the same figures. Placement (leader,
// replicas, epochs) comes from the partition states in etcd that every
// broker follows; a partition's offsets, sizes and in-sync set come from its
// leader, asked over the inter-broker listener (http_listings_internal.go)
// when it is another broker; a group's listing is merged from every live
// broker, each naming the groups it coordinates. What a peer could not
// answer is reported in the listing ("stats_error", "errors") rather than
// failing it.
//
// Invariant: nothing here changes state.

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/httpapi/healthapi"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
)

// registerListingAPI adds the listing routes to the public HTTP mux.
func (b *Server) registerListingAPI(mux routeMux) {
	mux.HandleFunc("GET /v1/topics", b.httpListTopics)
	mux.HandleFunc("GET /v1/topics/{topic}", b.httpDescribeTopic)
	mux.HandleFunc("GET /v1/groups", b.httpListGroups)
	mux.HandleFunc("GET /v1/groups/{group}", b.toCoordinator(b.httpDescribeGroup))
	mux.HandleFunc("GET /v1/brokers", b.httpListBrokers)
	mux.HandleFunc(healthapi.Route, healthapi.Public(b.Node, b.askPeer, b.writeError))
}

type TopicSummary struct {
	Name              string `json:"name"`
	TopicID           string `json:"topic_id"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	Tiered            bool   `json:"tiered"`
}

type TopicDescription struct {
	Name              string                 `json:"name"`
	TopicID           string                 `json:"topic_id"`
	ReplicationFactor int16                  `json:"replication_factor"`
	Tiered            bool                   `json:"tiered"`
	Partitions        []partitionDescription `json:"partitions"`
	Configs           []TopicConfig          `json:"configs"`
}

// partitionDescription is one partition of GET /v1/topics/{topic}. The
// figures are absent, and StatsError says why, when the leader could not
// be asked.
type partitionDescription struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"` // -1: none, or not live
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	// InSync is the leader's in-sync set; without the leader's answer,
	// the set Metadata reports (the one the leader published, or the
	// live replicas).
	InSync  []int32 `json:"in_sync"`
	Offline []int32 `json:"offline_replicas"`
	*PartitionFigures
	StatsError string `json:"stats_error,omitempty"`
}

type TopicConfig struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	IsDefault bool   `json:"is_default"`
}

func (b *Server) httpListTopics(w http.ResponseWriter, r *http.Request) {
	out := []TopicSummary{}
	visible := visibleFrom(r.Context()) // the pipeline's scope and DESCRIBE filter
	s := scopeFrom(r.Context())
	for _, t := range b.SortedTopics() {
		if !visible(t.Meta.Name) {
			continue
		}
		out = append(out, TopicSummary{Name: s.name(t.Meta.Name), TopicID: node.UUIDString(t.Meta.ID), Partitions: int32(len(t.States)),
			ReplicationFactor: t.Meta.ReplicationFactor, Tiered: t.Settings.Tiered})
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

func (b *Server) httpDescribeTopic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	t := b.LookupTopic(name)
	if t == nil {
		b.writeError(w, r, fmt.Errorf("%w: %s", node.ErrUnknownTopic, name))
		return
	}
	live := make(map[int32]bool)
	for _, bi := range b.Brokers() {
		live[bi.NodeID] = true
	}
	stats, errs := b.leaderStats(r.Context(), t)
	sc := scopeFrom(r.Context())
	out := TopicDescription{Name: sc.name(t.Meta.Name), TopicID: node.UUIDString(t.Meta.ID), ReplicationFactor: t.Meta.ReplicationFactor,
		Tiered: t.Settings.Tiered, Partitions: []partitionDescription{}, Configs: []TopicConfig{}}
	for i, st := range t.States {
		pd := partitionDescription{Partition: int32(i), Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
			Replicas: slices.Clone(st.Replicas), InSync: []int32{}, Offline: []int32{}}
		if !live[st.Leader] {
			pd.Leader = -1
		}
		s, ok := stats[int32(i)]
		for _, id := range st.Replicas {
			if !live[id] {
				pd.Offline = append(pd.Offline, id)
			}
		}
		if ok {
			pd.InSync, pd.PartitionFigures = s.InSync, &s.PartitionFigures
		} else {
			pd.InSync, pd.StatsError = b.ReportedInSync(st, live), sc.message(errs[int32(i)])
		}
		out.Partitions = append(out.Partitions, pd)
	}
	for _, c := range node.DescribeTopicConfigs(t.Meta.Configs, t.Meta.ReplicationFactor, b.Cfg.TopicDefaults(), nil, false) {
		out.Configs = append(out.Configs, TopicConfig{Name: c.Name, Value: deref(c.Value), IsDefault: c.IsDefault})
	}
	writeJSON(w, http.StatusOK, out)
}

type GroupListing struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

// NodeError is a broker a listing could not ask, and why.
type NodeError struct {
	Node    int32  `json:"node"`
	Message string `json:"message"`
}

func (b *Server) httpListGroups(w http.ResponseWriter, r *http.Request) {
	var mu sync.Mutex
	byGroup := make(map[string]GroupListing)
	add := func(gs []GroupListing) {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range gs {
			// A group moving between coordinators can be listed by both for
			// a moment; the placement's choice wins.
			if prev, ok := byGroup[g.Group]; !ok || prev.Coordinator != b.GroupCoordinator(g.Group).NodeID {
				byGroup[g.Group] = g
			}
		}
	}
	var ids []int32
	for _, bi := range b.Brokers() {
		ids = append(ids, bi.NodeID)
	}
	if !slices.Contains(ids, b.Cfg.NodeID) {
		ids = append(ids, b.Cfg.NodeID)
	}
	failed := fanOut(ids, func(id int32) error {
		if id == b.Cfg.NodeID {
			gs, err := b.localGroups(r.Context())
			if err == nil {
				add(gs)
			}
			return err
		}
		var ans struct {
			Groups []GroupListing `json:"groups"`
		}
		err := b.askPeer(r.Context(), id, http.MethodGet, internalGroupsPath, nil, &ans)
		if err == nil {
			add(ans.Groups)
		}
		return err
	})
	out := make([]GroupListing, 0, len(byGroup))
	visible := visibleFrom(r.Context()) // the pipeline's scope and DESCRIBE filter
	s := scopeFrom(r.Context())
	for _, g := range byGroup {
		if !visible(g.Group) {
			continue
		}
		g.Group = s.name(g.Group)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	errs := []NodeError{}
	for _, id := range mapKeys(failed) {
		if err := failed[id]; err != nil {
			errs = append(errs, NodeError{Node: id, Message: s.message(err.Error())})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Groups []GroupListing `json:"groups"`
		Errors []NodeError    `json:"errors"`
	}{out, errs})
}

type GroupDescription struct {
	Group        string              `json:"group"`
	Coordinator  int32               `json:"coordinator"`
	State        string              `json:"state"`
	ProtocolType string              `json:"protocol_type"`
	Protocol     string              `json:"protocol"`
	Members      []groupMember       `json:"members"`
	Offsets      []groupPartitionLag `json:"offsets"`
}

type groupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	// Assignment is decoded for the "consumer" protocol type only, and
	// empty until the group is Stable.
	Assignment []assignedTopic `json:"assignment"`
}

// httpDescribeGroup runs on the group's coordinator (toCoordinator).
func (b *Server) httpDescribeGroup(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	d, err := b.coord.DescribeGroup(groupID)
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	qs, err := b.lagQueries(groupID)
	if err != nil {
		b.groupHTTPError(w, r, err)
		return
	}
	s := scopeFrom(r.Context())
	out := GroupDescription{Group: s.name(groupID), Coordinator: b.Cfg.NodeID, State: d.State, ProtocolType: d.ProtocolType,
		Protocol: d.Protocol, Members: []groupMember{}, Offsets: s.showLags(b.withPauses(r, groupID, b.leaderLag(r.Context(), groupID, qs)))}
	for _, m := range d.Members {
		gm := groupMember{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assignment: []assignedTopic{}}
		if d.ProtocolType == httpProtocolType && len(m.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.Assignment); err == nil {
				gm.Assignment = showAssignment(s, groupID, a)
			}
		}
		out.Members = append(out.Members, gm)
	}
	writeJSON(w, http.StatusOK, out)
}

// lagQueries lists the partitions the group has committed or its members
// are assigned (lag.go's rule), in topic and partition order, with the
// committed offset (NoCommit where there is none).
func (b *Server) lagQueries(groupID string) ([]lagQuery, error) {
	offsets, err := b.coord.FetchOffsets(groupID, nil)
	if err != nil {
		return nil, err
	}
	committed := make(map[group.TopicPartition]int64, len(offsets))
	for tp, o := range offsets {
		committed[tp] = o.Offset
	}
	for _, tp := range b.assignedPartitions(groupID) {
		if _, ok := committed[tp]; !ok {
			committed[tp] = NoCommit
		}
	}
	qs := make([]lagQuery, 0, len(committed))
	for tp, off := range committed {
		qs = append(qs, lagQuery{Topic: tp.Topic, Partition: tp.Partition, Committed: off})
	}
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].Topic != qs[j].Topic {
			return qs[i].Topic < qs[j].Topic
		}
		return qs[i].Partition < qs[j].Partition
	})
	return qs, nil
}

type BrokerListing struct {
	ID          int32  `json:"id"`
	AZ          string `json:"az,omitempty"`
	Pool        string `json:"pool,omitempty"` // live brokers only: "shared" unless --pool
	Kafka       string `json:"kafka,omitempty"`
	HTTP        string `json:"http,omitempty"`
	InterBroker string `json:"inter_broker,omitempty"`
	StartedMs   int64  `json:"started_ms,omitempty"`
	Controller  bool   `json:"controller"`
	Live        bool   `json:"live"`
	// Draining: an operator asked to move leadership and groups off it
	// (POST /v1/admin/brokers/{id}/drain).
	Draining bool `json:"draining"`
	// Leaders is how many partitions it leads in this broker's view.
	Leaders int `json:"leaders"`
}

// httpListBrokers lists the live brokers with their registrations, then
// the brokers that are replicas of some partition but not live. A
// registration lives only as long as its broker's lease, so of a broker
// that is gone only its id is known.
func (b *Server) httpListBrokers(w http.ResponseWriter, _ *http.Request) {
	ctl := b.ControllerID()
	out := []BrokerListing{}
	seen := make(map[int32]bool)
	for _, bi := range b.Brokers() {
		bl := BrokerListing{ID: bi.NodeID, AZ: bi.AZ, Pool: meta.PoolOrDefault(bi.Pool), Kafka: bi.Kafka, HTTP: bi.HTTP,
			InterBroker: bi.InterBroker, Controller: bi.NodeID == ctl, Live: true}
		if !bi.Started.IsZero() {
			bl.StartedMs = bi.Started.UnixMilli()
		}
		out = append(out, bl)
		seen[bi.NodeID] = true
	}
	for _, t := range b.SortedTopics() {
		for _, st := range t.States {
			for _, id := range st.Replicas {
				if !seen[id] {
					seen[id] = true
					out = append(out, BrokerListing{ID: id, Controller: id == ctl})
				}
			}
		}
	}
	leaders := map[int32]int{}
	for _, t := range b.SortedTopics() {
		for _, st := range t.States {
			if st.Leader >= 0 {
				leaders[st.Leader]++
			}
		}
	}
	draining := b.Draining()
	for i := range out {
		out[i].Leaders = leaders[out[i].ID]
		out[i].Draining = slices.Contains(draining, out[i].ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	writeJSON(w, http.StatusOK, struct {
		Controller int32           `json:"controller"`
		Brokers    []BrokerListing `json:"brokers"`
	}{ctl, out})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
