package cluster

// This file owns the follower side of replication: one fetcher per leader
// broker sends Kafka replica Fetch requests (ReplicaID = this node) for
// every partition this broker follows from that leader, and hands each
// partition's answer to its replica core.
//
// The cores decide when a partition may fetch (only once everything it
// appended is durable, so the fetch offset reports its durable end); the
// fetcher gathers the fetches that are ready into one request. After a
// response that carried records, it waits for those partitions' next
// fetches (their appends share one journal fsync) before it sends again, so
// one request per fsync reports every partition's new durable end.
//
// Invariant: a partition's fetch is in at most one request at a time (the
// core keeps one fetch outstanding; takeFetch hands it out once).
// Invariant: every fetch taken is answered to its core: with the leader's
// answer, with NOT_LEADER when the request failed (the core retries after
// its back-off), or as Unjudged when the leader answered the request
// without this partition (its core had not judged the fetch yet: the core
// asks again at once, and takes nothing from it).
//
// A fetcher's goroutine owns its client; fetchReady and the partitions'
// registrations are guarded by fetcher.mu. Fetchers are created on demand
// by fetchReady and stopped with the cluster context (StartCluster).

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

const (
	// replicaFetchMaxWait is how long a leader may hold a replica fetch.
	replicaFetchMaxWait = 500 * time.Millisecond
	// replicaFetchMaxBytes bounds one replica fetch response.
	replicaFetchMaxBytes = node.ReplicaFetchMaxBytes
	// replicaPartitionMaxBytes bounds one partition's share of it.
	replicaPartitionMaxBytes = 4 << 20
	// replicaSyncWait bounds the wait for the partitions that got records to
	// become durable before the next request goes without them.
	replicaSyncWait = 200 * time.Millisecond
)

// fetchers are the broker's follower fetchers, one per leader node.
type fetchers struct {
	mu     sync.Mutex
	ctx    context.Context // the cluster context; nil until startFetchers
	wg     *sync.WaitGroup
	byNode map[int32]*fetcher
}

// fetcher replicates from one leader broker.
type fetcher struct {
	b      *Cluster
	leader int32
	wake   chan struct{} // capacity 1

	mu    sync.Mutex
	ready map[*partition.Partition]struct{} // guarded by mu: partitions with a fetch to send
}

// startFetchers lets fetchReady start fetchers under ctx.
func (b *Cluster) startFetchers(ctx context.Context) {
	b.fetch.mu.Lock()
	defer b.fetch.mu.Unlock()
	b.fetch.ctx, b.fetch.wg = ctx, &b.clusterWG
	b.fetch.byNode = make(map[int32]*fetcher)
}

// fetchReady is partition.Net's (through partitionNet): partition p has a
// fetch for leader.
func (b *Cluster) fetchReady(leader int32, p *partition.Partition) {
	b.fetch.mu.Lock()
	if b.fetch.ctx == nil || b.fetch.ctx.Err() != nil {
		b.fetch.mu.Unlock()
		return // not serving yet, or stopping; the core asks again on a tick
	}
	f := b.fetch.byNode[leader]
	if f == nil {
		f = &fetcher{b: b, leader: leader, wake: make(chan struct{}, 1), ready: make(map[*partition.Partition]struct{})}
		b.fetch.byNode[leader] = f
		b.fetch.wg.Add(1)
		go func(ctx context.Context) {
			defer b.fetch.wg.Done()
			f.run(ctx)
		}(b.fetch.ctx)
	}
	b.fetch.mu.Unlock()
	f.mu.Lock()
	f.ready[p] = struct{}{}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run sends requests while partitions have fetches for this leader.
func (f *fetcher) run(ctx context.Context) {
	var cl *kgo.Client
	var clAddr string
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	var waitFor map[*partition.Partition]struct{} // in the last request; their next fetch is awaited
	for {
		if len(waitFor) > 0 {
			f.awaitDurable(ctx, waitFor)
			waitFor = nil
		} else {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
		}
		if ctx.Err() != nil {
			return
		}
		batch := f.take()
		if len(batch) == 0 {
			continue
		}
		addr := f.b.InterBrokerAddr(f.leader)
		if addr != clAddr || cl == nil {
			if cl != nil {
				cl.Close()
				cl = nil
			}
			if addr != "" {
				var err error
				// DialInterBroker speaks TLS with this broker's certificate
				// under --inter-broker-security-protocol SSL.
				cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("sluice-replica-%d", f.b.Cfg.NodeID)),
					kgo.RequestRetries(0), kgo.Dialer(f.b.DialInterBroker))
				if err != nil {
					f.b.Logger.Warn().Err(err).Int32("leader", f.leader).Msg("replica fetcher client")
					cl = nil
				}
			}
			clAddr = addr
		}
		if cl == nil {
			f.failAll(batch, "leader not reachable")
			node.SleepCtx(ctx, replicationTick)
			continue
		}
		waitFor = f.exchange(ctx, cl, batch)
	}
}

// take removes and returns the fetches that are ready to go.
func (f *fetcher) take() []pendingFetch {
	f.mu.Lock()
	ps := make([]*partition.Partition, 0, len(f.ready))
	for p := range f.ready {
		ps = append(ps, p)
	}
	clear(f.ready)
	f.mu.Unlock()
	out := make([]pendingFetch, 0, len(ps))
	for _, p := range ps {
		if m, ok := p.TakeFetch(); ok && int32(m.To) == f.leader {
			out = append(out, pendingFetch{p: p, msg: m})
		} else if ok {
			// The partition follows another leader now: hand the fetch to
			// that leader's fetcher.
			p.ReturnFetch(m)
			f.b.fetchReady(int32(m.To), p)
		}
	}
	return out
}

