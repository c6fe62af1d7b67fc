package kafka

// Fetch (key 1) from a follower replica (ReplicaID >= 0, or ReplicaState
// from v15), once interbroker.go has authorized its sender: each partition's
// fetch goes to the partition's replica core, which checks the follower's
// epoch and its divergence (KIP-595: DivergingEpoch), records the fetch
// offset as the follower's durable end for the high watermark, and answers
// with a log range, or holds the fetch at the log end. The response goes
// out as soon as any partition has an answer, or when MaxWait passes; the
// cores then answer the fetches they still hold (with no records and
// their high watermark: partition.GatherReplicaFetches), and a partition
// whose core has not judged its fetch at all is left out, which the
// follower asks for again at once.
//
// Invariant: a partition is in the response only with its core's answer.
// One whose fetch the core has not judged yet (its owner goroutine is busy,
// or it holds the fetch) is never written as an empty answer without error:
// the follower would take that as proof that its log matches the leader's
// and raise its high watermark over a tail the leader never had.
// Invariant: a partition's records are read after the core decided the
// range and only if the log was not truncated since (ReadFetchAnswer);
// otherwise that partition answers NOT_LEADER_OR_FOLLOWER and the follower
// asks again.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// replicaFetchSeq numbers replica fetches on this broker, to pair each with
// its answer in the partition's driver.
var replicaFetchSeq atomic.Uint64

// replicaFetchPart is one partition of a replica fetch in progress.
type replicaFetchPart struct {
	topic, part int // indexes into the request
	w           *partition.ReplicaFetchWait
	budget      int
	code        int16 // set when the partition is answered without the core
}

func (b *Server) handleReplicaFetch(ctx context.Context, req *request, r *kmsg.FetchRequest) (reply, error) {
	from, refused := b.authorizeReplicaFetch(req, r)
	if refused != nil {
		return done(refused), nil
	}
	resp := newResponse(req).(*kmsg.FetchResponse)
	var parts []*replicaFetchPart
	var waits []*partition.ReplicaFetchWait
	for ti, rt := range r.Topics {
		var t *node.Topic
		if req.version >= 13 {
			t = b.LookupTopicID(rt.TopicID)
		} else {
			t = b.LookupTopic(rt.Topic)
		}
		for pi, rp := range rt.Partitions {
			fp := &replicaFetchPart{topic: ti, part: pi, budget: int(rp.PartitionMaxBytes)}
			parts = append(parts, fp)
			if t == nil {
				fp.code = kerr.UnknownTopicOrPartition.Code
				if req.version >= 13 {
					fp.code = kerr.UnknownTopicID.Code
				}
				continue
			}
			if fp.code = b.notReplicaCode(t, rp.Partition, from); fp.code != 0 {
				continue
			}
			p, err := t.Local(rp.Partition)
			if err != nil {
				fp.code = node.ErrorCode(err)
				continue
			}
			fp.w = partition.StartReplicaFetch(p, replica.DecodeFetch(replica.NodeID(from), replica.NodeID(b.Cfg.NodeID),
				replicaFetchSeq.Add(1), 0, &rt.Partitions[pi]))
			waits = append(waits, fp.w)
		}
	}
	partition.GatherReplicaFetches(ctx, min(max(time.Duration(r.MaxWaitMillis)*time.Millisecond, 0), maxFetchWait), waits)

	total, maxBytes := 0, min(int(r.MaxBytes), int(b.Cfg.FetchMaxBytes))
	if maxBytes <= 0 {
		maxBytes = int(b.Cfg.FetchMaxBytes)
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(r.Topics))
	for ti, rt := range r.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
	}
	for _, fp := range parts {
		rp := r.Topics[fp.topic].Partitions[fp.part]
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = rp.Partition
		sp.RecordBatches = []byte{}
		n, include := b.fillReplicaPartition(fp, min(fp.budget, maxBytes-total), total == 0, &sp)
		if !include {
			continue // not judged by its core: left out (see the invariant)
		}
		total += n
		resp.Topics[fp.topic].Partitions = append(resp.Topics[fp.topic].Partitions, sp)
	}
	return done(resp), nil
}

// fillReplicaPartition writes one partition's answer into sp and returns
// the record bytes it holds; include false leaves the partition out of the
// response (its core has not judged the fetch: replica.EncodeFetchAnswer).
func (b *Server) fillReplicaPartition(fp *replicaFetchPart, budget int, first bool, sp *kmsg.FetchResponseTopicPartition) (n int, include bool) {
	if fp.w == nil {
		sp.ErrorCode = fp.code
		return 0, true
	}
	p, got := fp.w.P, fp.w.Got
	// What the edge knows of the partition; the core's answer goes over it.
	sp.LogStartOffset = int64(p.Log().StartOffset())
	hw, _ := p.HighWatermark()
	sp.HighWatermark, sp.LastStableOffset = int64(hw), int64(hw)
	var answer *replica.Message
	if got != nil {
		answer = &got.Msg
	}
	include, read := replica.EncodeFetchAnswer(answer, sp)
	if answer != nil && answer.Err == replica.ErrCodeOffsetOutOfRange {
		// Below this leader's log start: tiered storage or nothing holds
		// what the follower lacks (replica_logstart.go).
		sp.ErrorCode = b.BelowLogStartCode(p)
	}
	if !include || !read || (!first && budget <= 0) {
		return 0, include
	}
	m := got.Msg
	data, err := p.ReadFetchAnswer(*got, max(budget, 1))
	if err != nil {
		sp.ErrorCode = node.ErrorCode(err)
		if errors.Is(err, wal.ErrOffsetOutOfRange) && m.ReadFrom < p.Log().StartOffset() {
			// The log start moved past the range since the core decided
			// it: the follower asks again and is answered below.
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
		return 0, true
	}
	sp.RecordBatches = data
	return len(data), true
}
