package checker

import (
	"github.com/sluice-mq/sluice/chaos/history"
)

// hist builds hand-made histories for the tests. Every operation takes the
// next tick of a fake clock (10 ns apart) and completes before the next one
// starts, so history order is real-time order. All records use key "k" and
// leader epoch 1 unless a test says otherwise.
type hist struct {
	evs []history.Event
	t   history.Nanos
}

func newHist() *hist { return &hist{} }

func (b *hist) tick() history.Nanos { b.t += 10; return b.t }

func (b *hist) add(e history.Event) *hist { b.evs = append(b.evs, e); return b }

// rec is a record as the tests write it: offset, value and leader epoch.
type rec struct {
	o history.Offset
	v string
	e history.Epoch
}

func r(o history.Offset, v string) rec                   { return rec{o, v, 1} }
func re(o history.Offset, v string, e history.Epoch) rec { return rec{o, v, e} }

func records(rs []rec) []history.Record {
	out := make([]history.Record, len(rs))
	for i, x := range rs {
		out[i] = history.Record{Offset: x.o, Key: "k", Value: x.v, LeaderEpoch: x.e}
	}
	return out
}

// ack: process proc sends v to partition p; acknowledged at offset o.
func (b *hist) ack(proc history.Process, p history.Partition, o history.Offset, v string) *hist {
	return b.ackEpoch(proc, p, o, v, 1)
}

func (b *hist) ackEpoch(proc history.Process, p history.Partition, o history.Offset, v string, e history.Epoch) *hist {
	t := b.tick()
	return b.add(history.Send{Process: proc, Key: "k", Value: v, Partition: p, Outcome: history.OK, Offset: o, LeaderEpoch: e, Invoke: t, Complete: t + 5})
}

// sendFail: a send of v that definitely failed.
func (b *hist) sendFail(proc history.Process, p history.Partition, v string) *hist {
	t := b.tick()
	return b.add(history.Send{Process: proc, Key: "k", Value: v, Partition: p, Outcome: history.Fail, Offset: history.NoOffset, LeaderEpoch: history.NoEpoch, Error: "NOT_ENOUGH_REPLICAS", Invoke: t, Complete: t + 5})
}

// sendInfo: a send of v with an unknown outcome.
func (b *hist) sendInfo(proc history.Process, p history.Partition, v string) *hist {
	t := b.tick()
	return b.add(history.Send{Process: proc, Key: "k", Value: v, Partition: p, Outcome: history.Info, Offset: history.NoOffset, LeaderEpoch: history.NoEpoch, Error: "request timed out", Invoke: t, Complete: t + 5})
}

func (b *hist) poll(proc history.Process, kind history.Consumer, p history.Partition, rs ...rec) *hist {
	t := b.tick()
	return b.add(history.Poll{Process: proc, Consumer: kind, Generation: history.NoGeneration, Partition: p, Records: records(rs), Invoke: t, Complete: t + 5})
}

// read: a reader's poll; drain: the final drain's poll.
func (b *hist) read(proc history.Process, p history.Partition, rs ...rec) *hist {
	return b.poll(proc, history.ConsumerReader, p, rs...)
}

func (b *hist) drain(p history.Partition, rs ...rec) *hist {
	return b.poll(99, history.ConsumerDrain, p, rs...)
}

// gpoll: a poll of group "g" by member m (process proc) in generation gen.
func (b *hist) gpoll(proc history.Process, m string, gen history.Generation, p history.Partition, rs ...rec) *hist {
	t := b.tick()
	return b.add(history.Poll{Process: proc, Consumer: history.ConsumerGroup, Group: "g", Member: m, Generation: gen, Partition: p, Records: records(rs), Invoke: t, Complete: t + 5})
}

func (b *hist) seek(proc history.Process, p history.Partition, o history.Offset) *hist {
	return b.add(history.Seek{Process: proc, Partition: p, Offset: o, At: b.tick()})
}

func (b *hist) assign(proc history.Process, m string, gen history.Generation, ps ...history.Partition) *hist {
	return b.add(history.Assign{Rebalance: history.Rebalance{Process: proc, Group: "g", Member: m, Generation: gen, Partitions: ps, At: b.tick()}})
}

func (b *hist) revoke(proc history.Process, m string, gen history.Generation, ps ...history.Partition) *hist {
	return b.add(history.Revoke{Rebalance: history.Rebalance{Process: proc, Group: "g", Member: m, Generation: gen, Partitions: ps, At: b.tick()}})
}

// commit: member m of group "g" commits offset o of partition p; outcome ok.
func (b *hist) commit(proc history.Process, m string, gen history.Generation, p history.Partition, o history.Offset) *hist {
	return b.commitWith(history.Commit{Process: proc, Member: m, Generation: gen, Partition: p, Offset: o, Outcome: history.OK})
}

// commitWith fills in the group and the times of c.
func (b *hist) commitWith(c history.Commit) *hist {
	c.Group = "g"
	c.Invoke = b.tick()
	c.Complete = c.Invoke + 5
	return b.add(c)
}

func (b *hist) final(p history.Partition, logStart, hw history.Offset) *hist {
	return b.add(history.Final{Partition: p, LogStart: logStart, HighWatermark: hw, At: b.tick()})
}

// replica: broker's log of partition p; each rec's value stands for its
// digest.
func (b *hist) replica(p history.Partition, broker history.BrokerID, logStart, hw history.Offset, rs ...rec) *hist {
	es := make([]history.ReplicaEntry, len(rs))
	for i, x := range rs {
		es[i] = history.ReplicaEntry{Offset: x.o, Digest: history.Digest([]byte("k"), []byte(x.v)), Epoch: x.e}
	}
	return b.add(history.ReplicaLog{Partition: p, Broker: broker, LogStart: logStart, HighWatermark: hw, Entries: es})
}

func (b *hist) tiered(p history.Partition, from, to history.Offset, rs ...rec) *hist {
	t := b.tick()
	return b.add(history.TieredRead{Process: 98, Partition: p, From: from, To: to, Records: records(rs), Invoke: t, Complete: t + 5})
}

// acked3 is the usual start: process 1 sends a, b, c to partition 0,
// acknowledged at offsets 0, 1, 2.
func acked3() *hist {
	return newHist().ack(1, 0, 0, "a").ack(1, 0, 1, "b").ack(1, 0, 2, "c")
}

// drained3 ends a history over acked3: the drain reads a, b, c and the final
// HW is 3.
func (b *hist) drained3() *hist {
	return b.drain(0, r(0, "a"), r(1, "b"), r(2, "c")).final(0, 0, 3)
}
