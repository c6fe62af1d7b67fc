package cluster

// This file owns the in-sync sets this broker publishes for the partitions
// it leads (meta's <prefix>isr/<node id>), and the copy of every broker's
// published sets that Metadata and the HTTP listings report to clients.
//
// A partition's in-sync set lives in its leader's replica core. Without
// this, every other broker could only report the replicas whose
// registrations live, and a killed broker's registration outlives it by up
// to its lease TTL (10 s by default, more when it also led etcd), while its
// leader drops it after the lag window (3 s).
//
// Invariant: the key is written under this broker's current registration
// lease, so it goes with the registration; after a lost and renewed
// registration it is written again under the new lease.
// Invariant: at most one write per isrPublishEvery, never in the produce
// path: the partition tick only compares and hands the newest snapshot to
// one writer goroutine.
// Invariant: a broker reports a published set only while its partition
// state names the same leader at the same epoch; a partition's leader
// reports its own core's set.
//
// isr.last is owned by the tick goroutine (tickPartitions); isr.pending is
// a one-slot mailbox from it to the writer goroutine; isr.seen is written
// by the watch goroutine and read by any connection goroutine. Both
// goroutines are started by startInSync and waited for with clusterWG.

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
)

const (
	// isrPublishEvery spaces this broker's writes of its in-sync sets: a
	// set that flaps costs etcd at most four writes a second.
	isrPublishEvery = 250 * time.Millisecond
	// isrWriteTimeout bounds one write; a failed write is retried.
	isrWriteTimeout = 5 * time.Second
)

// inSyncState is the broker's part in publishing in-sync sets.
type inSyncState struct {
	last    isrSnapshot                               // tick goroutine only: last handed to the writer
	pending chan isrSnapshot                          // capacity 1: the newest snapshot not yet taken
	seen    atomic.Pointer[map[int32]meta.InSyncSets] // every broker's published sets, by node id
}

// isrSnapshot is what this broker would publish: the sets of the
// partitions it leads, under its registration lease.
type isrSnapshot struct {
	lease clientv3.LeaseID
	sets  meta.InSyncSets
}

// startInSync starts the watch of the published sets and the writer of
// this broker's; offerInSync feeds the writer from the partition tick.
func (b *Cluster) startInSync(ctx context.Context) {
	b.isr.pending = make(chan isrSnapshot, 1)
	published := b.Store.WatchInSync(ctx)
	b.clusterWG.Add(2)
	go func() {
		defer b.clusterWG.Done()
		for m := range published {
			b.isr.seen.Store(&m)
		}
	}()
	go func() {
		defer b.clusterWG.Done()
		b.writeInSync(ctx)
	}()
}

// offerInSync hands the writer a new snapshot when the sets of the
// partitions this broker leads, or its registration lease, changed since
// the last one. Called on every partition tick; it reads the cores'
// status snapshots only and allocates nothing while nothing changed.
func (b *Cluster) offerInSync() {
	reg := b.reg.Load()
	if reg == nil || b.isr.pending == nil {
		return
	}
	lease := reg.Info().Lease
	if lease == b.isr.last.lease && b.ledSetsEqual(b.isr.last.sets) {
		return
	}
	b.isr.last = isrSnapshot{lease: lease, sets: b.ledSets()}
	select { // replace a snapshot the writer has not taken yet
	case <-b.isr.pending:
	default:
	}
	b.isr.pending <- b.isr.last // the tick goroutine is the only sender
}

// forEachLed calls fn with the status of every partition this broker's
// core leads.
func (b *Cluster) forEachLed(fn func(ref meta.PartitionRef, rs replica.Status)) {
	for _, t := range b.SortedTopics() {
		for i, p := range t.Partitions {
			if p == nil {
				continue
			}
			if rs := p.ReplicaStatus(); rs.Role == replica.RoleLeader {
				fn(meta.PartitionRef{TopicID: t.Meta.ID, Partition: int32(i)}, rs)
			}
		}
	}
}

func (b *Cluster) ledSets() meta.InSyncSets {
	sets := meta.InSyncSets{}
	b.forEachLed(func(ref meta.PartitionRef, rs replica.Status) {
		isr := make([]int32, len(rs.InSync))
		for i, id := range rs.InSync {
			isr[i] = int32(id)
		}
		slices.Sort(isr)
		sets[ref] = meta.InSync{Epoch: int32(rs.Epoch), ISR: isr}
	})
	return sets
}

// ledSetsEqual reports whether the partitions this broker leads have
// exactly the sets in last.
func (b *Cluster) ledSetsEqual(last meta.InSyncSets) bool {
	same, n := true, 0
	b.forEachLed(func(ref meta.PartitionRef, rs replica.Status) {
		n++
		was, ok := last[ref]
		if !ok || was.Epoch != int32(rs.Epoch) || len(was.ISR) != len(rs.InSync) {
			same = false
			return
		}
		for _, id := range rs.InSync {
			if _, found := slices.BinarySearch(was.ISR, int32(id)); !found {
				same = false
			}
		}
	})
	return same && n == len(last)
}

// writeInSync publishes each snapshot offered, then waits isrPublishEvery
// before the next; a failed write is retried with the newest snapshot.
func (b *Cluster) writeInSync(ctx context.Context) {
	failing := false
	for {
		var snap isrSnapshot
		select {
		case <-ctx.Done():
			return
		case snap = <-b.isr.pending:
		}
		for {
			wctx, cancel := context.WithTimeout(ctx, isrWriteTimeout)
			err := b.Store.PublishInSync(wctx, b.Cfg.NodeID, snap.lease, snap.sets)
			cancel()
			if err == nil {
				if failing {
					b.Logger.Info().Msg("in-sync sets published again")
				}
				failing = false
				break
			}
			if ctx.Err() != nil {
				return
			}
			if !failing {
				// Meanwhile the other brokers report the live replicas.
				b.Logger.Warn().Err(err).Msg("publish in-sync sets; retrying")
			}
			failing = true
			node.SleepCtx(ctx, isrPublishEvery)
			select {
			case snap = <-b.isr.pending:
			default:
			}
		}
		node.SleepCtx(ctx, isrPublishEvery)
	}
}

// reportedInSync is the in-sync set this broker reports for a partition it
// does not lead, in the order of st.Replicas: the set that st's leader
// published for st's leader epoch, or, when there is none (not published
// yet, or the leader changed since), the replicas whose registrations live.
func (b *Cluster) ReportedInSync(st meta.PartitionState, live map[int32]bool) []int32 {
	in := func(id int32) bool { return live[id] }
	if m := b.isr.seen.Load(); m != nil && st.Leader >= 0 {
		ref := meta.PartitionRef{TopicID: st.TopicID, Partition: st.Partition}
		if is, ok := (*m)[st.Leader][ref]; ok && is.Epoch == st.LeaderEpoch {
			in = func(id int32) bool { return slices.Contains(is.ISR, id) }
		}
	}
	isr := []int32{}
	for _, id := range st.Replicas {
		if in(id) {
			isr = append(isr, id)
		}
	}
	return isr
}
