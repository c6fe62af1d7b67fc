package kafka

// A consumer's Fetch of a retry tier (a topic queue.IsRetryTopic names)
// hands out no record before its due time, its sluice.retry.due.ms header
// (queue/headers.go): the answer stops before the batch holding the first
// record not yet due, and when that is the first batch the fetch waits
// until the record is due, or its MaxWait passes. The Go helper
// (payload/retry) and the HTTP queue hold records until due themselves;
// this is what keeps a plain Kafka consumer of a tier from running ahead.
//
// Invariant: a consumer never gets a record of a retry tier whose due time,
// by the broker's clock, is after the fetch. A tier is read in order, as
// the HTTP queue reads it, so records due earlier behind one not due wait
// for it. A record without a due time (not a retry copy) is due.

import (
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/records"
	"github.com/sluice-mq/sluice/queue"
)

// retryTier reports whether topic (an internal name) is a retry tier.
func retryTier(topic string) bool {
	_, local := node.SplitName(topic)
	return queue.IsRetryTopic(local)
}

// dueCut is data of a retry tier's partition cut before the first record
// not due now; when nothing is left, wake closes once that record is due
// (at most maxFetchWait from now, a fetch's longest wait).
func (b *Server) dueCut(topic string, data []byte) (due []byte, wake <-chan struct{}) {
	now := b.Now().UnixMilli()
	n, next, err := records.DuePrefix(data, now, queue.HeaderDue)
	if err != nil {
		// Unreadable records: served as read, as any other topic's.
		b.Logger.Warn().Err(err).Str("topic", topic).Msg("due times of a retry tier's records unread; served as read")
		return data, nil
	}
	if n > 0 || next == 0 {
		return data[:n], nil
	}
	ch := make(chan struct{})
	time.AfterFunc(min(time.Duration(next-now)*time.Millisecond, maxFetchWait), func() { close(ch) })
	return data[:0], ch
}
