package kafka

// OffsetFetch (key 9): committed offsets of one group (v0-7) or of several
// (v8+); a null topic list (v2+) asks for all of a group's offsets. A
// partition with no committed offset answers -1. Topics are addressed by name
// (v0-9); v10+ (topic IDs) is not advertised.

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

// fetchedPartition is one partition's answer, before it takes a wire shape.
type fetchedPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
}

func handleOffsetFetch(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.OffsetFetchRequest)
	resp := newResponse(req).(*kmsg.OffsetFetchResponse)
	if req.version >= 8 {
		for _, rg := range r.Groups {
			var topics map[string][]int32
			var order []string
			if rg.Topics != nil {
				topics = make(map[string][]int32)
				for _, t := range rg.Topics {
					order = append(order, t.Topic)
					topics[t.Topic] = t.Partitions
				}
			}
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group = rg.Group
			res, err := b.fetchGroupOffsets(rg.Group, order, topics)
			sg.ErrorCode = node.ErrorCode(err)
			for _, t := range res.order {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic = t
				for _, fp := range res.byTopic[t] {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch = fp.partition, fp.offset, fp.leaderEpoch
					sp.Metadata = &fp.metadata
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return done(resp), nil
	}
	var topics map[string][]int32
	var order []string
	if r.Topics != nil || req.version < 2 {
		topics = make(map[string][]int32)
		for _, t := range r.Topics {
			order = append(order, t.Topic)
			topics[t.Topic] = t.Partitions
		}
	}
	res, err := b.fetchGroupOffsets(r.Group, order, topics)
	if req.version >= 2 {
		resp.ErrorCode = node.ErrorCode(err)
	}
	for _, t := range res.order {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = t
		for _, fp := range res.byTopic[t] {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch = fp.partition, fp.offset, fp.leaderEpoch
			sp.Metadata = &fp.metadata
			if req.version < 2 {
				sp.ErrorCode = node.ErrorCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

type fetchedOffsets struct {
	order   []string
	byTopic map[string][]fetchedPartition
}

// fetchGroupOffsets answers the requested partitions (order and topics), or
// every committed offset of the group when topics is nil.
func (b *Server) fetchGroupOffsets(groupID string, order []string, topics map[string][]int32) (fetchedOffsets, error) {
	var tps []group.TopicPartition
	for _, t := range order {
		for _, p := range topics[t] {
			tps = append(tps, group.TopicPartition{Topic: t, Partition: p})
		}
	}
	if topics != nil && tps == nil {
		tps = []group.TopicPartition{} // asked for nothing: not "all"
	}
	if groupID == "" {
		return fetchedOffsets{}, node.ErrInvalidGroupID
	}
	got, err := b.coord.FetchOffsets(groupID, tps)
	out := fetchedOffsets{byTopic: make(map[string][]fetchedPartition)}
	if topics == nil {
		all := sortedTPs(got)
		for _, tp := range all {
			if len(out.byTopic[tp.Topic]) == 0 {
				out.order = append(out.order, tp.Topic)
			}
			o := got[tp]
			out.byTopic[tp.Topic] = append(out.byTopic[tp.Topic], fetchedPartition{tp.Partition, o.Offset, o.LeaderEpoch, o.Metadata})
		}
		return out, err
	}
	out.order = order
	for _, t := range order {
		for _, p := range topics[t] {
			fp := fetchedPartition{partition: p, offset: -1, leaderEpoch: -1}
			if o, ok := got[group.TopicPartition{Topic: t, Partition: p}]; ok {
				fp = fetchedPartition{p, o.Offset, o.LeaderEpoch, o.Metadata}
			}
			out.byTopic[t] = append(out.byTopic[t], fp)
		}
	}
	return out, err
}

// sortedTPs returns the keys of m sorted by topic and partition.
func sortedTPs(m map[group.TopicPartition]group.Offset) []group.TopicPartition {
	tps := slices.Collect(maps.Keys(m))
	slices.SortFunc(tps, func(a, b group.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return tps
}
