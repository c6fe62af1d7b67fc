package broker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("describe %s: no %s among %d configs", topic, key, len(rc.Configs))
	return kadm.Config{}
}

func TestTopicConfigsThroughKadm(t *testing.T) {
	cfg := testBrokerConfig(t)
	b, stop := startStoppableBroker(t, cfg)
	adm := kadm.NewClient(testClient(t, b))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "cfg"); err != nil {
		t.Fatal(err)
	}
	if c := describeConfig(t, adm, "cfg", "retention.ms"); c.MaybeValue() != "3600000" || c.Source != 1 {
		t.Fatalf("explicit retention.ms: %+v", c)
	}
	if c := describeConfig(t, adm, "cfg", "segment.bytes"); c.MaybeValue() != "67108864" || c.Source != 5 {
		t.Fatalf("default segment.bytes: %+v", c)
	}

	set := func(op kadm.IncrementalOp, key, value string) error {
		t.Helper()
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: kadm.StringPtr(value)}}, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].Err
	}
	if err := set(kadm.SetConfig, "max.message.bytes", "2048"); err != nil {
		t.Fatal(err)
	}
	if err := set(kadm.SetConfig, "retention.ms", "soon"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("invalid value: %v", err)
	}
	if err := set(kadm.SetConfig, "log.cleaner.magic", "1"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("unknown key: %v", err)
	}
	if err := set(kadm.DeleteConfig, "retention.ms", ""); err != nil {
		t.Fatal(err)
	}
	if c := describeConfig(t, adm, "cfg", "retention.ms"); c.MaybeValue() != "86400000" {
		t.Fatalf("deleted retention.ms should be back at its default: %+v", c)
	}
	// The new max.message.bytes is enforced at once.
	cl := testClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1))
	big := &kgo.Record{Topic: "cfg", Value: make([]byte, 4096)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("4 KiB record with max.message.bytes=2048: %v", err)
	}
	// Non-incremental AlterConfigs replaces the whole set.
	resp, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kadm.StringPtr("60000")}}, "cfg")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter configs: %v %v", err, resp[0].Err)
	}
	if c := describeConfig(t, adm, "cfg", "max.message.bytes"); c.MaybeValue() != "1048588" {
		t.Fatalf("AlterConfigs must reset keys it does not name: %+v", c)
	}
	// Configs survive a restart (fresh broker on the same data dir).
	stop()
	b2 := startBroker(t, cfg)
	adm2 := kadm.NewClient(testClient(t, b2))
	if c := describeConfig(t, adm2, "cfg", "segment.ms"); c.MaybeValue() != "60000" {
		t.Fatalf("segment.ms after restart: %+v", c)
	}
}

func TestCreatePartitionsAndDeleteTopics(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreatePartitions(ctx, 2, "grow"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: 2, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to a new partition: %v", err)
	}
	resp, err := adm.UpdatePartitions(ctx, 2, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.On("grow", nil); !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking to 2: %v", r.Err)
	}

	if _, err := adm.DeleteTopics(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if td := md.Topics["grow"]; !errors.Is(td.Err, kerr.UnknownTopicOrPartition) && td.Err != nil {
		t.Fatalf("metadata after delete: %v", td.Err)
	}
	again, err := adm.CreateTopic(ctx, 1, 1, nil, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == created.ID {
		t.Fatal("a recreated topic kept its old topic ID")
	}
	ends, err := adm.ListEndOffsets(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("grow", 0); o.Offset != 0 {
		t.Fatalf("recreated topic starts at %d, not empty", o.Offset)
	}
}

func TestDeleteTopicDeletesCommittedOffsets(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	cl := testClient(t, b)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for _, name := range []string{"doomed", "kept"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	for _, name := range []string{"doomed", "kept"} {
		offsets.Add(kadm.Offset{Topic: name, Partition: 0, At: 0, LeaderEpoch: -1})
		offsets.Add(kadm.Offset{Topic: name, Partition: 1, At: 0, LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if _, err := adm.DeleteTopics(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	stored, err := b.Store.TenantOffsets(ctx, b.Cfg.Coordinator.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, group := range stored {
		for _, o := range group {
			count[o.Topic]++
		}
	}
	if count["doomed"] != 0 || count["kept"] != 2 {
		t.Fatalf("offsets left in etcd after deleting the topic: %v", count)
	}
}

// TestDescribeBrokerConfigs: a named broker describes its settings under
// Kafka's names with their real values and sources, honouring a names filter;
// the cluster-wide default resource has no dynamic configs (issue 7, item 18).
func TestDescribeBrokerConfigs(t *testing.T) {
	cfg := testBrokerConfig(t) // RetentionCheckInterval 100ms
	cfg.DefaultPartitions = 3
	cfg.AutoCreateTopics = false
	b := startBroker(t, cfg)
	cl := testClient(t, b)
	adm := kadm.NewClient(cl)
	ctx := context.Background()

	rcs, err := adm.DescribeBrokerConfigs(ctx, cfg.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(strconv.Itoa(int(cfg.NodeID)), nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker %d: %v %v", cfg.NodeID, err, rc.Err)
	}
	got := make(map[string]kadm.Config, len(rc.Configs))
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	const static, def = kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig
	tests := []struct {
		name, value string
		source      kmsg.ConfigSource
	}{
		{"broker.id", "1", def},
		{"num.partitions", "3", static},
		{"auto.create.topics.enable", "false", static},
		{"default.replication.factor", "1", def},
		{"socket.request.max.bytes", "104857600", def},
		{"log.retention.check.interval.ms", "100", static},
		{"log.retention.ms", "86400000", def},
		{"log.retention.bytes", "-1", def},
		{"log.segment.bytes", "67108864", def},
		{"log.roll.ms", "600000", def},
		{"message.max.bytes", "1048588", def},
		{"min.insync.replicas", "1", def},
		{"offsets.retention.minutes", "10080", def},
		{"group.max.session.timeout.ms", "300000", def},
		{"max.connections", "10000", def},
		{"max.connections.per.ip", "2147483647", def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := got[tt.name]
			if !ok {
				t.Fatalf("not described; got %d configs", len(got))
			}
			if c.MaybeValue() != tt.value || c.Source != tt.source {
				t.Fatalf("%s = %q source %v, want %q source %v", tt.name, c.MaybeValue(), c.Source, tt.value, tt.source)
			}
			if len(c.Synonyms) == 0 || c.Synonyms[len(c.Synonyms)-1].Source != def {
				t.Fatalf("synonyms %+v do not end in the default", c.Synonyms)
			}
		})
	}
	for _, absent := range []string{"log.cleaner.enable", "transaction.state.log.replication.factor"} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s described, but Sluice has no such setting", absent)
		}
	}

	// The names filter: only the known names asked for.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(cfg.NodeID))
	rr.ConfigNames = []string{"num.partitions", "log.segment.bytes", "no.such.config"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range resp.Resources[0].Configs {
		names = append(names, c.Name)
		if !c.ReadOnly {
			t.Errorf("%s is not read-only; broker configs cannot be altered", c.Name)
		}
	}
	if strings.Join(names, ",") != "log.segment.bytes,num.partitions" {
		t.Errorf("filtered describe = %v, want [log.segment.bytes num.partitions]", names)
	}

	// The cluster-wide default resource holds Kafka's dynamic defaults: none here.
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil || len(rcs[0].Configs) != 0 {
		t.Errorf("cluster default broker resource: %+v, want no configs and no error", rcs)
	}
}
