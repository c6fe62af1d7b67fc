package kafka

// Fetch (key 1) from a consumer (no replica id; replica fetches, and every
// fetch on the inter-broker listener, are in api_fetch_replica.go): whole record batches below the high watermark, with
// long polling. A fetch waits until MinBytes are available or MaxWait
// passes; the wait is on the partitions' high-watermark notifications, not a
// timer loop. Fetch sessions are not kept: session id 0 tells clients to
// send full fetches every time.
//
// Who serves a consumer, as Kafka does: the client's leader epoch is checked
// first (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), then the role. The
// leader serves every fetch; a v11+ fetch that names a rack (KIP-392) is
// answered by the leader with a PreferredReadReplica in that rack (an in-sync
// follower) and no records. A follower serves v11+ consumer fetches from its
// own log below its own high watermark; an offset outside its log is
// OFFSET_OUT_OF_RANGE, and the client goes back to the leader. Anything else
// is NOT_LEADER_OR_FOLLOWER, with CurrentLeader (v12+) from the partition
// state.
//
// Invariant: a response holds at most min(MaxBytes, node.Config.FetchMaxBytes)
// record bytes, except that the first batch is returned whole, as Kafka does,
// so a batch larger than every limit can still be consumed.
// Invariant: a consumer never gets a record at or above the high watermark
// of the replica that serves it (each replica's is at most the leader's).

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/wal"
)

// maxFetchWait bounds a long poll whatever the client asks.
const maxFetchWait = 30 * time.Second

