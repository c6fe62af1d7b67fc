package kafka

// OffsetDelete (key 47): deletes committed offsets of an empty group, or of
// topics that no member of the group subscribes to.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleOffsetDelete(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.OffsetDeleteRequest)
	resp := newResponse(req).(*kmsg.OffsetDeleteResponse)
	var tps []group.TopicPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, group.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	perPartition, err := b.coord.DeleteOffsets(ctx, r.Group, tps)
	if err != nil {
		resp.ErrorCode = node.ErrorCode(err)
		return done(resp), nil
	}
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = node.ErrorCode(perPartition[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return done(resp), nil
}
