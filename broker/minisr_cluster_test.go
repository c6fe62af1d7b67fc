package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterMinInsyncReplicasAppliesToRunningPartitions: with one follower
// of a three-replica partition down, raising min.insync.replicas to 3
// (IncrementalAlterConfigs) makes the running leader refuse acks=all with
// NOT_ENOUGH_REPLICAS at once, without a reopen; lowering it again
// (AlterConfigs, sent to another broker, which the leader learns through
// the topic watch) lets produce succeed.
func TestClusterMinInsyncReplicasAppliesToRunningPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	c := startTestCluster(t, 3)
	cl := testClient(t, c.brokers[0])
	createReplicatedTopic(t, cl, "minisr", 1, 3)
	produceAll(t, c, "minisr", 10)
	st := c.brokers[0].LookupTopic("minisr").States[0]
	leader := c.brokers[st.Leader-1]
	other := -1 // the follower that stays up
	for i, b := range c.brokers {
		if b == leader {
			continue
		}
		if other < 0 {
			other = i
			continue
		}
		c.stops[i]()
	}
	p := mustPartition(t, leader, "minisr")
	eventuallyTrue(t, "the leader counts two replicas in sync", func() (bool, string) {
		st := p.ReplicaStatus()
		return len(st.InSync) == 2, fmt.Sprintf("in sync %v", st.InSync)
	})

	lcl := testClient(t, leader)
	produce := func() int16 {
		t.Helper()
		preq := kmsg.NewPtrProduceRequest()
		preq.Acks, preq.TimeoutMillis = -1, 5000
		prt := kmsg.NewProduceRequestTopic()
		prt.Topic = "minisr"
		prp := kmsg.NewProduceRequestTopicPartition()
		prp.Partition, prp.Records = 0, brokertest.Batch(1, -1, -1, -1, 1)
		prt.Partitions = append(prt.Partitions, prp)
		preq.Topics = append(preq.Topics, prt)
		resp, err := preq.RequestWith(context.Background(), lcl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != 0 {
		t.Fatalf("acks=all with two of three in sync and min.insync.replicas=1: code %d", code)
	}

	ctx := context.Background()
	resp, err := kadm.NewClient(lcl).AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("3")}}, "minisr")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("raise min.insync.replicas: %v %v", err, resp)
	}
	// The leader applied it before answering: no wait.
	if code := produce(); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with two in sync after min.insync.replicas=3: code %d, want NOT_ENOUGH_REPLICAS (%d)", code, kerr.NotEnoughReplicas.Code)
	}

	back, err := kadm.NewClient(testClient(t, c.brokers[other])).AlterTopicConfigsState(ctx,
		[]kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}, "minisr")
	if err != nil || back[0].Err != nil {
		t.Fatalf("lower min.insync.replicas: %v %v", err, back)
	}
	eventuallyTrue(t, "acks=all succeeds again", func() (bool, string) {
		code := produce()
		return code == 0, fmt.Sprintf("code %d", code)
	})
}
