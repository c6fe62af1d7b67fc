package broker

// DeleteRecords (key 21): move partitions' log start forward, Kafka's
// "delete records before offset". The wal moves the start (Log.AdvanceStart,
// durable when it returns) on the partition's owner goroutine, because it
// runs as the log's appender; the segments wholly below the new start go at
// the next retention run.
//
// Invariant: the log start never passes the high watermark, so a consumer
// can never be told that records it could not yet read were deleted.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

// deleteRecordsToHW is the offset that means "up to the high watermark".
const deleteRecordsToHW = -1

// defaultDeleteRecordsTimeout applies when the request carries no timeout.
const defaultDeleteRecordsTimeout = 15 * time.Second

func handleDeleteRecords(b *Broker, ctx context.Context, req *request) (reply, error) {
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
			p, err := b.partitionOf(rt.Topic, rp.Partition)
			if err == nil {
				var start wal.Offset
				if start, err = p.deleteRecords(ctx, rp.Offset); err == nil {
					sp.LowWatermark = int64(start)
				}
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				if !errors.Is(err, wal.ErrOffsetOutOfRange) && !errors.Is(err, errUnknownTopic) {
					b.logger.Warn().Err(err).Str("topic", rt.Topic).Int32("partition", rp.Partition).Msg("delete records")
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

// deleteRecords asks the owner goroutine to move the log start to offset
// (-1: the high watermark) and returns the new log start. It gives up when
// ctx ends; the owner may still apply the request afterwards.
func (p *partition) deleteRecords(ctx context.Context, offset int64) (wal.Offset, error) {
	type result struct {
		start wal.Offset
		err   error
	}
	res := make(chan result, 1) // the owner never blocks on a caller that gave up
	work := func() {
		hw, _ := p.highWatermark()
		to := wal.Offset(offset)
		if offset == deleteRecordsToHW {
			to = hw
		}
		if to < 0 || to > hw {
			res <- result{err: fmt.Errorf("delete records of %s-%d before %d, high watermark %d: %w", p.topic, p.index, offset, hw, wal.ErrOffsetOutOfRange)}
			return
		}
		start, err := p.log.AdvanceStart(to)
		if err != nil {
			err = fmt.Errorf("%w: delete records of %s-%d before %d: %w", errStorage, p.topic, p.index, to, err)
		} else {
			p.logger.Info().Int64("log_start", int64(start)).Msg("records deleted")
		}
		res <- result{start, err}
	}
	select {
	case p.ctl <- work:
	case <-p.done:
		return 0, errShuttingDown
	case <-ctx.Done():
		return 0, fmt.Errorf("delete records of %s-%d: owner busy: %w", p.topic, p.index, ctx.Err())
	}
	select {
	case r := <-res:
		return r.start, r.err
	case <-p.done:
		select {
		case r := <-res:
			return r.start, r.err
		default:
			return 0, errShuttingDown
		}
	case <-ctx.Done():
		return 0, fmt.Errorf("delete records of %s-%d: %w", p.topic, p.index, ctx.Err())
	}
}
