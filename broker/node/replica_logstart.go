package node

// This file owns the broker's part in replicating the log start: whether a
// follower below its leader's log start is sent to object storage
// (OFFSET_MOVED_TO_TIERED_STORAGE, when the records it lacks are tiered) or
// told to restart at the leader's log start (OFFSET_OUT_OF_RANGE, Kafka's
// answer), and the reopening of a follower replica that restarts, either
// way.
//
// Invariant: at most one reopening of a partition runs at a time
// (Broker.restarting), under adminMu, and only while the topic still holds
// the replica it was asked for.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
)

// belowLogStartCode is the error a follower fetching below this leader's
// local log start gets: when records below it are tiered (the remote log
// reaches the local start), the follower continues from the remote end
// (KIP-405's OFFSET_MOVED_TO_TIERED_STORAGE); otherwise they are gone
// (DeleteRecords, retention, a topic not tiered, nothing uploaded yet) and
// it restarts at the leader's log start (OFFSET_OUT_OF_RANGE, Kafka's
// answer). Restarting at a remote end below the leader's local start would
// only bring it back here.
func (b *Node) BelowLogStartCode(p *partition.Partition) int16 {
	t := b.LookupTopicID(p.TopicID())
	if b.Tiers == nil || t == nil || !t.Settings.Tiered {
		return kerr.OffsetOutOfRange.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteRangeTimeout)
	defer cancel()
	if b.LogStart(ctx, p) < p.Log().StartOffset() {
		return kerr.OffsetMovedToTieredStorage.Code
	}
	return kerr.OffsetOutOfRange.Code
}

// remoteRangeTimeout bounds the read of a partition's remote range when a
// follower's fetch is below the local log start.
const remoteRangeTimeout = 2 * time.Second

// restartAtLeaderStart empties a follower replica whose log ends below its
// leader's log start and restarts it at leaderStart (the base of the
// leader's first batch), from where it copies the leader's log; nothing
// below it exists on the leader any more.
func (b *Node) RestartAtLeaderStart(p *partition.Partition, leaderStart wal.Offset) {
	if end := p.Log().EndOffset(); end >= leaderStart {
		if end > leaderStart {
			b.Logger.Warn().Str("topic", p.Topic()).Int32("partition", p.Index()).Int64("end", int64(end)).
				Int64("leader_start", int64(leaderStart)).Msg("out of range at the leader although the log ends past its start")
		}
		return
	}
	b.reopenReplica(p, leaderStart, "at the leader's log start", func() error { return p.StopAndRestartAt(leaderStart) })
}

// reopenReplica stops follower replica p with stop (which closes its log),
// opens it again and starts it, in the background. where names where the
// reopened log continues, for the logs.
func (b *Node) reopenReplica(p *partition.Partition, leaderStart wal.Offset, where string, stop func() error) {
	key := PartitionKey{TopicID: p.TopicID(), Partition: p.Index()}
	if _, busy := b.restarting.LoadOrStore(key, true); busy {
		return
	}
	b.PartWG.Add(1)
	go func() {
		defer b.PartWG.Done()
		defer b.restarting.Delete(key)
		b.AdminMu.Lock()
		defer b.AdminMu.Unlock()
		t := b.LookupTopicID(p.TopicID())
		if t == nil || int(p.Index()) >= len(t.Partitions) || t.Partitions[p.Index()] != p {
			return // the topic or the replica changed meanwhile
		}
		logger := b.Logger.With().Str("topic", p.Topic()).Int32("partition", p.Index()).Logger()
		logger.Warn().Int64("end", int64(p.Log().EndOffset())).Int64("leader_local_start", int64(leaderStart)).
			Msg("replica is behind its leader's local log; restarting it " + where)
		if err := stop(); err != nil {
			// The log is closed either way: open it as it is, and the
			// next fetch below the leader's start tries again.
			logger.Error().Err(err).Msg("restart a replica behind its leader")
		}
		np, err := b.openPartition(t, p.Index())
		if err != nil {
			logger.Error().Err(err).Msg("reopen a replica behind its leader")
			return
		}
		nt := *t
		nt.Partitions = append([]*partition.Partition(nil), t.Partitions...)
		nt.Partitions[p.Index()] = np
		b.ReplaceTopic(&nt)
		b.startPartition(np)
		np.SetState(CoreState(nt.States[p.Index()]))
		logger.Info().Int64("end", int64(np.Log().EndOffset())).Msg("replica restarted " + where)
	}()
}
