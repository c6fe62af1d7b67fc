// Package replicas reads every replica's copy of a partition over the Kafka
// protocol at the end of a chaos run, for the checker's replica-divergence
// check: a consumer Fetch (v11+, which a follower answers, KIP-392) sent to
// each broker in turn, from its log start to its own high watermark,
// decoded by franz-go. It uses no broker internals.
//
// Invariant: a replica's entries are exactly the records it returned below
// the high watermark it reported with them, in offset order; a replica that
// cannot be read is reported as an error, never as an empty log.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/history"
)

// fetchBytes bounds one fetch answer.
const fetchBytes = 4 << 20

// Collect reads partition p of topic from broker id through cl (a client of
// the cluster) and returns its log as a history event.
//
// A replica that is between roles when asked (a leader paused late in the
// run, fenced and now truncating to its new leader, answers
// NOT_LEADER_OR_FOLLOWER for a moment) is read again from its start until
// ctx ends: its log is whatever one whole reading of it returns.
func Collect(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, p int32, id int32) (history.ReplicaLog, error) {
	for {
		out, err := collectOnce(ctx, cl, topic, topicID, p, id)
		if err == nil || !betweenRoles(err) || ctx.Err() != nil {
			return out, err
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
	}
}

// betweenRoles reports whether err is a replica's passing refusal to serve.
func betweenRoles(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.LeaderNotAvailable) || errors.Is(err, kerr.ReplicaNotAvailable) ||
		errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.UnknownLeaderEpoch)
}

func collectOnce(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, p int32, id int32) (history.ReplicaLog, error) {
	out := history.ReplicaLog{Partition: history.Partition(p), Broker: history.BrokerID(id)}
	var from int64
	hw := int64(-1)
	for hw < 0 || from < hw {
		rp, err := fetch(ctx, cl, topic, topicID, p, id, from)
		if err != nil {
			return out, err
		}
		switch {
		case rp.ErrorCode == kerr.OffsetOutOfRange.Code && from < rp.LogStartOffset:
			from = rp.LogStartOffset
			continue
		case rp.ErrorCode != 0:
			return out, fmt.Errorf("replicas: %s-%d on broker %d at %d: %w", topic, p, id, from, kerr.ErrorForCode(rp.ErrorCode))
		}
		if hw < 0 {
			hw = rp.HighWatermark
			out.LogStart, out.HighWatermark = history.Offset(max(from, rp.LogStartOffset)), history.Offset(hw)
		}
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: p, Offset: from},
			&rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return out, fmt.Errorf("replicas: decode %s-%d from broker %d: %w", topic, p, id, fp.Err)
		}
		next := from
		for _, r := range fp.Records {
			if r.Offset < from || r.Offset >= hw {
				continue
			}
			out.Entries = append(out.Entries, history.ReplicaEntry{Offset: history.Offset(r.Offset),
				Digest: history.Digest(r.Key, r.Value), Epoch: history.Epoch(r.LeaderEpoch)})
			next = r.Offset + 1
		}
		if next == from {
			// Nothing new below the HW: control batches only, or the end.
			if last := lastOffset(rp.RecordBatches); last >= from {
				next = last + 1
			} else {
				break
			}
		}
		from = next
	}
	return out, nil
}

// lastOffset is the last offset of the last whole batch in data, -1 if none.
func lastOffset(data []byte) int64 {
	last := int64(-1)
	for len(data) >= 61 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data); err != nil {
			break
		}
		size := int(rb.Length) + 12
		if size > len(data) {
			break
		}
		last = rb.FirstOffset + int64(rb.LastOffsetDelta)
		data = data[size:]
	}
	return last
}

// fetch sends one consumer fetch for one partition to broker id.
func fetch(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, p, id int32, from int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, fetchBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rpq := kmsg.NewFetchRequestTopicPartition()
	rpq.Partition, rpq.FetchOffset, rpq.PartitionMaxBytes, rpq.CurrentLeaderEpoch = p, from, fetchBytes, -1
	rt.Partitions = append(rt.Partitions, rpq)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("replicas: fetch %s-%d from broker %d: %w", topic, p, id, err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("replicas: fetch from broker %d: %w", id, kerr.ErrorForCode(fr.ErrorCode))
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, errors.New("replicas: fetch answer names another partition count")
	}
	return fr.Topics[0].Partitions[0], nil
}

// HighWatermark is broker id's own high watermark of partition p, as its
// answer to a consumer fetch at its log start reports it (a follower's
// comes from what its leader told it, capped by its own log).
func HighWatermark(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, p, id int32) (int64, error) {
	var from int64
	for range 3 {
		rp, err := fetch(ctx, cl, topic, topicID, p, id, from)
		if err != nil {
			return -1, err
		}
		switch {
		case rp.ErrorCode == kerr.OffsetOutOfRange.Code && from < rp.LogStartOffset:
			from = rp.LogStartOffset
		case rp.ErrorCode != 0:
			return -1, fmt.Errorf("replicas: %s-%d on broker %d: %w", topic, p, id, kerr.ErrorForCode(rp.ErrorCode))
		default:
			return rp.HighWatermark, nil
		}
	}
	return -1, fmt.Errorf("replicas: %s-%d on broker %d: its log start keeps moving", topic, p, id)
}
