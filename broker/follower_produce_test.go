package broker

// Produce at a replica that does not lead, over the wire: an idempotent
// producer's batch is refused with NOT_LEADER_OR_FOLLOWER whatever its
// sequence, never with a sequence verdict from the follower's lagging
// producer state (broker/partition/producer.go). Idempotent clients take
// OUT_OF_ORDER_SEQUENCE_NUMBER as proof that a batch is not in the log and
// resend it under a bumped epoch as new records: the chaos run disk-loss,
// seed 1, read k8-1-4598 at two offsets after a broker back on an empty
// disk, still named leader in the client's metadata, answered so.

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// produceAt sends one batch for partition 0 of topic to broker b itself
// (acks=all) and returns the partition's answer.
func produceAt(t *testing.T, b *Broker, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := askRaw(t, b, req, 8).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce: want one partition back, got %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// TestClusterFollowerRefusesIdempotentProduceAsNotLeader: producer 5000
// appends sequences 0 and 1 at the leader; a follower holding both is then
// sent batches a client with stale metadata would send it (the next
// sequences the leader may already hold, a bumped epoch past its first
// batch, an older epoch, a retry): each is NOT_LEADER_OR_FOLLOWER, and the
// leader still judges the gap itself. On the old code the follower
// answered the first three OUT_OF_ORDER_SEQUENCE_NUMBER or
// INVALID_PRODUCER_EPOCH.
func TestClusterFollowerRefusesIdempotentProduceAsNotLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	const topic = "seq-follower"
	createReplicated(t, c, topic, 1)
	lead := c.leaderOf(topic, 0)
	if lead < 0 {
		t.Fatal("no leader")
	}
	const pid = 5000
	for seq := int32(0); seq < 2; seq++ {
		if got := produceAt(t, c.brokers[lead], topic, brokertest.Batch(1, pid, 1, seq, 1)); got.ErrorCode != 0 || got.BaseOffset != int64(seq) {
			t.Fatalf("sequence %d at the leader: error %d, base %d", seq, got.ErrorCode, got.BaseOffset)
		}
	}
	var follower *Broker
	eventuallyTrue(t, "a follower holds both batches", func() (bool, string) {
		var ends []int64
		for i, b := range c.brokers {
			if i == lead {
				continue
			}
			p, err := b.PartitionOf(topic, 0)
			if err != nil {
				return false, err.Error()
			}
			end := p.Log().EndOffset()
			if end >= 2 {
				follower = b
				return true, ""
			}
			ends = append(ends, int64(end))
		}
		return false, fmt.Sprintf("the followers' log ends: %v", ends)
	})
	for _, tc := range []struct {
		name  string
		batch []byte
	}{
		{"sequences ahead of the follower", brokertest.Batch(1, pid, 1, 4, 1)},
		{"a bumped epoch past its first batch", brokertest.Batch(1, pid, 2, 3, 1)},
		{"an older epoch", brokertest.Batch(1, pid, 0, 0, 1)},
		{"a retry of a batch the follower holds", brokertest.Batch(1, pid, 1, 1, 1)},
	} {
		if got := produceAt(t, follower, topic, tc.batch); got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Errorf("%s at a follower: error %s (%d), want NOT_LEADER_OR_FOLLOWER", tc.name, kerr.ErrorForCode(got.ErrorCode), got.ErrorCode)
		}
	}
	if got := produceAt(t, c.brokers[lead], topic, brokertest.Batch(1, pid, 1, 4, 1)); got.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("a sequence gap at the leader: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", got.ErrorCode)
	}
}
