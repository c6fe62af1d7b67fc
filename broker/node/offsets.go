package node

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
)

// This file owns the offset of a partition at a time (ListOffsets and the
// HTTP API's reset by time): the local log, else the remote index.

// listOffset answers one partition's lookup.
// The timestamps of ListOffsets that ask for the end and the start.
const (
	ListLatest   = -1
	ListEarliest = -2
)

func (b *Node) ListOffset(p *partition.Partition, ts int64) (offset, timestamp int64, err error) {
	hw, _ := p.HighWatermark()
	switch {
	case ts == ListLatest:
		return int64(hw), -1, nil
	case ts == ListEarliest:
		return int64(b.LogStart(context.Background(), p)), -1, nil
	case ts < 0:
		return -1, -1, fmt.Errorf("%w: timestamp %d", ErrInvalidRequest, ts)
	}
	if off, recTS, found, err := b.listRemoteOffset(p, ts); err != nil || found {
		return off, recTS, err
	}
	batch, err := p.Log().FindTimestamp(ts)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: find timestamp %d in %s-%d: %w", ErrStorage, ts, p.Topic(), p.Index(), err)
	}
	for batch != nil {
		h, err := wal.ParseBatchHeader(batch)
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if h.BaseOffset >= hw {
			break
		}
		off, recTS, found, err := FirstOffsetAtOrAfter(batch, ts, int64(p.Log().StartOffset()))
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %w", ErrStorage, err)
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

// listRemoteOffset looks ts up in the tiered part of the log, below the
// local log start: through the objects' footers to the first batch whose
// max timestamp reaches ts, then to its first record at or after ts.
func (b *Node) listRemoteOffset(p *partition.Partition, ts int64) (offset, timestamp int64, found bool, err error) {
	r := b.RemoteRange(context.Background(), p)
	local := p.Log().StartOffset()
	if r.Empty() || r.LogStart >= local {
		return -1, -1, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), RemoteReadTimeout)
	defer cancel()
	batch, err := b.Tiers.FindTimestamp(ctx, p.TopicID(), p.Index(), ts)
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: find timestamp %d in %s-%d: %w", ErrRemoteRead, ts, p.Topic(), p.Index(), err)
	}
	if batch == nil {
		return -1, -1, false, nil
	}
	off, recTS, found, err := FirstOffsetAtOrAfter(batch, ts, int64(r.LogStart))
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: %w", ErrRemoteRead, err)
	}
	return off, recTS, found && wal.Offset(off) < local, nil
}

// nextBatch returns the first batch at or after from whose max timestamp
// reaches ts, or nil.
func nextBatch(p *partition.Partition, from, hw wal.Offset, ts int64) ([]byte, error) {
	for from < hw {
		data, err := p.Log().Read(from, hw, 1)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if len(data) == 0 {
			return nil, nil
		}
		h, err := wal.ParseBatchHeader(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if h.MaxTimestamp >= ts {
			return data[:h.Length+12], nil
		}
		from = h.BaseOffset + wal.Offset(h.LastOffsetDelta) + 1
	}
	return nil, nil
}

// RemoteReadTimeout bounds one read of remote objects for a request.
const RemoteReadTimeout = 30 * time.Second