// pendingFetch is one partition's fetch in a request.
type pendingFetch struct {
	p   *partition.Partition
	msg replica.Message
}

// awaitDurable waits until every partition in set has its next fetch ready
// (or replicaSyncWait passes: one that failed waits out its back-off), so
// they go out in one request.
func (f *fetcher) awaitDurable(ctx context.Context, set map[*partition.Partition]struct{}) {
	deadline := time.NewTimer(replicaSyncWait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		all := true
		for p := range set {
			if _, ok := f.ready[p]; !ok {
				all = false
				break
			}
		}
		f.mu.Unlock()
		if all {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-f.wake:
		}
	}
}

// exchange sends one replica fetch for batch and hands each answer to its
// partition. It returns the partitions of the batch, whose next fetches the
// next request should carry: one that received records sends it once they
// are durable, the others at once. Sending the next request with only the
// partitions ready first would leave the others waiting behind a fetch the
// leader may hold for replicaFetchMaxWait, and with them the acknowledgement
// of whatever their leader appends meanwhile.
func (f *fetcher) exchange(ctx context.Context, cl *kgo.Client, batch []pendingFetch) map[*partition.Partition]struct{} {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.b.Cfg.NodeID
	// The leader serves replica fetches from v15 only, whose ReplicaState
	// carries this registration's incarnation as the broker epoch.
	req.ReplicaState.ID = f.b.Cfg.NodeID
	if reg := f.b.reg.Load(); reg != nil {
		req.ReplicaState.Epoch = reg.Info().Incarnation
	}
	req.MaxWaitMillis = int32(replicaFetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	byTopic := map[[16]byte]int{}
	for _, pf := range batch {
		i, ok := byTopic[pf.p.TopicID()]
		if !ok {
			i = len(req.Topics)
			byTopic[pf.p.TopicID()] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = pf.p.Topic(), pf.p.TopicID()
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = pf.p.Index()
		replica.EncodeFetch(pf.msg, &rp)
		rp.LogStartOffset = int64(pf.p.Log().StartOffset()) // the leader's low watermark counts it
		rp.PartitionMaxBytes = replicaPartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	rctx, cancel := context.WithTimeout(ctx, replicaFetchMaxWait+5*time.Second)
	defer cancel()
	brokers := cl.SeedBrokers()
	var resp *kmsg.FetchResponse
	var err error
	if len(brokers) == 0 {
		err = fmt.Errorf("no connection to leader %d", f.leader)
	} else {
		var kr kmsg.Response
		kr, err = brokers[0].Request(rctx, req)
		if err == nil {
			resp = kr.(*kmsg.FetchResponse)
		}
	}
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		if ctx.Err() == nil {
			f.b.Logger.Debug().Err(err).Int32("leader", f.leader).Msg("replica fetch failed")
		}
		f.failAll(batch, err.Error())
		node.SleepCtx(ctx, replicationTick)
		return nil
	}
	answered := make(map[*partition.Partition]bool, len(batch))
	next := make(map[*partition.Partition]struct{}, len(batch))
	find := func(topicID [16]byte, topicName string, part int32) *pendingFetch {
		for i := range batch {
			pf := &batch[i]
			if pf.p.Index() == part && (pf.p.TopicID() == topicID || (topicID == [16]byte{} && pf.p.Topic() == topicName)) {
				return pf
			}
		}
		return nil
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			pf := find(rt.TopicID, rt.Topic, rp.Partition)
			if pf == nil || answered[pf.p] {
				continue
			}
			answered[pf.p] = true
			if len(rp.RecordBatches) > 0 {
				f.b.M.ReplicaFetched(pf.p.Topic(), len(rp.RecordBatches))
			}
			switch rp.ErrorCode {
			case kerr.OffsetMovedToTieredStorage.Code:
				// The leader's local log starts above this replica's end:
				// the replica restarts at the remote end (tiering.go).
				f.b.RestartBehindLeader(pf.p, wal.Offset(rp.LogStartOffset))
			case kerr.OffsetOutOfRange.Code:
				// The records this replica lacks are gone from the leader:
				// it restarts at the leader's log start (replica_logstart.go).
				f.b.RestartAtLeaderStart(pf.p, wal.Offset(rp.LogStartOffset))
			}
			if rp.ErrorCode == 0 && rp.LogStartOffset > int64(pf.p.Log().StartOffset()) {
				// Before the answer: the high watermark it may raise must
				// not uncover records below the leader's log start.
				pf.p.FollowLogStart(wal.Offset(rp.LogStartOffset))
			}
			pf.p.Step(replica.DecodeFetchAnswer(pf.msg, &rp))
		}
	}
	for _, pf := range batch {
		if !answered[pf.p] {
			pf.p.Step(replica.UnjudgedAnswer(pf.msg))
		}
		next[pf.p] = struct{}{}
	}
	return next
}

// failAll answers every fetch of batch with NOT_LEADER, so each core
// retries after its back-off.
func (f *fetcher) failAll(batch []pendingFetch, why string) {
	for _, pf := range batch {
		pf.p.Step(replica.FailedAnswer(pf.msg))
	}
	f.b.Logger.Debug().Int32("leader", f.leader).Int("partitions", len(batch)).Str("why", why).Msg("replica fetch not answered")
}