func handleFetch(b *Server, ctx context.Context, req *request) (reply, error) {
	r := req.body.(*kmsg.FetchRequest)
	if id, _ := fetchReplica(r); id >= 0 || req.interBroker {
		return b.handleReplicaFetch(ctx, req, r)
	}
	if r.SessionID != 0 {
		resp := newResponse(req).(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return done(resp), nil
	}
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tenant := node.TenantOf(ctx)
	for {
		resp, res, err := b.fairFetchOnce(ctx, tenant, req, r)
		if err != nil {
			return nil, err
		}
		if len(res.remote) > 0 {
			// Object storage may take a while: the reply completes on the
			// connection's writer, and the reader goes on with the
			// connection's next requests.
			return waitReply(func() kmsg.Response {
				b.readRemoteParts(ctx, res.remote)
				return resp
			}), nil
		}
		// As Kafka: an error or a preferred replica is answered at once.
		if res.bytes >= int(r.MinBytes) || wait == 0 || len(res.waits) == 0 || res.now {
			return done(resp), nil
		}
		if !waitAny(ctx, deadline.C, res.waits) {
			resp, _, err = b.fairFetchOnce(ctx, tenant, req, r)
			if err != nil {
				return nil, err
			}
			return done(resp), nil
		}
	}
}

// waitAny blocks until one channel closes (true) or the deadline or ctx
// ends (false).
func waitAny(ctx context.Context, deadline <-chan time.Time, waits []<-chan struct{}) bool {
	if len(waits) == 1 {
		select {
		case <-waits[0]:
			return true
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	cases := make([]reflect.SelectCase, 0, len(waits)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, w := range waits {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 2
}

// fetchResult is what one pass over a fetch's partitions found.
type fetchResult struct {
	bytes  int               // record bytes in the response
	waits  []<-chan struct{} // high-watermark channels of partitions at their end
	now    bool              // a partition must be answered at once (error, preferred replica)
	remote []*remotePart     // partitions to read from object storage
}

// remotePart is a partition of a fetch below the local log start.
type remotePart struct {
	p      *partition.Partition
	from   wal.Offset
	budget int
	sp     *kmsg.FetchResponseTopicPartition
	label  string
}

// consumerFetch is what a pass needs to know about the request.
type consumerFetch struct {
	version int16
	rack    string // the client's rack (v11+), "" when none
	label   string // the client's rack as the consumer-bytes metric labels it
}

// fairFetchOnce is fetchOnce in its tenant's turn of the tail lane, charged
// the bytes it read: a tenant whose consumers read much takes no more than
// its share of the passes while others wait.
func (b *Server) fairFetchOnce(ctx context.Context, tenant string, req *request, r *kmsg.FetchRequest) (resp *kmsg.FetchResponse, res fetchResult, err error) {
	err = b.Fair.Run(ctx, b.Fair.Tail, tenant, func() float64 {
		resp, res = b.fetchOnce(req, r)
		local := res.bytes
		for _, rp := range res.remote {
			local -= rp.budget // reserved for object storage: the backfill lane's
		}
		return float64(local)
	})
	return resp, res, err
}

// fetchOnce reads every requested partition once.
func (b *Server) fetchOnce(req *request, r *kmsg.FetchRequest) (*kmsg.FetchResponse, fetchResult) {
	resp := newResponse(req).(*kmsg.FetchResponse)
	maxBytes := int(r.MaxBytes)
	if req.version < 3 || maxBytes <= 0 {
		maxBytes = 50 << 20
	}
	// The broker's cap (fetch.max.bytes) bounds what one request allocates;
	// the first batch still comes back whole if it alone is larger.
	maxBytes = min(maxBytes, int(b.Cfg.FetchMaxBytes))
	cf := consumerFetch{version: req.version}
	if req.version >= 11 {
		cf.rack = r.Rack
	}
	cf.label = b.rackLabel(cf.rack)
	var res fetchResult
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		var t *node.Topic
		if req.version >= 13 {
			t = b.LookupTopicID(rt.TopicID)
		} else {
			t = b.LookupTopic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// librdkafka rejects a null record set; send an empty one.
			sp.RecordBatches = []byte{}
			if t == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if req.version >= 13 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				res.now = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			budget := min(int(rp.PartitionMaxBytes), maxBytes-res.bytes)
			n, wait, remote := b.fetchPartition(t, rp, cf, budget, res.bytes == 0, &sp)
			res.bytes += n
			if wait != nil {
				res.waits = append(res.waits, wait)
			}
			res.now = res.now || sp.ErrorCode != 0 || sp.PreferredReadReplica >= 0
			st.Partitions = append(st.Partitions, sp)
			if remote != nil {
				res.remote = append(res.remote, remote)
				res.bytes += remote.budget // reserved for the remote read
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	// The remote partitions' answers are filled in place: point them at the
	// response's own elements, which were copied in.
	if len(res.remote) > 0 {
		i := 0
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if i < len(res.remote) && res.remote[i].sp == nil && resp.Topics[ti].Partitions[pi].ErrorCode == remotePending {
					res.remote[i].sp = &resp.Topics[ti].Partitions[pi]
					res.remote[i].sp.ErrorCode = 0
					i++
				}
			}
		}
	}
	return resp, res
}

// remotePending marks, during a pass, a response partition whose records
// come from object storage; it never reaches a client.
const remotePending int16 = -32768

// readRemoteParts reads the remote partitions of a fetch in parallel.
func (b *Server) readRemoteParts(ctx context.Context, parts []*remotePart) {
	ctx, cancel := context.WithTimeout(ctx, remoteReadTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, rp := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := b.ReadRemote(ctx, rp.p, rp.from, max(rp.budget, 1))
			if err != nil {
				rp.sp.ErrorCode = node.ErrorCode(err)
				return
			}
			if retryTier(rp.p.Topic()) {
				data, _ = b.dueCut(rp.p.Topic(), data)
			}
			rp.sp.RecordBatches = data
			b.M.BytesOut(rp.p.Topic(), len(data))
			b.M.RecordsOutN(rp.p.Topic(), node.CountRecords(data))
			b.M.ConsumerFetched(b.Cfg.AZ, rp.label, len(data))
		}()
	}
	wg.Wait()
}

// remoteReadTimeout bounds a fetch's reads of object storage; past it the
// partition gets a retriable error.
const remoteReadTimeout = node.RemoteReadTimeout

// fetchPartition fills sp for one partition and returns the record bytes
// added and, when the read reached the high watermark, its change channel.
func (b *Server) fetchPartition(t *node.Topic, rp kmsg.FetchRequestTopicPartition, cf consumerFetch, budget int, first bool, sp *kmsg.FetchResponseTopicPartition) (int, <-chan struct{}, *remotePart) {
	p, err := t.Local(rp.Partition)
	if err == nil {
		// Before v11 a consumer cannot be sent to a follower (KIP-392).
		err = checkServing(p, b.Cfg.NodeID, rp.CurrentLeaderEpoch, cf.version < 11)
	}
	if err != nil {
		sp.ErrorCode = node.ErrorCode(err)
		b.fillCurrentLeader(t, rp.Partition, sp)
		return 0, nil, nil
	}
	from := wal.Offset(rp.FetchOffset)
	hw, wait, perr := b.Position(context.Background(), p, from)
	sp.HighWatermark = int64(hw)
	sp.LastStableOffset = int64(hw)
	sp.LogStartOffset = int64(b.LogStart(context.Background(), p))
	remote := perr == nil && from < p.Log().StartOffset() // below the local log, in the remote one
	if cf.rack != "" && perr == nil {
		if id := b.preferredReadReplica(t, p, cf.rack); id >= 0 {
			sp.PreferredReadReplica = id
			return 0, nil, nil
		}
	}
	if perr != nil || (wait != nil && !remote) {
		sp.ErrorCode = node.ErrorCode(perr)
		return 0, wait, nil
	}
	if budget <= 0 && !first {
		return 0, nil, nil
	}
	if remote {
		// A slice of a replay at a time (node.Config.RemoteFetchMaxBytes).
		sp.ErrorCode = remotePending
		budget = min(budget, int(b.Cfg.RemoteFetchMaxBytes))
		return 0, nil, &remotePart{p: p, from: from, budget: max(budget, 1), label: cf.label}
	}
	data, readHW, err := p.Read(wal.Offset(rp.FetchOffset), max(budget, 1))
	if err != nil {
		sp.ErrorCode = node.ErrorCode(err)
		if !errors.Is(err, wal.ErrOffsetOutOfRange) {
			b.Logger.Error().Err(err).Str("topic", p.Topic()).Int32("partition", p.Index()).Msg("fetch read")
		}
		return 0, nil, nil
	}
	var dueWait <-chan struct{}
	if retryTier(p.Topic()) {
		data, dueWait = b.dueCut(p.Topic(), data) // api_fetch_due.go
	}
	// The read may have gone up to a newer high watermark; report the one
	// that bounds the records returned.
	sp.HighWatermark, sp.LastStableOffset = int64(readHW), int64(readHW)
	sp.RecordBatches = data
	b.M.BytesOut(p.Topic(), len(data))
	b.M.RecordsOutN(p.Topic(), node.CountRecords(data))
	b.M.ConsumerFetched(b.Cfg.AZ, cf.label, len(data))
	return len(data), dueWait, nil
}

// checkLeaderEpoch compares a client's view of the leader epoch with ours.
func checkLeaderEpoch(client int32, ours wal.Epoch) error {
	switch {
	case client < 0:
		return nil
	case client < int32(ours):
		return fmt.Errorf("leader epoch %d is older than %d: %w", client, ours, kerr.FencedLeaderEpoch)
	case client > int32(ours):
		return fmt.Errorf("leader epoch %d is newer than %d: %w", client, ours, kerr.UnknownLeaderEpoch)
	}
	return nil
}

// checkServing decides, as Kafka's Partition.getLocalLog does, whether this
// replica may answer a client: the client's leader epoch first, then the
// role (the leader always; a follower only when leaderOnly is false). A
// leader whose log failed refuses appends but goes on serving what it
// committed (its high watermark is frozen) until the controller moves
// leadership and the epoch check fences its clients. self is this broker's
// node id.
func checkServing(p *partition.Partition, self, clientEpoch int32, leaderOnly bool) error {
	if err := checkLeaderEpoch(clientEpoch, p.LeaderEpoch()); err != nil {
		return err
	}
	switch st := p.ReplicaStatus(); {
	case st.Role == replica.RoleLeader:
		return nil
	case st.Role == replica.RoleFollower && !leaderOnly:
		return nil
	case st.Role == replica.RoleNone && st.Err != nil && st.Leader == replica.NodeID(self):
		return nil
	default:
		return fmt.Errorf("%w: %s-%d: this replica is %s at epoch %d (leader %d)", node.ErrNotLeader,
			p.Topic(), p.Index(), st.Role, st.Epoch, st.Leader)
	}
}

// fillCurrentLeader names the partition's leader and epoch in a
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer (v12+; KIP-951
// clients act on it from v16), from the partition state etcd reported; -1
// when the state names no live leader.
func (b *Server) fillCurrentLeader(t *node.Topic, index int32, sp *kmsg.FetchResponseTopicPartition) {
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
		return
	}
	if index < 0 || int(index) >= len(t.States) {
		return
	}
	st := t.States[index]
	if st.Leader >= 0 && b.isLive(st.Leader) {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = st.Leader, st.LeaderEpoch
	}
}

// isLive reports whether broker id is registered (this broker alone before
// its registration is known, as Metadata lists it).
func (b *Server) isLive(id int32) bool {
	live := b.Brokers()
	if len(live) == 0 {
		return id == b.Cfg.NodeID
	}
	for _, bi := range live {
		if bi.NodeID == id {
			return true
		}
	}
	return false
}

// preferredReadReplica picks, on the leader, a replica in the client's
// rack for it to read from (KIP-392, Kafka's RackAwareReplicaSelector): an
// in-sync follower on a live broker whose AZ is rack, in the order of the
// partition's replicas. It is -1 (read from the leader) when this replica
// is not the leader, when the leader is in the rack itself, or when no
// such follower exists.
func (b *Server) preferredReadReplica(t *node.Topic, p *partition.Partition, rack string) int32 {
	if rack == b.Cfg.AZ || int(p.Index()) >= len(t.States) {
		return -1
	}
	st := p.ReplicaStatus()
	if st.Role != replica.RoleLeader {
		return -1
	}
	live := b.Brokers()
	for _, id := range t.States[p.Index()].Replicas {
		if id == b.Cfg.NodeID || !slices.Contains(st.InSync, replica.NodeID(id)) {
			continue
		}
		for _, bi := range live {
			if bi.NodeID == id && bi.AZ == rack {
				return id
			}
		}
	}
	return -1
}

// rackLabel bounds the client_rack label of the consumer-bytes metric: an
// AZ of a live broker is itself, no rack is "none", any other is "other".
func (b *Server) rackLabel(rack string) string {
	if rack == "" {
		return "none"
	}
	if rack == b.Cfg.AZ {
		return rack
	}
	for _, bi := range b.Brokers() {
		if bi.AZ == rack {
			return rack
		}
	}
	return "other"
}
