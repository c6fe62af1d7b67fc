package httpapi

// This file owns GET /v1/topics/{topic}/hot-keys: each partition's ingress
// bytes/s and records/s and its hottest keys by records/s, read on the
// partition's leader (broker/hotkeys). The leaders' figures travel in the
// internal partition listing (partitionStats.Ingress), so any broker
// answers for the whole topic. It also registers the ingress metrics
// (node.NewIngressCollector) beside the route, so the two appear together.
//
//	GET /v1/topics/{topic}/hot-keys[?top=N]
//	200 {"topic","window_seconds","counters","partitions":[{"partition","leader",
//	     "bytes_per_sec","records_per_sec","keys":[KeyRate],"error"}]}
//
// Invariant: the answer is bounded by the topic's partitions times
// hotkeys.K keys of at most hotkeys.KeyPrefix bytes each.

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-mq/sluice/broker/hotkeys"
	"github.com/sluice-mq/sluice/broker/node"
)

// HotKeys is the answer of GET /v1/topics/{topic}/hot-keys, one
// PartitionHotKeys per partition.
type (
	HotKeys          = hotkeys.TopicReport
	PartitionHotKeys = hotkeys.PartitionReport
)

func (b *Server) registerHotKeysAPI(mux routeMux) {
	b.M.Reg.MustRegister(node.NewIngressCollector(b.Node))
	mux.HandleFunc("GET /v1/topics/{topic}/hot-keys", b.httpHotKeys)
}

func (b *Server) httpHotKeys(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	top := hotkeys.K
	if s := r.URL.Query().Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > hotkeys.K {
			b.writeError(w, r, BadRequest("top %q: want a number from 1 to %d", s, hotkeys.K))
			return
		}
		top = n
	}
	t := b.LookupTopic(name)
	if t == nil {
		b.writeError(w, r, fmt.Errorf("%w: %s", node.ErrUnknownTopic, name))
		return
	}
	stats, errs := b.leaderStats(r.Context(), t)
	out := HotKeys{Topic: t.Meta.Name, WindowSeconds: hotkeys.DefaultTau.Seconds(), Counters: hotkeys.K,
		Partitions: make([]PartitionHotKeys, 0, len(t.States))}
	for i, st := range t.States {
		ph := PartitionHotKeys{Partition: int32(i), Leader: st.Leader, Report: hotkeys.Report{Keys: []hotkeys.KeyRate{}}}
		switch s, ok := stats[int32(i)]; {
		case !ok:
			ph.Error = errs[int32(i)]
		case s.Ingress == nil:
			ph.Error = fmt.Sprintf("node %d does not report ingress (an older version)", st.Leader)
		default:
			ph.Report = *s.Ingress
			if len(ph.Keys) > top {
				ph.Keys = ph.Keys[:top]
			}
		}
		out.Partitions = append(out.Partitions, ph)
	}
	writeJSON(w, http.StatusOK, out)
}
