package replica

// This file owns the epoch chain of a log: which epoch wrote which offsets,
// the OffsetForLeaderEpoch lookup (KIP-320) and the divergence rule of a
// follower's fetch (KIP-595).
//
// Invariant: entries are in strictly increasing Epoch and non-decreasing
// Start order, and every Start is below the log end it describes.
//
// Pure functions over slices; the caller owns the slice.

import "github.com/sluice-mq/sluice/wal"

// endOffsetForEpoch answers OffsetForLeaderEpoch on chain c of a log ending
// at end: the largest epoch <= e and the offset where it ends (the next
// epoch's start, or end). With no such epoch (e predates the chain, which
// retention may have trimmed, or the chain is empty) it answers e itself and
// the start of the chain's first epoch (end if the chain is empty), as Kafka
// and the broker's OffsetForLeaderEpoch do: every batch of this log from
// there on is of a later epoch, so the asker's batches of e diverge there at
// the latest. Never -1: a DivergingEpoch of -1 means "none" on the wire, so a
// follower would ignore the answer and ask the same again for ever.
func endOffsetForEpoch(c []EpochEntry, end wal.Offset, e wal.Epoch) (wal.Epoch, wal.Offset) {
	i := len(c) - 1
	for i >= 0 && c[i].Epoch > e {
		i--
	}
	if i < 0 {
		if len(c) == 0 {
			return e, end
		}
		return e, c[0].Start
	}
	if i+1 < len(c) {
		return c[i].Epoch, c[i+1].Start
	}
	return c[i].Epoch, end
}

// epochBelow is the epoch of the batch holding offset off-1, -1 if none.
func epochBelow(c []EpochEntry, off wal.Offset) wal.Epoch {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].Start < off {
			return c[i].Epoch
		}
	}
	return -1
}

// truncateChain drops the entries that start at or after t.
func truncateChain(c []EpochEntry, t wal.Offset) []EpochEntry {
	n := len(c)
	for n > 0 && c[n-1].Start >= t {
		n--
	}
	return c[:n]
}

// extendChain records batch b appended at the log end. It reports false
// (and changes nothing) if b's epoch is below the chain's last epoch.
func extendChain(c []EpochEntry, b Batch) ([]EpochEntry, bool) {
	if n := len(c); n > 0 {
		switch last := c[n-1].Epoch; {
		case b.Epoch < last:
			return c, false
		case b.Epoch == last:
			return c, true
		}
	}
	return append(c, EpochEntry{Epoch: b.Epoch, Start: b.Base}), true
}

// diverges applies the leader's divergence check to a fetch at offset with
// lastEpoch (KIP-595): it reports whether the follower must truncate first,
// and the epoch and end offset to answer with.
func diverges(c []EpochEntry, end, offset wal.Offset, lastEpoch wal.Epoch) (bool, wal.Epoch, wal.Offset) {
	if offset == 0 || lastEpoch < 0 {
		// No epoch known below the offset means the follower's log holds no
		// batch (it is empty at its start: a new replica, or one restarted
		// at the remote end of a tiered log, wal.RestartAt): nothing can
		// diverge, as Kafka skips the check without a last fetched epoch.
		return false, 0, 0
	}
	e, eo := endOffsetForEpoch(c, end, lastEpoch)
	if e != lastEpoch || offset > eo {
		return true, e, eo
	}
	return false, 0, 0
}
