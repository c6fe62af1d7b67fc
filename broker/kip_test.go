package broker

// Tests of the client-facing side of replication: OffsetForLeaderEpoch
// (KIP-320), leader and epoch checks with CurrentLeader on Fetch and
// ListOffsets, fetching from the nearest replica (KIP-392) and the ISR in
// Metadata.

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/node"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/replica"
)

// askRaw sends req at version to broker b on a connection of its own and
// returns the decoded response.
func askRaw(t *testing.T, b *Broker, req kmsg.Request, version int16) kmsg.Response {
	t.Helper()
	req.SetVersion(version)
	resp := req.ResponseKind()
	resp.SetVersion(version)
	dialRaw(t, b, "").roundTrip(req, resp)
	return resp
}

// epochReq is an OffsetForLeaderEpoch request for one partition.
func epochReq(topic string, partition, current, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func askEpoch(t *testing.T, b *Broker, topic string, partition, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	resp := askRaw(t, b, epochReq(topic, partition, current, epoch), 4).(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetForLeaderEpoch: want one partition back, got %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// listReq is a ListOffsets request for one partition.
func listReq(topic string, partition int32, replicaID int32, ts int64, current int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = replicaID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, ts, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// consumerFetchReq is a consumer Fetch of one partition by topic name
// (versions below 13), with a short wait.
func consumerFetchReq(topic string, partition int32, offset int64, epoch int32, rack string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.Rack = -1, 100, 1<<20, rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 1<<20, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func askFetch(t *testing.T, b *Broker, version int16, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := askRaw(t, b, req, version).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch v%d: want one partition back, got %+v", version, resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// TestOffsetForLeaderEpochAnswers asks a lone broker that led two epochs
// (a restart elects it again at a new one).
func TestOffsetForLeaderEpochAnswers(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	cl := testClient(t, b)
	createTopic(t, cl, "epochs", 1, nil)
	for range 2 {
		if code := produceRaw(t, b, cl, "epochs", 0, brokertest.Batch(3, -1, -1, -1, 1)).ErrorCode; code != 0 {
			t.Fatalf("produce: error %d", code)
		}
	}
	first := b.LookupTopic("epochs").Partitions[0].LeaderEpoch()
	cl.Close()
	stop()

	b = startBroker(t, cfg)
	cl = testClient(t, b)
	p := b.LookupTopic("epochs").Partitions[0]
	eventuallyTrue(t, "the partition leads again", func() (bool, string) {
		st := p.ReplicaStatus()
		return st.Role == replica.RoleLeader, fmt.Sprintf("%+v", st)
	})
	cur := int32(p.LeaderEpoch())
	if cur <= int32(first) {
		t.Fatalf("epoch after the restart %d, before %d", cur, first)
	}
	// No batch of the new epoch yet: it starts, and ends, at the log end.
	if got := askEpoch(t, b, "epochs", 0, cur, cur); got.ErrorCode != 0 || got.LeaderEpoch != cur || got.EndOffset != 6 {
		t.Fatalf("current epoch before any produce: %+v, want (%d, 6)", got, cur)
	}
	if code := produceRaw(t, b, cl, "epochs", 0, brokertest.Batch(4, -1, -1, -1, 1)).ErrorCode; code != 0 {
		t.Fatalf("produce: error %d", code)
	}
	t.Logf("epoch chain %+v, current epoch %d, log end %d", p.Log().Epochs(), cur, p.Log().EndOffset())
	for _, tc := range []struct {
		name            string
		topic           string
		partition       int32
		current, epoch  int32
		code            int16
		wantE           int32
		wantEnd         int64
		onlyIfFirstAbv0 bool
	}{
		{name: "current epoch: the log end", topic: "epochs", current: cur, epoch: cur, wantE: cur, wantEnd: 10},
		{name: "no current epoch given", topic: "epochs", current: -1, epoch: cur, wantE: cur, wantEnd: 10},
		{name: "the first epoch ends where the second starts", topic: "epochs", current: cur, epoch: int32(first), wantE: int32(first), wantEnd: 6},
		{name: "an epoch in between: the first", topic: "epochs", current: cur, epoch: cur - 1, wantE: int32(first), wantEnd: 6},
		{name: "unknown epoch above the current", topic: "epochs", current: cur, epoch: cur + 1, wantE: -1, wantEnd: -1},
		{name: "below the first epoch", topic: "epochs", current: cur, epoch: int32(first) - 1, wantE: int32(first) - 1, wantEnd: 0, onlyIfFirstAbv0: true},
		{name: "fenced: the client's leader epoch is older", topic: "epochs", current: cur - 1, epoch: cur, code: kerr.FencedLeaderEpoch.Code, wantE: -1, wantEnd: -1},
		{name: "the client's leader epoch is newer", topic: "epochs", current: cur + 1, epoch: cur, code: kerr.UnknownLeaderEpoch.Code, wantE: -1, wantEnd: -1},
		{name: "unknown topic", topic: "nope", current: -1, epoch: cur, code: kerr.UnknownTopicOrPartition.Code, wantE: -1, wantEnd: -1},
		{name: "unknown partition", topic: "epochs", partition: 3, current: -1, epoch: cur, code: kerr.UnknownTopicOrPartition.Code, wantE: -1, wantEnd: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.onlyIfFirstAbv0 && first == 0 {
				t.Skip("the first epoch is 0")
			}
			got := askEpoch(t, b, tc.topic, tc.partition, tc.current, tc.epoch)
			if got.ErrorCode != tc.code || got.LeaderEpoch != tc.wantE || got.EndOffset != tc.wantEnd {
				t.Fatalf("got error %d (%d, %d), want error %d (%d, %d)", got.ErrorCode, got.LeaderEpoch, got.EndOffset, tc.code, tc.wantE, tc.wantEnd)
			}
		})
	}
	// librdkafka asks v2, which has no ReplicaID.
	resp := askRaw(t, b, epochReq("epochs", 0, cur, int32(first)), 2).(*kmsg.OffsetForLeaderEpochResponse)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.EndOffset != 6 {
		t.Fatalf("v2: %+v", got)
	}
	// ListOffsets names the epoch of the batch an offset is in.
	lresp := askRaw(t, b, listReq("epochs", 0, -1, node.ListEarliest, -1), 6).(*kmsg.ListOffsetsResponse)
	if got := lresp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 0 || got.LeaderEpoch != int32(first) {
		t.Fatalf("earliest: %+v, want offset 0 at epoch %d", got, first)
	}
	lresp = askRaw(t, b, listReq("epochs", 0, -1, node.ListLatest, -1), 6).(*kmsg.ListOffsetsResponse)
	if got := lresp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 10 || got.LeaderEpoch != cur {
		t.Fatalf("latest: %+v, want offset 10 at epoch %d", got, cur)
	}
}

// leaderOf returns the index in c.brokers of the partition's leader, or -1;
// the brokers at the indexes in skip (stopped ones) are not asked.
func (c *testCluster) leaderOf(topic string, part int32, skip ...int) int {
	for i, b := range c.brokers {
		if slices.Contains(skip, i) {
			continue
		}
		p, err := b.PartitionOf(topic, part)
		if err == nil && p.ReplicaStatus().Role == replica.RoleLeader {
			return i
		}
	}
	return -1
}

// createReplicated creates topic with partitions of three replicas and
// waits until every partition has a leader that every replica follows.
func createReplicated(t *testing.T, c *testCluster, topic string, partitions int32) {
	t.Helper()
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		n := len(c.brokers[0].Brokers())
		return n == 3, fmt.Sprintf("%d brokers", n)
	})
	cl := testClient(t, c.brokers[0])
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
	eventuallyTrue(t, "every partition has a leader and followers", func() (bool, string) {
		for part := range partitions {
			var leaders, followers int
			for _, b := range c.brokers {
				p, err := b.PartitionOf(topic, part)
				if err != nil {
					return false, err.Error()
				}
				switch p.ReplicaStatus().Role {
				case replica.RoleLeader:
					leaders++
				case replica.RoleFollower:
					followers++
				}
			}
			if leaders != 1 || followers != 2 {
				return false, fmt.Sprintf("partition %d: %d leaders, %d followers", part, leaders, followers)
			}
		}
		return true, ""
	})
}

// requestCounter counts the requests of one API key a client writes.
type requestCounter struct {
	key int16
	n   atomic.Int64
}

func (h *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == h.key && err == nil {
		h.n.Add(1)
	}
}

// readValues polls cons until it has want more records and returns their
// values in order.
func readValues(t *testing.T, cons *kgo.Client, want int) []string {
	t.Helper()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for len(got) < want && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, part int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("consume %s-%d: %v", topic, part, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != want {
		t.Fatalf("read %d records, want %d", len(got), want)
	}
	return got
}

// TestClusterConsumerValidatesAfterLeaderChange: a franz-go consumer that
// consumed under one leader checks its position with OffsetForLeaderEpoch
// at the next leader (KIP-320) and goes on reading without a gap, a
// duplicate or a data-loss report.
func TestClusterConsumerValidatesAfterLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createReplicated(t, c, "kip320", 1)
	produceValues := func(from, n int) {
		prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("kip320"),
			kgo.RecordRetries(50), kgo.RecordDeliveryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(context.Background(), kgo.StringRecord(fmt.Sprintf("v%03d", i))).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produceValues(0, 30)

	hook := &requestCounter{key: int16(kmsg.OffsetForLeaderEpoch)}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("kip320"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := readValues(t, cons, 30)

	old := c.leaderOf("kip320", 0)
	oldEpoch := c.brokers[old].LookupTopic("kip320").Partitions[0].LeaderEpoch()
	c.stops[old]()
	var next int
	eventuallyTrue(t, "another broker leads", func() (bool, string) {
		next = c.leaderOf("kip320", 0, old)
		return next >= 0, fmt.Sprintf("leader index %d", next)
	})
	newEpoch := c.brokers[next].LookupTopic("kip320").Partitions[0].LeaderEpoch()
	t.Logf("leader moved from broker %d (epoch %d) to broker %d (epoch %d)", old+1, oldEpoch, next+1, newEpoch)
	produceValues(30, 30)
	got = append(got, readValues(t, cons, 30)...)
	for i, v := range got {
		if v != fmt.Sprintf("v%03d", i) {
			t.Fatalf("record %d is %q: the consumer skipped or repeated records", i, v)
		}
	}
	if hook.n.Load() == 0 {
		t.Fatal("the consumer sent no OffsetForLeaderEpoch after the leader change")
	}
	served := metricValue(t, c.brokers[next], "sluice_kafka_requests_total", "api", "OffsetForLeaderEpoch")
	t.Logf("the consumer sent %d OffsetForLeaderEpoch requests; the new leader served %v", hook.n.Load(), served)
	if served == 0 {
		t.Fatal("the new leader served no OffsetForLeaderEpoch")
	}
	// The new leader answers the old epoch with where it ended: at or past
	// everything consumed under it, so nothing was lost.
	ans := askEpoch(t, c.brokers[next], "kip320", 0, int32(newEpoch), int32(oldEpoch))
	if ans.ErrorCode != 0 || ans.LeaderEpoch > int32(oldEpoch) || ans.EndOffset < 30 {
		t.Fatalf("old epoch %d at the new leader: %+v", oldEpoch, ans)
	}
	// The stale epoch is fenced; a replica that is not the leader refuses.
	if ans := askEpoch(t, c.brokers[next], "kip320", 0, int32(oldEpoch), int32(oldEpoch)); ans.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale current epoch: error %d, want FENCED_LEADER_EPOCH", ans.ErrorCode)
	}
	for i, b := range c.brokers {
		if i == old || i == next {
			continue
		}
		if ans := askEpoch(t, b, "kip320", 0, int32(newEpoch), int32(oldEpoch)); ans.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("OffsetForLeaderEpoch at follower %d: error %d, want NOT_LEADER_OR_FOLLOWER", i+1, ans.ErrorCode)
		}
	}
}

// consumerBytes is broker b's sluice_fetch_bytes_total for a client rack.
func consumerBytes(t *testing.T, b *Broker, rack string) float64 {
	t.Helper()
	return metricValue(t, b, "sluice_fetch_bytes_total", "az", b.Cfg.AZ, "client_rack", rack)
}

// TestClusterFetchFromNearestReplica: a consumer in AZ b reads a whole
// topic, most of whose leaders are in other AZs, and every byte comes from
// the AZ-b broker (KIP-392); the raw answers on the way are Kafka's.
func TestClusterFetchFromNearestReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	const parts, n = 6, 600
	createReplicated(t, c, "near", parts)
	produceAll(t, c, "near", n)
	elsewhere := 0
	for part := range int32(parts) {
		if c.leaderOf("near", part) != 1 {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Fatal("broker 2 leads every partition; nothing to read from a follower")
	}

	// Without a rack, a consumer reads from the leaders: for a client in b
	// the bytes from a and c would cross AZs.
	if seen := consumeAll(t, c, "near", n); len(seen) != n {
		t.Fatalf("no rack: read %d of %d", len(seen), n)
	}
	for _, b := range c.brokers {
		t.Logf("no rack: broker in AZ %s served %v consumer bytes", b.Cfg.AZ, consumerBytes(t, b, "none"))
	}

	seen := consumeAll(t, c, "near", n, kgo.Rack("b"))
	if len(seen) != n {
		t.Fatalf("rack b: read %d of %d records", len(seen), n)
	}
	var cross float64
	for _, b := range c.brokers {
		v := consumerBytes(t, b, "b")
		t.Logf("rack b: broker in AZ %s served %v consumer bytes", b.Cfg.AZ, v)
		if b.Cfg.AZ != "b" {
			cross += v
		}
	}
	if cross != 0 || consumerBytes(t, c.brokers[1], "b") == 0 {
		t.Fatalf("rack b: %v cross-AZ bytes, %v from AZ b; want 0 and all", cross, consumerBytes(t, c.brokers[1], "b"))
	}
	t.Logf("rack b: %d of %d partitions led elsewhere, 0 cross-AZ consumer bytes", elsewhere, parts)

	// The answers on the way, on a partition led outside AZ b.
	part := int32(-1)
	for p := range int32(parts) {
		if c.leaderOf("near", p) != 1 {
			part = p
			break
		}
	}
	leader, follower := c.brokers[c.leaderOf("near", part)], c.brokers[1]
	epoch := int32(leader.LookupTopic("near").Partitions[part].LeaderEpoch())
	t.Run("leader names the replica in the client's rack", func(t *testing.T) {
		got := askFetch(t, leader, 11, consumerFetchReq("near", part, 0, epoch, "b"))
		if got.ErrorCode != 0 || got.PreferredReadReplica != 2 || len(got.RecordBatches) != 0 {
			t.Fatalf("error %d, preferred %d, %d record bytes; want 0, 2, none", got.ErrorCode, got.PreferredReadReplica, len(got.RecordBatches))
		}
	})
	t.Run("leader in the client's rack serves it", func(t *testing.T) {
		got := askFetch(t, leader, 11, consumerFetchReq("near", part, 0, epoch, leader.Cfg.AZ))
		if got.ErrorCode != 0 || got.PreferredReadReplica != -1 || len(got.RecordBatches) == 0 {
			t.Fatalf("error %d, preferred %d, %d record bytes", got.ErrorCode, got.PreferredReadReplica, len(got.RecordBatches))
		}
	})
	t.Run("follower serves v11 consumers", func(t *testing.T) {
		got := askFetch(t, follower, 12, consumerFetchReq("near", part, 0, epoch, "b"))
		if got.ErrorCode != 0 || got.PreferredReadReplica != -1 || len(got.RecordBatches) == 0 {
			t.Fatalf("error %d, preferred %d, %d record bytes", got.ErrorCode, got.PreferredReadReplica, len(got.RecordBatches))
		}
	})
	t.Run("follower refuses fetches before v11", func(t *testing.T) {
		got := askFetch(t, follower, 10, consumerFetchReq("near", part, 0, epoch, ""))
		if got.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("error %d, want NOT_LEADER_OR_FOLLOWER", got.ErrorCode)
		}
	})
	t.Run("follower: past its log is out of range", func(t *testing.T) {
		fp, _ := follower.PartitionOf("near", part)
		got := askFetch(t, follower, 12, consumerFetchReq("near", part, int64(fp.Log().EndOffset())+5, epoch, "b"))
		if got.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("error %d, want OFFSET_OUT_OF_RANGE", got.ErrorCode)
		}
	})
	t.Run("stale epoch at a follower is fenced and names the leader", func(t *testing.T) {
		got := askFetch(t, follower, 12, consumerFetchReq("near", part, 0, epoch-1, "b"))
		if got.ErrorCode != kerr.FencedLeaderEpoch.Code || got.CurrentLeader.LeaderID != leader.Cfg.NodeID || got.CurrentLeader.LeaderEpoch != epoch {
			t.Fatalf("error %d, current leader %+v; want FENCED_LEADER_EPOCH, {%d %d}", got.ErrorCode, got.CurrentLeader, leader.Cfg.NodeID, epoch)
		}
	})
	t.Run("ListOffsets only at the leader, except for debugging", func(t *testing.T) {
		for _, tc := range []struct {
			b       *Broker
			replica int32
			code    int16
		}{{leader, -1, 0}, {follower, -1, kerr.NotLeaderForPartition.Code}, {follower, -2, 0}} {
			resp := askRaw(t, tc.b, listReq("near", part, tc.replica, node.ListLatest, epoch), 6).(*kmsg.ListOffsetsResponse)
			got := resp.Topics[0].Partitions[0]
			if got.ErrorCode != tc.code || (tc.code == 0 && got.Offset <= 0) {
				t.Errorf("node %d replica id %d: error %d offset %d, want error %d", tc.b.Cfg.NodeID, tc.replica, got.ErrorCode, got.Offset, tc.code)
			}
		}
	})
	t.Run("Metadata ISR is the leader's view", func(t *testing.T) {
		md := metadataOf(t, leader)
		for _, mt := range md.Topics {
			if *mt.Topic != "near" {
				continue
			}
			mp := mt.Partitions[part]
			if mp.Leader != leader.Cfg.NodeID || mp.LeaderEpoch != epoch || len(mp.ISR) != 3 || len(mp.OfflineReplicas) != 0 {
				t.Fatalf("partition %d: leader %d epoch %d ISR %v offline %v", part, mp.Leader, mp.LeaderEpoch, mp.ISR, mp.OfflineReplicas)
			}
		}
	})
}

// TestClusterNotLeaderNamesTheLeader: a broker without a replica answers a
// consumer fetch with NOT_LEADER_OR_FOLLOWER and the current leader (v12+),
// and ListOffsets with NOT_LEADER_OR_FOLLOWER; Metadata lists a stopped
// replica as offline and out of the ISR.
func TestClusterNotLeaderNamesTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	eventuallyTrue(t, "broker 1 sees three brokers", func() (bool, string) {
		n := len(c.brokers[0].Brokers())
		return n == 3, fmt.Sprintf("%d brokers", n)
	})
	cl := testClient(t, c.brokers[0])
	createTopic(t, cl, "single", 1, nil) // one replica
	owner := -1
	eventuallyTrue(t, "the partition has its leader", func() (bool, string) {
		owner = c.leaderOf("single", 0)
		return owner >= 0, "none yet"
	})
	other := c.brokers[(owner+1)%3]
	eventuallyTrue(t, "the other broker knows the topic", func() (bool, string) {
		t := other.LookupTopic("single")
		return t != nil && t.States[0].Leader == c.brokers[owner].Cfg.NodeID, "not yet"
	})
	epoch := other.LookupTopic("single").States[0].LeaderEpoch
	got := askFetch(t, other, 12, consumerFetchReq("single", 0, 0, -1, ""))
	if got.ErrorCode != kerr.NotLeaderForPartition.Code || got.CurrentLeader.LeaderID != c.brokers[owner].Cfg.NodeID || got.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("fetch at a broker without the partition: error %d, current leader %+v; want NOT_LEADER_OR_FOLLOWER, {%d %d}",
			got.ErrorCode, got.CurrentLeader, c.brokers[owner].Cfg.NodeID, epoch)
	}
	lresp := askRaw(t, other, listReq("single", 0, -1, node.ListLatest, -1), 6).(*kmsg.ListOffsetsResponse)
	if code := lresp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("ListOffsets at a broker without the partition: error %d", code)
	}

	// A replicated partition whose follower stops: the leader's ISR drops
	// it once the lag window passes; every broker lists it offline.
	createReplicated(t, c, "isr", 1)
	lead := c.leaderOf("isr", 0)
	gone := (lead + 1) % 3
	c.stops[gone]()
	goneID := c.brokers[gone].Cfg.NodeID
	eventuallyTrue(t, "the leader's metadata drops the stopped replica", func() (bool, string) {
		for _, mt := range metadataOf(t, c.brokers[lead]).Topics {
			if *mt.Topic != "isr" {
				continue
			}
			mp := mt.Partitions[0]
			return !slices.Contains(mp.ISR, goneID) && slices.Equal(mp.OfflineReplicas, []int32{goneID}) && len(mp.ISR) == 2,
				fmt.Sprintf("ISR %v offline %v", mp.ISR, mp.OfflineReplicas)
		}
		return false, "no topic"
	})
}
