package broker

// Topic defaults set by broker flags, and DescribeConfigs of what is in
// force, on a three-broker cluster: min.insync.replicas of a topic with
// three replicas describes as the two the replica core requires, and
// default.replication.factor as the replication a new topic gets.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeOn sends DescribeConfigs for one resource to broker b itself.
func describeOn(t *testing.T, b *Broker, typ kmsg.ConfigResourceType, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	cl := testClient(t, b)
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	req.Resources = append(req.Resources, rr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.Broker(int(b.Cfg.NodeID)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %s on broker %d: %+v", name, b.Cfg.NodeID, resp.Resources)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		out[c.Name] = c
	}
	return out
}

// createOn creates a topic through broker b itself (not the controller a
// client would pick), with replication factor rf (-1: the default).
func createOn(t *testing.T, b *Broker, name string, rf int16) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	cl := testClient(t, b)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.Broker(int(b.Cfg.NodeID)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s on broker %d: %+v", name, b.Cfg.NodeID, resp.Topics)
	}
	return resp.Topics[0]
}

// describeValue prints a nullable config value.
func describeValue(v *string) string {
	if v == nil {
		return "null"
	}
	return strconv.Quote(*v)
}

func TestTopicDefaultsAndEnforcedConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member etcd cluster")
	}
	// Brokers of one cluster should share their flags; here each has its
	// own so that one cluster shows every case: broker 1 sets a default
	// replication factor and retention, broker 2 a default
	// min.insync.replicas, broker 3 nothing.
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		switch cfg.NodeID {
		case 1:
			cfg.DefaultReplicationFactor = 2
			cfg.DefaultRetentionMs = 3600000
		case 2:
			cfg.DefaultMinInsyncReplicas = 3
		}
	})
	b1, b2, b3 := c.brokers[0], c.brokers[1], c.brokers[2]
	const def, static, dynamic = kmsg.ConfigSourceDefaultConfig, kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDynamicTopicConfig
	check := func(what string, got map[string]kmsg.DescribeConfigsResponseResourceConfig, name, value string, source kmsg.ConfigSource) {
		t.Helper()
		cfg, ok := got[name]
		if !ok || cfg.Value == nil {
			t.Fatalf("%s: %s not described, or without a value", what, name)
		}
		if *cfg.Value != value || cfg.Source != source {
			t.Errorf("%s: %s = %q (source %v), want %q (source %v)", what, name, *cfg.Value, cfg.Source, value, source)
		}
	}

	// A topic of three replicas commits on two, and says so.
	rf3 := createOn(t, b3, "rf3", 3)
	if rf3.ReplicationFactor != 3 {
		t.Fatalf("rf3 created with %d replicas", rf3.ReplicationFactor)
	}
	for _, cc := range rf3.Configs {
		if cc.Name == node.CfgMinInsyncReplicas && (cc.Value == nil || *cc.Value != "2") {
			t.Errorf("CreateTopics answers min.insync.replicas %v for three replicas, want 2", describeValue(cc.Value))
		}
	}
	check("rf3 on broker 3", describeOn(t, b3, kmsg.ConfigResourceTypeTopic, "rf3"), node.CfgMinInsyncReplicas, "2", def)
	check("rf3 on broker 3", describeOn(t, b3, kmsg.ConfigResourceTypeTopic, "rf3"), node.CfgRetentionMs, "86400000", def)
	// Broker 2's default of 3 is above the majority: it is what counts there.
	check("rf3 on broker 2", describeOn(t, b2, kmsg.ConfigResourceTypeTopic, "rf3"), node.CfgMinInsyncReplicas, "3", static)
	eventuallyTrue(t, "broker 2 opened rf3 with its default min.insync.replicas", func() (bool, string) {
		tp := b2.LookupTopic("rf3")
		return tp != nil && tp.Settings.MinInsyncReplicas == 3, "not yet"
	})
	// An explicit setting below the majority describes as the majority.
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "rf3"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Value, op.Op = node.CfgMinInsyncReplicas, kmsg.StringPtr("1"), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, op)
	alter.Resources = append(alter.Resources, res)
	if resp, err := alter.RequestWith(context.Background(), testClient(t, b3).Broker(3)); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set min.insync.replicas=1: %v %+v", err, resp)
	}
	check("rf3 with min.insync.replicas=1 set", describeOn(t, b3, kmsg.ConfigResourceTypeTopic, "rf3"), node.CfgMinInsyncReplicas, "2", dynamic)

	// default.replication.factor is what a new topic gets: one per AZ (3
	// here) without the flag, the flag's value with it.
	check("broker 3", describeOn(t, b3, kmsg.ConfigResourceTypeBroker, "3"), "default.replication.factor", "3", def)
	check("broker 1", describeOn(t, b1, kmsg.ConfigResourceTypeBroker, "1"), "default.replication.factor", "2", static)
	check("broker 1", describeOn(t, b1, kmsg.ConfigResourceTypeBroker, "1"), "log.retention.ms", "3600000", static)
	check("broker 2", describeOn(t, b2, kmsg.ConfigResourceTypeBroker, "2"), "min.insync.replicas", "3", static)
	check("broker 3", describeOn(t, b3, kmsg.ConfigResourceTypeBroker, "3"), "log.retention.ms", "86400000", def)

	// The flags change what a new topic gets.
	auto1 := createOn(t, b1, "auto1", -1)
	auto3 := createOn(t, b3, "auto3", -1)
	if auto1.ReplicationFactor != 2 || auto3.ReplicationFactor != 3 {
		t.Fatalf("default replication: %d through broker 1 (flag 2), %d through broker 3 (no flag, 3 AZs)", auto1.ReplicationFactor, auto3.ReplicationFactor)
	}
	check("auto1 on broker 1", describeOn(t, b1, kmsg.ConfigResourceTypeTopic, "auto1"), node.CfgRetentionMs, "3600000", static)
	check("auto1 on broker 1", describeOn(t, b1, kmsg.ConfigResourceTypeTopic, "auto1"), node.CfgMinInsyncReplicas, "2", def)
	if tp := b1.LookupTopic("auto1"); tp == nil || tp.Settings.RetentionMs != 3600000 || tp.Settings.Policy(0).RetentionMs != 3600000 {
		t.Fatalf("auto1 on broker 1: settings %+v, want retention.ms 3600000 in force", tp)
	}
}
