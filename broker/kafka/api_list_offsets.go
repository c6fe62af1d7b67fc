package kafka

// ListOffsets (key 2): the earliest offset (-2), the latest (-1, the high
// watermark), or the first offset whose record timestamp is at or after a
// given time, each with the leader epoch of the batch it falls in (the
// current epoch for the latest).
//
// As Kafka: only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere),
// except to the debugging replica id -2, which any replica answers; the
// client's leader epoch is checked first. A consumer (replica id -1) is
// bounded by the high watermark, anyone else by the log end. A new leader
// whose high watermark has not yet reached the start of its epoch answers a
// consumer's latest, and a timestamp lookup that finds nothing below the
// high watermark, with OFFSET_NOT_AVAILABLE (retriable): the offset it would
// give could still be below records that are committed.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

const (
	listLatest   = node.ListLatest
	listEarliest = node.ListEarliest

	consumerReplicaID  = -1 // ListOffsets from a client
	debuggingReplicaID = -2 // ListOffsets from a tool that may ask a follower
)

func handleListOffsets(b *Server, _ context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.ListOffsetsRequest)
	resp := newResponse(req).(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			p, err := b.PartitionOf(rt.Topic, rp.Partition)
			if err == nil {
				err = checkServing(p, b.Cfg.NodeID, rp.CurrentLeaderEpoch, r.ReplicaID != debuggingReplicaID)
			}
			if err == nil {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch, err = b.listOffsetFor(p, rp.Timestamp, r.ReplicaID == consumerReplicaID)
			}
			if err != nil {
				sp.ErrorCode = node.ErrorCode(err)
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return done(resp), nil
}

// listOffsetFor answers one partition's lookup with the leader epoch of the
// offset; client is a consumer's request (bounded by the high watermark).
func (b *Server) listOffsetFor(p *partition.Partition, ts int64, client bool) (offset, timestamp int64, epoch int32, err error) {
	hw, _ := p.HighWatermark()
	st := p.ReplicaStatus()
	lagging := client && st.Role == replica.RoleLeader && epochStart(p.Log().Epochs(), st.Epoch) > hw
	notAvailable := func() error {
		return fmt.Errorf("%s-%d: the high watermark %d has not reached the start of leader epoch %d: %w",
			p.Topic(), p.Index(), hw, st.Epoch, kerr.OffsetNotAvailable)
	}
	switch ts {
	case listLatest:
		if lagging {
			return -1, -1, -1, notAvailable()
		}
		end := int64(hw)
		if !client {
			end = int64(p.Log().EndOffset())
		}
		return end, -1, int32(p.LeaderEpoch()), nil
	case listEarliest:
		start := b.LogStart(context.Background(), p)
		return int64(start), -1, b.epochAt(p, start), nil
	}
	offset, timestamp, err = b.ListOffset(p, ts)
	switch {
	case err != nil:
		return -1, -1, -1, err
	case offset < 0 && lagging:
		return -1, -1, -1, notAvailable()
	case offset < 0:
		return -1, -1, -1, nil
	}
	return offset, timestamp, b.epochAt(p, wal.Offset(offset)), nil
}

// epochAt is the leader epoch of the batch holding off, from the local
// chain or, below the local log, from the remote head's.
func (b *Server) epochAt(p *partition.Partition, off wal.Offset) int32 {
	if e := epochAt(p.Log().Epochs(), off); e >= 0 || b.Tiers == nil {
		return e
	}
	epochs, err := b.Tiers.RemoteEpochs(context.Background(), p.TopicID(), p.Index())
	if err != nil {
		return -1
	}
	return epochAt(epochs, off)
}

// epochStart is where epoch e starts in chain, or -1 when the log holds no
// batch of e (a leader whose whole log was committed when it was elected
// appends no epoch-start batch: nothing of its epoch is waiting).
func epochStart(chain []wal.EpochEntry, e wal.Epoch) wal.Offset {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i].Epoch == e {
			return chain[i].StartOffset
		}
	}
	return -1
}

// epochAt is the leader epoch of the batch holding offset off, as the
// chain records it; -1 when the chain does not reach back to it.
func epochAt(chain []wal.EpochEntry, off wal.Offset) int32 {
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i].StartOffset <= off {
			return int32(chain[i].Epoch)
		}
	}
	return -1
}
