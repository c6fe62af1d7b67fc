package httpapi

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRangeAssign(t *testing.T) {
	b := &Server{Node: node.New(node.DefaultConfig(), zerolog.Nop())}
	b.ReplaceTopic(&node.Topic{Meta: meta.Topic{Name: "a", ID: [16]byte{1}}, States: make([]meta.PartitionState, 7), Partitions: make([]*partition.Partition, 7)})
	b.ReplaceTopic(&node.Topic{Meta: meta.Topic{Name: "b", ID: [16]byte{2}}, States: make([]meta.PartitionState, 2), Partitions: make([]*partition.Partition, 2)})
	sub := func(topics ...string) []byte {
		m := kmsg.ConsumerMemberMetadata{Topics: topics}
		return m.AppendTo(nil)
	}
	members := []group.MemberInfo{
		{ID: "m3", Metadata: sub("a")},
		{ID: "m1", Metadata: sub("a", "b")},
		{ID: "m2", Metadata: sub("a", "b")},
	}
	got := map[string]map[string][]int32{}
	for id, raw := range b.rangeAssign("g", members) {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		got[id] = map[string][]int32{}
		for _, tp := range a.Topics {
			got[id][tp.Topic] = tp.Partitions
		}
	}
	want := map[string]map[string][]int32{
		"m1": {"a": {0, 1, 2}, "b": {0}},
		"m2": {"a": {3, 4}, "b": {1}},
		"m3": {"a": {5, 6}},
	}
	for id, topics := range want {
		for tp, parts := range topics {
			if g := got[id][tp]; len(g) != len(parts) || (len(g) > 0 && (g[0] != parts[0] || g[len(g)-1] != parts[len(parts)-1])) {
				t.Errorf("%s %s: got %v, want %v", id, tp, g, parts)
			}
		}
		if len(got[id]) != len(topics) {
			t.Errorf("%s: got topics %v, want %v", id, got[id], topics)
		}
	}
}
