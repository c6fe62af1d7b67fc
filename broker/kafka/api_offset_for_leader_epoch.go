package kafka

// OffsetForLeaderEpoch (key 23, KIP-320): for each partition, the largest
// leader epoch <= the requested one that the leader's log holds and the
// offset where that epoch ends. Consumers send it after a leader change to
// check that the position they consumed up to still exists in the new
// leader's log (an end offset below their position is data loss, which
// they report and reset from). Followers in Sluice find their divergence
// point through Fetch (KIP-595), not through this request.
//
// As Kafka answers it (LeaderEpochFileCache.endOffsetFor):
//   - only the leader answers, whatever the ReplicaID (it only chose the
//     ACL Kafka checks); elsewhere NOT_LEADER_OR_FOLLOWER;
//   - CurrentLeaderEpoch is checked first: older than the leader's
//     FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, -1 not checked;
//   - the leader's current epoch ends at the log end offset (the epoch is
//     still being written), even when no batch of it is in the log yet;
//   - an epoch above the current one or a negative epoch: (-1, -1),
//     UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET;
//   - an epoch below the chain's first: (that epoch, the first entry's
//     start), or the log end when the chain is empty;
//   - otherwise the largest epoch <= it and the start of the next entry,
//     or the log end after the chain's last entry.
//
// Kafka's leader has its current epoch in its chain from the moment it is
// elected; a Sluice leader whose whole log was committed appends no
// epoch-start batch, so its chain may end earlier. Its current epoch then
// starts at the log end, which is what the rules above give.
//
// Nothing here holds state: the epoch chain (wal.Log.Epochs) and the role
// (Partition.ReplicaStatus) are safe to read from the connection goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/wal"
)

func handleOffsetForLeaderEpoch(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := newResponse(req).(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			p, err := b.PartitionOf(rt.Topic, rp.Partition)
			if err == nil {
				err = checkServing(p, b.Cfg.NodeID, rp.CurrentLeaderEpoch, true)
			}
			if err != nil {
				sp.ErrorCode = node.ErrorCode(err)
			} else {
				e, end := endOffsetForEpoch(p.Log().Epochs(), p.LeaderEpoch(), p.Log().EndOffset(), wal.Epoch(rp.LeaderEpoch))
				sp.LeaderEpoch, sp.EndOffset = int32(e), int64(end)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

// endOffsetForEpoch answers epoch e for a leader of epoch current whose log
// has the epoch chain and ends at end (the rules in the file comment).
func endOffsetForEpoch(chain []wal.EpochEntry, current wal.Epoch, end wal.Offset, e wal.Epoch) (wal.Epoch, wal.Offset) {
	const undefined = -1
	switch {
	case e < 0 || e > current:
		return undefined, undefined
	case e == current:
		return e, end
	}
	// i is the first entry above e; every entry is at or below current.
	i := 0
	for i < len(chain) && chain[i].Epoch <= e {
		i++
	}
	switch {
	case i == 0 && len(chain) == 0:
		return e, end
	case i == 0:
		return e, chain[0].StartOffset
	case i == len(chain):
		// No batch of a later epoch yet: e's batches run to the log end.
		return chain[i-1].Epoch, end
	default:
		return chain[i-1].Epoch, chain[i].StartOffset
	}
}
