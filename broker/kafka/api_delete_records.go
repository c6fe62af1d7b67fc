package kafka

// DeleteRecords (key 21): move partitions' log start forward, Kafka's
// "delete records before offset". Only the leader serves it (elsewhere:
// NOT_LEADER_OR_FOLLOWER). The wal moves the start (Log.AdvanceStart,
// durable when it returns) on the partition's owner goroutine, because it
// runs as the log's appender (Partition.DeleteRecords); the followers move
// theirs as they learn the leader's from their fetches, and the answer
// waits until every in-sync replica has (the low watermark, which it
// returns), so the records stay deleted after a leader change. A request
// whose timeout passes first gets REQUEST_TIMED_OUT. The segments wholly
// below the new start go at the next retention run. The partition keeps
// the log start at or below the high watermark (broker/partition/doc.go).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/wal"
)

// defaultDeleteRecordsTimeout applies when the request carries no timeout.
const defaultDeleteRecordsTimeout = 15 * time.Second

func handleDeleteRecords(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.DeleteRecordsRequest)
	resp := newResponse(req).(*kmsg.DeleteRecordsResponse)
	timeout := time.Duration(r.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultDeleteRecordsTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			p, err := b.PartitionOf(rt.Topic, rp.Partition)
			if err == nil {
				var low wal.Offset
				if low, err = p.DeleteRecords(ctx, rp.Offset); err == nil {
					err = b.DeleteRemoteRecords(ctx, p, rp.Offset)
					// The log start clients see is the remote one while
					// anything is tiered below the local log.
					sp.LowWatermark = int64(min(low, b.LogStart(ctx, p)))
				}
			}
			if err != nil {
				sp.ErrorCode = node.ErrorCode(err)
				if !errors.Is(err, wal.ErrOffsetOutOfRange) && !errors.Is(err, node.ErrUnknownTopic) && !errors.Is(err, node.ErrNotLeader) {
					b.Logger.Warn().Err(err).Str("topic", rt.Topic).Int32("partition", rp.Partition).Msg("delete records")
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}
