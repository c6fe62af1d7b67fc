package broker

// ListOffsets (key 2): the earliest offset (-2), the latest (-1, the high
// watermark), or the first offset whose record timestamp is at or after a
// given time.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/wal"
)

const (
	listLatest   = -1
	listEarliest = -2
)

func handleListOffsets(b *Broker, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.ListOffsetsRequest)
	resp := newResponse(req).(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			p, err := b.partitionOf(rt.Topic, rp.Partition)
			if err == nil {
				err = checkLeaderEpoch(rp.CurrentLeaderEpoch, p.leaderEpoch())
			}
			if err == nil {
				sp.LeaderEpoch = int32(p.leaderEpoch())
				sp.Offset, sp.Timestamp, err = b.listOffset(p, rp.Timestamp)
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				sp.Offset, sp.Timestamp = -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

// listOffset answers one partition's lookup.
func (b *Broker) listOffset(p *partition, ts int64) (offset, timestamp int64, err error) {
	hw, _ := p.highWatermark()
	switch {
	case ts == listLatest:
		return int64(hw), -1, nil
	case ts == listEarliest:
		return int64(p.log.StartOffset()), -1, nil
	case ts < 0:
		return -1, -1, fmt.Errorf("%w: timestamp %d", errInvalidRequest, ts)
	}
	batch, err := p.log.FindTimestamp(ts)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: find timestamp %d in %s-%d: %w", errStorage, ts, p.topic, p.index, err)
	}
	for batch != nil {
		h, err := wal.ParseBatchHeader(batch)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %w", errStorage, err)
		}
		if h.BaseOffset >= hw {
			break
		}
		off, recTS, found, err := firstOffsetAtOrAfter(batch, ts, int64(p.log.StartOffset()))
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %w", errStorage, err)
		}
		if found && wal.Offset(off) < hw {
			return off, recTS, nil
		}
		// Record timestamps need not be ordered: look in the next batch.
		next := h.BaseOffset + wal.Offset(h.LastOffsetDelta) + 1
		if batch, err = nextBatch(p, next, hw, ts); err != nil {
			return -1, -1, err
		}
	}
	// No record at or after ts: Kafka answers offset -1.
	return -1, -1, nil
}

// nextBatch returns the first batch at or after from whose max timestamp
// reaches ts, or nil.
func nextBatch(p *partition, from, hw wal.Offset, ts int64) ([]byte, error) {
	for from < hw {
		data, err := p.log.Read(from, hw, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errStorage, err)
		}
		if len(data) == 0 {
			return nil, nil
		}
		h, err := wal.ParseBatchHeader(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errStorage, err)
		}
		if h.MaxTimestamp >= ts {
			return data[:h.Length+12], nil
		}
		from = h.BaseOffset + wal.Offset(h.LastOffsetDelta) + 1
	}
	return nil, nil
}
