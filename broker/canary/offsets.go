package canary

// Reading the group's committed offsets back, once a round.
//
// Invariants:
//   - The request goes to the group's coordinator as the broker names it
//     (FindCoordinator), never through franz-go's request sharder: for an
//     OffsetFetch answered below version 10 the sharder asks for the
//     topic's metadata after every response to fill in its id, a Metadata
//     request a round for nothing the canary reads.
//   - The coordinator is remembered until a request to it fails or it
//     answers that it is not (or not yet) the coordinator; then it is
//     looked up again on the next round, so a moved group costs one round.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetReader reads one group's committed offsets of one topic.
type offsetReader struct {
	cl           *kgo.Client
	group, topic string
	coord        int32 // the coordinator's node id; -1 when unknown
}

func newOffsetReader(cl *kgo.Client, group, topic string) *offsetReader {
	return &offsetReader{cl: cl, group: group, topic: topic, coord: -1}
}

// committed returns the committed offset of every partition of the topic
// that has one.
func (r *offsetReader) committed(ctx context.Context) (map[int32]int64, error) {
	if r.coord < 0 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = r.group, []string{r.group}
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return nil, fmt.Errorf("find coordinator: %w", err)
		}
		node, code := resp.NodeID, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		if err := kerr.ErrorForCode(code); err != nil {
			return nil, fmt.Errorf("find coordinator: %w", err)
		}
		r.coord = node
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = r.group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = r.topic
	req.Topics = []kmsg.OffsetFetchRequestTopic{t} // no partitions: every partition with an offset
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = r.group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic = r.topic
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{gt}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	kresp, err := r.cl.Broker(int(r.coord)).Request(ctx, req)
	if err != nil {
		r.coord = -1
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	code, topics := resp.ErrorCode, resp.Topics
	if len(resp.Groups) > 0 { // v8 and later answer per group
		code = resp.Groups[0].ErrorCode
		topics = topics[:0]
		for _, gt := range resp.Groups[0].Topics {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = gt.Topic
			for _, p := range gt.Partitions {
				tp := kmsg.NewOffsetFetchResponseTopicPartition()
				tp.Partition, tp.Offset, tp.ErrorCode = p.Partition, p.Offset, p.ErrorCode
				t.Partitions = append(t.Partitions, tp)
			}
			topics = append(topics, t)
		}
	}
	if err := kerr.ErrorForCode(code); err != nil {
		r.coord = -1 // NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, …: ask again next round
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	out := make(map[int32]int64)
	for _, t := range topics {
		if t.Topic != r.topic {
			continue
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("offset fetch %s/%d: %w", t.Topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}
