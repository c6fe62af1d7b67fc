package broker

// This file owns the pure decision core of a partition: from the durable
// end offsets of its replicas it derives the high watermark, and it releases
// produce replies once the high watermark covers their batches. It does no
// I/O, starts no goroutines and reads no clock, so the same code serves the
// lone broker of today and the replicated partition of DESIGN.md §4, and a
// deterministic simulation can drive it.
//
// Invariant: the high watermark never decreases.
// Invariant: the high watermark is at most the quorum-th largest durable end
// offset among the replicas (a record below it is on a quorum of disks).
// Invariant: the high watermark moves only once a quorum holds the start of
// the current leader epoch (Raft's commit rule), so a record of an older
// epoch is never counted committed by replication alone.
// Invariant: a reply is released only when the high watermark reaches the
// end of its batch.
//
// Guarded by the partition's owner goroutine; no locks.

import (
	"slices"

	"github.com/sluice-mq/sluice/wal"
)

type waiter struct {
	end   wal.Offset // the batch's last offset + 1
	token int        // the driver's handle on the reply
}

type core struct {
	replicas   []int32      // replica ids, this broker first
	durable    []wal.Offset // durable end offset of each replica, same order
	epochStart wal.Offset   // first offset written in the current leader epoch
	hw         wal.Offset
	waiting    []waiter // in end-offset order
}

// newCore starts a core whose log is durable up to hw on this broker.
func newCore(replicas []int32, epochStart, hw wal.Offset) *core {
	c := &core{
		replicas:   slices.Clone(replicas),
		durable:    make([]wal.Offset, len(replicas)),
		epochStart: epochStart,
		hw:         hw,
	}
	c.durable[0] = hw
	return c
}

// quorum is the number of replicas that must hold a record to commit it.
func (c *core) quorum() int { return len(c.replicas)/2 + 1 }

// wait registers a reply to release once the high watermark reaches end.
// It returns true if it already has, and the reply may go at once.
func (c *core) wait(end wal.Offset, token int) bool {
	if end <= c.hw {
		return true
	}
	i, _ := slices.BinarySearchFunc(c.waiting, end, func(w waiter, e wal.Offset) int { return int(w.end - e) })
	// Keep insertion order among equal ends.
	for i < len(c.waiting) && c.waiting[i].end == end {
		i++
	}
	c.waiting = slices.Insert(c.waiting, i, waiter{end: end, token: token})
	return false
}

// durableEnd records that replica has everything below end on disk. It
// returns the high watermark, whether it rose, and the tokens of the replies
// it released, in offset order.
func (c *core) durableEnd(replica int32, end wal.Offset) (wal.Offset, bool, []int) {
	i := slices.Index(c.replicas, replica)
	if i < 0 || end <= c.durable[i] {
		return c.hw, false, nil
	}
	c.durable[i] = end
	sorted := slices.Clone(c.durable)
	slices.SortFunc(sorted, func(a, b wal.Offset) int { return int(b - a) })
	candidate := sorted[c.quorum()-1]
	if candidate <= c.hw || candidate <= c.epochStart {
		return c.hw, false, nil
	}
	c.hw = candidate
	n := 0
	for n < len(c.waiting) && c.waiting[n].end <= c.hw {
		n++
	}
	released := make([]int, n)
	for j := range n {
		released[j] = c.waiting[j].token
	}
	c.waiting = c.waiting[n:]
	return c.hw, true, released
}
