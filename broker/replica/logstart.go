package replica

// This file owns the log start in replication. The leader refuses a fetch
// below its log start: those records are gone (DeleteRecords, retention),
// so a follower that far behind can never catch up by fetching; it is told
// where it may start instead (Kafka's OFFSET_OUT_OF_RANGE, after which the
// follower truncates fully and starts there), and it does not count as in
// sync meanwhile. The leader also learns each follower's log start from its
// fetches, and releases the waits for the low watermark: the lowest log
// start among the in-sync replicas, itself included, which DeleteRecords
// waits for (as Kafka's does), so records it deleted stay deleted whichever
// in-sync replica leads next.
//
// Invariant: a fetch below fetchStart is answered ErrCodeOffsetOutOfRange;
// it neither reports a durable end nor keeps its sender in sync.
// Invariant: every in-sync follower counts in the low watermark; one whose
// log start is not known yet (no fetch in this epoch) holds it at -1.
// Invariant: a low-watermark wait is released (or failed) exactly once, as
// a produce reply is (leader.go).
//
// Guarded by the owner of the Replica.

import "github.com/sluice-mq/sluice/wal"

// SetLogStart tells the replica its log's start offset, and fetchStart, the
// lowest offset a follower may fetch from: the base of the batch holding
// start, since a start moved by DeleteRecords may fall inside a batch and a
// follower copies whole batches. A leader whose start moved answers its
// held fetches at once, so the followers learn the new start (the driver
// puts it in every answer) without waiting out the hold.
func (r *Replica) SetLogStart(start, fetchStart wal.Offset) {
	moved := start > r.logStart
	r.logStart, r.fetchStart = start, min(fetchStart, start)
	if r.err != nil || r.role != RoleLeader || !moved {
		return
	}
	for i := range r.peers {
		if r.peers[i].parked {
			r.answerParked(&r.peers[i])
		}
	}
	if r.lowWaits > 0 {
		r.releaseWaiters()
	}
}

// LogStart is the log start last given to SetLogStart.
func (r *Replica) LogStart() wal.Offset { return r.logStart }

// LowWatermark is the lowest log start among the in-sync replicas, this
// leader included; on a replica that does not lead, its own log start.
func (r *Replica) LowWatermark() wal.Offset {
	if r.role != RoleLeader {
		return r.logStart
	}
	return r.lowWatermark()
}

func (r *Replica) lowWatermark() wal.Offset {
	low := r.logStart
	for i := range r.peers {
		if p := &r.peers[i]; r.peerInSync(p) {
			low = min(low, p.logStart)
		}
	}
	return low
}

// WaitLowWatermark parks reply t until the low watermark reaches off: every
// in-sync replica has moved its log start that far (DeleteRecords). Only
// the leader accepts; the reply fails if it steps down first.
func (r *Replica) WaitLowWatermark(off wal.Offset, t Token) {
	r.park(waiter{end: off, token: t, lowWatermark: true})
}

// belowLogStart answers a fetch from below fetchStart with where the
// follower may start, and reports whether it did.
func (r *Replica) belowLogStart(m Message, resp *Message) bool {
	if m.Offset >= r.fetchStart || r.cfg.bugs.serveBelowLogStart {
		return false
	}
	resp.Err = ErrCodeOffsetOutOfRange
	resp.LogStart = r.fetchStart
	resp.HW = r.hw
	r.send(*resp)
	return true
}
