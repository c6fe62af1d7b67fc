package cluster

// This file owns the envelope in which replication and election messages
// (broker/replica) travel between brokers, and their delivery to a local
// partition. The transport (replication_transport.go) carries envelopes
// between brokers; the controller's driver (elector.go) consumes those
// addressed to the controller.

import (
	"time"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
)

// replicationTick is one tick of the replica cores (Partition.Tick) and the
// controller's election core; their timeouts are counted in ticks.
const replicationTick = 50 * time.Millisecond

// PartitionKey names a partition by topic ID (replica.PartitionKey).
type PartitionKey = replica.PartitionKey

// envelope is one replica.Message about one partition; its JSON form is
// replica's (EncodeEnvelopes, DecodeEnvelopes), which the simulator also
// crosses.
type envelope = replica.Envelope

// partitionNet is how the replica of one partition reaches the cluster
// (partition.Net): through this broker's transport and follower fetchers.
type partitionNet struct {
	b   *Cluster
	key PartitionKey
}

// SendToController queues m for the controller; never blocks.
func (n partitionNet) SendToController(m replica.Message) {
	n.b.sendToController(envelope{Key: n.key, Msg: m})
}

// FetchReady hands p's next fetch to the fetcher of leader; never blocks.
func (n partitionNet) FetchReady(leader int32, p *partition.Partition) {
	n.b.fetchReady(leader, p)
}

// LeaseHeld reports whether this broker's registration lease surely holds.
func (n partitionNet) LeaseHeld() bool {
	reg := n.b.reg.Load()
	return reg != nil && time.Now().Before(reg.HeldUntil())
}

// deliverToPartition hands a message from another broker or from the
// controller to this broker's replica of the partition. It reports false
// when this broker hosts no such replica (the message is dropped; the
// sender's core retries what matters).
func (b *Cluster) deliverToPartition(env envelope) bool {
	t := b.LookupTopicID(env.Key.TopicID)
	if t == nil {
		return false
	}
	p, err := t.Local(env.Key.Partition)
	if err != nil {
		return false
	}
	return p.Step(env.Msg)
}
