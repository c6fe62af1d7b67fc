package kafka

// coordinator.OffsetCommit (key 8): a member commits with its generation, or an admin
// (generation -1, no member id) while the group is empty. The offsets of one
// request are written to etcd in one transaction before the reply.
// Topics are addressed by name (v0-9); v10+ (topic IDs) is not advertised.

import (
	"context"

	"github.com/sluice-mq/sluice/broker/coordinator"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/node"
)

func handleOffsetCommit(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.OffsetCommitRequest)
	resp := newResponse(req).(*kmsg.OffsetCommitResponse)
	offsets := make(map[group.TopicPartition]coordinator.OffsetCommit)
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			epoch := int32(-1)
			if req.version >= 6 {
				epoch = p.LeaderEpoch
			}
			offsets[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = coordinator.OffsetCommit{
				Offset: p.Offset, LeaderEpoch: epoch, Metadata: derefString(p.Metadata),
			}
		}
	}
	perPartition, err := b.coord.CommitOffsets(ctx, r.Group, r.MemberID, derefString(r.InstanceID),
		group.Generation(r.Generation), offsets)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			perr := err
			if perr == nil {
				perr = perPartition[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}]
			}
			rp.ErrorCode = node.ErrorCode(perr)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return done(resp), nil
}
