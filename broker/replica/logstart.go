package replica

// This file owns the log start in replication. The leader refuses a fetch
// below its log start: those records are gone (DeleteRecords, retention),
// so a follower that far behind can never catch up by fetching; it is told
// where it may start instead (Kafka's OFFSET_OUT_OF_RANGE, after which the
// follower truncates fully and starts there), and it does not count as in
// sync meanwhile.
//
// Invariant: a fetch below fetchStart is answered ErrCodeOffsetOutOfRange;
// it neither reports a durable end nor keeps its sender in sync.
//
// Guarded by the owner of the Replica.

import "github.com/sluice-mq/sluice/wal"

// SetLogStart tells the replica its log's start offset, and fetchStart, the
// lowest offset a follower may fetch from: the base of the batch holding
// start, since a start moved by DeleteRecords may fall inside a batch and a
// follower copies whole batches.
func (r *Replica) SetLogStart(start, fetchStart wal.Offset) {
	r.logStart, r.fetchStart = start, min(fetchStart, start)
}

// LogStart is the log start last given to SetLogStart.
func (r *Replica) LogStart() wal.Offset { return r.logStart }

// belowLogStart answers a fetch from below fetchStart with where the
// follower may start, and reports whether it did.
func (r *Replica) belowLogStart(m Message, resp *Message) bool {
	if m.Offset >= r.fetchStart {
		return false
	}
	resp.Err = ErrCodeOffsetOutOfRange
	resp.LogStart = r.fetchStart
	resp.HW = r.hw
	r.send(*resp)
	return true
}
