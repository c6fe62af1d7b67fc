package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/cluster"
	"github.com/sluice-mq/sluice/broker/kafka"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/replica"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/wal"
)

// rawBroker is a franz-go client's connection to one address, for requests
// no client would send.
func rawBroker(t *testing.T, addr string) *kgo.Broker {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl.SeedBrokers()[0]
}

// replicaFetch is a fetch of partition 0 of t from offset, as follower id
// with broker epoch brokerEpoch would send it (v15 puts both in
// ReplicaState; older versions carry only the id).
func replicaFetch(t *node.Topic, id int32, brokerEpoch int64, leaderEpoch int32, offset int64, lastEpoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = id
	req.ReplicaState.ID, req.ReplicaState.Epoch = id, brokerEpoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = t.Meta.Name, t.Meta.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch = 0, leaderEpoch, offset, lastEpoch
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func doFetch(t *testing.T, br *kgo.Broker, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := br.Request(ctx, req)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return resp.(*kmsg.FetchResponse)
}

// postEnvelopes POSTs envs to url and returns the status.
func postEnvelopes(t *testing.T, url string, envs []replica.Envelope) int {
	t.Helper()
	body, err := json.Marshal(envs)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// TestInternalRouteOnlyOnInterBrokerListener: the replica.Envelope route answers
// 404 on the public HTTP port and is served on the inter-broker listener.
func TestInternalRouteOnlyOnInterBrokerListener(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	if got := postEnvelopes(t, "http://"+b.httpLn.Addr().String()+cluster.ReplicationPath, nil); got != http.StatusNotFound {
		t.Fatalf("POST %s on the public HTTP port: %d, want 404", cluster.ReplicationPath, got)
	}
	if got := postEnvelopes(t, "http://"+b.kafka.InterBrokerAdvertise()+cluster.ReplicationPath, nil); got != http.StatusNoContent {
		t.Fatalf("POST %s on the inter-broker listener: %d, want 204", cluster.ReplicationPath, got)
	}
	// The inter-broker address is registered for the brokers, and clients
	// are not told it.
	if got := b.Brokers()[0].InterBroker; got != b.kafka.InterBrokerAdvertise() || got == "" {
		t.Fatalf("registered inter-broker address %q, want %q", got, b.kafka.InterBrokerAdvertise())
	}
	for _, mb := range metadataOf(t, b).Brokers {
		if addr := fmt.Sprintf("%s:%d", mb.Host, mb.Port); addr == b.kafka.InterBrokerAdvertise() {
			t.Fatalf("Metadata names the inter-broker address %s", addr)
		}
	}
}

// TestForgedFenceAtLastEpochRefused: a fence (or a fenced answer) at epoch
// 2147483647 would make the controller's next round overflow, leaving the
// partition unelectable; the inter-broker listener refuses it, and the
// partition keeps its leader and takes writes.
func TestForgedFenceAtLastEpochRefused(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.DefaultProduceTopic("fenced"), kgo.RecordDeliveryTimeout(20*time.Second))
	createTopic(t, cl, "fenced", 1, nil)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := b.LookupTopic("fenced")
	key := node.PartitionKey{TopicID: tp.Meta.ID, Partition: 0}
	p, err := b.PartitionOf("fenced", 0)
	if err != nil {
		t.Fatal(err)
	}
	before := p.ReplicaStatus()
	url := "http://" + b.kafka.InterBrokerAdvertise() + cluster.ReplicationPath
	for _, m := range []replica.Message{
		{Type: replica.MsgFence, From: replica.ControllerNode, To: replica.NodeID(b.Cfg.NodeID), Epoch: math.MaxInt32},
		{Type: replica.MsgFenceAck, From: replica.NodeID(b.Cfg.NodeID), To: replica.ControllerNode, Epoch: math.MaxInt32,
			Err: replica.ErrCodeFencedLeaderEpoch},
		{Type: replica.MsgLeaderUnreachable, From: replica.NodeID(b.Cfg.NodeID), To: replica.ControllerNode,
			Epoch: before.Epoch, LastEpoch: math.MaxInt32},
	} {
		if got := postEnvelopes(t, url, []replica.Envelope{{Key: key, Msg: m}}); got != http.StatusBadRequest {
			t.Errorf("%v at the last epoch: status %d, want 400", m.Type, got)
		}
	}
	if got := p.ReplicaStatus(); got.Role != replica.RoleLeader || got.Epoch != before.Epoch || got.Fenced == math.MaxInt32 {
		t.Fatalf("after the forged fences: %+v, want the leader still at epoch %d", got, before.Epoch)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the forged fences: %v", err)
	}
}

// TestReplicaFetchAuthorization: replica fetches are served only on the
// inter-broker listener, to a live broker presenting its current
// registration and assigned to the partition. A client forging a replica
// fetch on the Kafka port used to move the leader's view of a stopped
// follower's durable end, so an acks=all write was acknowledged by fewer
// replicas than min.insync.replicas.
func TestReplicaFetchAuthorization(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	createReplicatedWith(t, c, "guarded", map[string]string{"min.insync.replicas": "3"})
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("guarded"),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v0")}).FirstErr(); err != nil {
		t.Fatalf("produce with every replica up: %v", err)
	}
	li := c.leaderOf("guarded", 0)
	if li < 0 {
		t.Fatal("no leader")
	}
	leader := c.brokers[li]
	tp := leader.LookupTopic("guarded")
	lp, err := leader.PartitionOf("guarded", 0)
	if err != nil {
		t.Fatal(err)
	}
	st := lp.ReplicaStatus()
	epoch, lastEpoch := int32(st.Epoch), int32(lp.Log().LastEpoch())
	infos := map[int32]meta.BrokerInfo{}
	for _, bi := range leader.Brokers() {
		infos[bi.NodeID] = bi
	}
	var followers []int32
	for _, id := range tp.States[0].Replicas {
		if id != leader.Cfg.NodeID {
			followers = append(followers, id)
		}
	}
	slices.Sort(followers)

	// On the inter-broker listener: a broker that is no replica of the
	// partition, a stale incarnation and an unknown node are refused.
	ib := rawBroker(t, leader.kafka.InterBrokerAdvertise())
	other := infos[followers[0]]
	staleBefore := leader.kafka.FetchesRefused(kafka.RefuseBrokerEpoch)
	resp := doFetch(t, ib, replicaFetch(tp, other.NodeID, other.Incarnation-1, epoch, 0, -1))
	if resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("replica fetch with a stale broker epoch: code %d, want STALE_BROKER_EPOCH", resp.ErrorCode)
	}
	resp = doFetch(t, ib, replicaFetch(tp, 42, 1, epoch, 0, -1))
	if resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("replica fetch from an unknown node: code %d, want STALE_BROKER_EPOCH", resp.ErrorCode)
	}
	if n := leader.kafka.FetchesRefused(kafka.RefuseBrokerEpoch) - staleBefore; n != 2 {
		t.Fatalf("%d fetches refused for their broker epoch, want 2", n)
	}
	// The same node, as itself, is served (here: nothing new at the end, so
	// the core may still hold the fetch when the answer leaves, and the
	// partition is then left out of it).
	resp = doFetch(t, ib, replicaFetch(tp, other.NodeID, other.Incarnation, epoch, int64(lp.Log().EndOffset()), lastEpoch))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 ||
		len(resp.Topics[0].Partitions) > 0 && resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a follower's own fetch: %+v", resp)
	}
	// A partition whose replicas leave out one live broker.
	createReplicatedTopic(t, testClient(t, leader), "pair", 1, 2)
	var pairLeader *Broker
	var stranger meta.BrokerInfo
	eventuallyTrue(t, "the pair topic has a leader", func() (bool, string) {
		for _, b := range c.brokers {
			if p, err := b.PartitionOf("pair", 0); err == nil && p.ReplicaStatus().Role == replica.RoleLeader {
				pairLeader = b
			}
		}
		return pairLeader != nil, "none yet"
	})
	pt := pairLeader.LookupTopic("pair")
	for _, bi := range pairLeader.Brokers() {
		if !slices.Contains(pt.States[0].Replicas, bi.NodeID) {
			stranger = bi
		}
	}
	pp, _ := pairLeader.PartitionOf("pair", 0)
	strangerBefore := pairLeader.kafka.FetchesRefused(kafka.RefuseNotReplica)
	resp = doFetch(t, rawBroker(t, pairLeader.kafka.InterBrokerAdvertise()),
		replicaFetch(pt, stranger.NodeID, stranger.Incarnation, int32(pp.ReplicaStatus().Epoch), 0, -1))
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("replica fetch from node %d, no replica of %v: code %d, want NOT_LEADER_OR_FOLLOWER",
			stranger.NodeID, pt.States[0].Replicas, code)
	}
	if n := pairLeader.kafka.FetchesRefused(kafka.RefuseNotReplica) - strangerBefore; n != 1 {
		t.Fatalf("%d partitions refused to a non-replica, want 1", n)
	}

	// On the client Kafka port: stop one follower and forge its fetches at
	// the leader's log end while a write waits for three replicas.
	stopped := followers[1]
	c.stops[stopped-1]()
	// reported: the stopped follower's durable end as the leader counts it.
	reported := func() wal.Offset {
		t.Helper()
		ch, ok := lp.Followers(time.Now().Add(5 * time.Second))
		if !ok {
			t.Fatal("the leader's owner did not answer for its followers")
		}
		for _, f := range (<-ch).Followers {
			if f.ID == replica.NodeID(stopped) {
				return f.Fetched
			}
		}
		t.Fatalf("node %d is not a follower of the leader", stopped)
		return 0
	}
	before := reported()
	client := rawBroker(t, leader.KafkaAddr())
	forged := make(chan int16, 1024)
	stopForging := make(chan struct{})
	forgerDone := make(chan struct{})
	go func() {
		defer close(forgerDone)
		for {
			select {
			case <-stopForging:
				return
			case <-time.After(10 * time.Millisecond):
			}
			end := lp.Log().EndOffset() // the status's End is not kept current
			req := replicaFetch(tp, stopped, -1, epoch, int64(end), int32(lp.Log().LastEpoch()))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := client.Request(ctx, req)
			cancel()
			if err == nil {
				select {
				case forged <- r.(*kmsg.FetchResponse).ErrorCode:
				default:
				}
			}
		}
	}()
	// A raw produce: a client library would retry past its deadline.
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 2000
	pt0 := kmsg.NewProduceRequestTopic()
	pt0.Topic, pt0.TopicID = tp.Meta.Name, tp.Meta.ID
	pp0 := kmsg.NewProduceRequestTopicPartition()
	pp0.Partition, pp0.Records = 0, brokertest.Batch(1, -1, -1, -1, time.Now().UnixMilli())
	pt0.Partitions = append(pt0.Partitions, pp0)
	preq.Topics = append(preq.Topics, pt0)
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	presp, err := rawBroker(t, leader.KafkaAddr()).Request(pctx, preq)
	pcancel()
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	produceCode := presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	close(stopForging)
	select {
	case <-forgerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the forger did not stop")
	}
	if produceCode == 0 {
		t.Fatalf("acks=all write acknowledged with node %d stopped and min.insync.replicas=3: forged replica fetches counted", stopped)
	}
	t.Logf("write with a follower stopped: %v", kerr.ErrorForCode(produceCode))
	// The high watermark may rise (the live follower and the leader are a
	// majority); the stopped follower's reported end may not.
	if after := reported(); after > before {
		t.Fatalf("leader counts stopped node %d durable to %d (was %d): forged replica fetches counted", stopped, after, before)
	}
	close(forged)
	n := 0
	for code := range forged {
		n++
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("forged replica fetch on the client port answered code %d, want CLUSTER_AUTHORIZATION_FAILED", code)
		}
	}
	if n == 0 || leader.kafka.FetchesRefused(kafka.RefuseClientListener) == 0 {
		t.Fatalf("%d forged fetches answered, %d refused", n, leader.kafka.FetchesRefused(kafka.RefuseClientListener))
	}
}

// createReplicatedWith creates a one-partition topic of three replicas with
// configs and waits until it has a leader and two followers.
func createReplicatedWith(t *testing.T, c *testCluster, name string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 3
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), testClient(t, c.brokers[0]))
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
	eventuallyTrue(t, "a leader with two followers in sync", func() (bool, string) {
		li := c.leaderOf(name, 0)
		if li < 0 {
			return false, "no leader"
		}
		p, _ := c.brokers[li].PartitionOf(name, 0)
		st := p.ReplicaStatus()
		return len(st.InSync) == 3, fmt.Sprintf("in sync %v", st.InSync)
	})
}
