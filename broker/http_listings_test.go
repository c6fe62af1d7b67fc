package broker

// The HTTP listings against a three-broker cluster with tiered data on a
// real S3 server: every broker describes topics, groups and brokers with
// the same figures, taken from the partitions' leaders and the groups'
// coordinators, and a leader that is gone costs only its partition's
// figures.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

// httpGet GETs url within 20 s and returns the status and the body.
func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

// getJSON GETs url and decodes its answer into out; it returns the status.
func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	code, raw := httpGet(t, url)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("GET %s: status %d, body %q: %v", url, code, raw, err)
	}
	return code
}

func httpBase(b *Broker) string { return "http://" + b.httpLn.Addr().String() }

type brokersAnswer struct {
	Controller int32                   `json:"controller"`
	Brokers    []httpapi.BrokerListing `json:"brokers"`
}

type groupsAnswer struct {
	Groups []httpapi.GroupListing `json:"groups"`
	Errors []httpapi.NodeError    `json:"errors"`
}

// createTopicWith creates a topic over Kafka with a replication factor and configs.
func createTopicWith(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		cc := kmsg.NewCreateTopicsRequestTopicConfig()
		cc.Name, cc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cc)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s: %v %+v", name, err, resp)
	}
}

func TestHTTPListingsTieredCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and an S3 server")
	}
	srv := s3test.Start(t)
	url := srv.URL(fmt.Sprintf("listings-%d", time.Now().UnixNano()))
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		cfg.ObjectStore, cfg.ObjectStoreOptions, cfg.TierChunkBytes = url, srv.Options(), 2048
		cfg.Coordinator = groupTestConfig()
	})
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees three brokers and a controller", i+1), func() (bool, string) {
			return len(b.Brokers()) == 3 && b.ControllerID() > 0, fmt.Sprintf("%d brokers", len(b.Brokers()))
		})
	}
	const tiered, single = "tiered3", "single1"
	cl := testClient(t, c.brokers[0])
	createTopicWith(t, cl, tiered, 1, 3, tieringConfigs)
	createTopicWith(t, cl, single, 3, 1, nil)
	for _, b := range c.brokers {
		eventuallyTrue(t, "leaders elected", func() (bool, string) {
			ok := true
			for _, name := range []string{tiered, single} {
				tp := b.LookupTopic(name)
				ok = ok && tp != nil && b.LeadersElected(tp)
			}
			return ok, "not yet"
		})
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20), kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	produce := func(topic string, part int32, n int) {
		t.Helper()
		for i := range n {
			v := fmt.Sprintf("%s-%d-%05d-%0200d", topic, part, i, i)
			if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, part, err)
			}
		}
	}
	const tieredN = 300
	produce(tiered, 0, tieredN)
	singleN := []int64{7, 11, 13}
	for p, n := range singleN {
		produce(single, int32(p), int(n))
	}

	// Topics: the same placement and figures from every broker; the tiered
	// topic's remote bytes reported once its leader uploaded.
	var first httpapi.TopicDescription
	for i, b := range c.brokers {
		var d httpapi.TopicDescription
		eventuallyTrue(t, fmt.Sprintf("broker %d describes %s with remote bytes", i+1, tiered), func() (bool, string) {
			d = httpapi.TopicDescription{}
			if code := getJSON(t, httpBase(b)+"/v1/topics/"+tiered, &d); code != http.StatusOK {
				return false, fmt.Sprintf("status %d", code)
			}
			p := d.Partitions[0]
			if p.PartitionFigures == nil {
				return false, "no figures: " + p.StatsError
			}
			return p.RemoteBytes > 0 && p.RemoteEnd > 0 && len(p.InSync) == 3,
				fmt.Sprintf("remote [%d, %d) %d bytes, in sync %v", p.RemoteLogStart, p.RemoteEnd, p.RemoteBytes, p.InSync)
		})
		p := d.Partitions[0]
		// A leader change on a loaded machine may start its epoch with a
		// control batch (an offset no record uses), one per epoch after
		// the first at most.
		if p.HighWatermark < tieredN || p.HighWatermark > tieredN+int64(p.LeaderEpoch)-1 ||
			p.LogStart != 0 || len(p.Replicas) != 3 || p.Leader < 1 || len(p.Offline) != 0 {
			t.Fatalf("broker %d: %s-0 is %+v %+v", i+1, tiered, p, *p.PartitionFigures)
		}
		if !d.Tiered || !slices.ContainsFunc(d.Configs, func(tc httpapi.TopicConfig) bool {
			return tc.Name == "segment.bytes" && tc.Value == "4096" && !tc.IsDefault
		}) {
			t.Fatalf("broker %d: tiered %v, configs %+v", i+1, d.Tiered, d.Configs)
		}
		if i == 0 {
			first = d
		} else if p0 := first.Partitions[0]; p.Leader != p0.Leader || p.LeaderEpoch != p0.LeaderEpoch || !slices.Equal(p.Replicas, p0.Replicas) {
			t.Fatalf("broker %d says leader %d epoch %d replicas %v; broker 1 says %d %d %v", i+1,
				p.Leader, p.LeaderEpoch, p.Replicas, p0.Leader, p0.LeaderEpoch, p0.Replicas)
		}
		t.Logf("broker %d: %s-0 leader %d, hw %d, log start %d (local %d, %d bytes), remote [%d, %d) %d bytes", i+1, tiered,
			p.Leader, p.HighWatermark, p.LogStart, p.LocalLogStart, p.LocalBytes, p.RemoteLogStart, p.RemoteEnd, p.RemoteBytes)
	}
	singleLeaders := make([]int32, len(singleN))
	for i, b := range c.brokers {
		var d httpapi.TopicDescription
		if code := getJSON(t, httpBase(b)+"/v1/topics/"+single, &d); code != http.StatusOK || len(d.Partitions) != len(singleN) {
			t.Fatalf("broker %d: describe %s: %d %+v", i+1, single, code, d)
		}
		for part, p := range d.Partitions {
			if p.PartitionFigures == nil || p.HighWatermark != singleN[part] || len(p.Replicas) != 1 ||
				p.Leader != p.Replicas[0] || !slices.Equal(p.InSync, p.Replicas) || p.LocalBytes == 0 {
				t.Fatalf("broker %d: %s-%d is %+v (%s)", i+1, single, part, p, p.StatsError)
			}
			if i == 0 {
				singleLeaders[part] = p.Leader
			} else if p.Leader != singleLeaders[part] {
				t.Fatalf("broker %d: %s-%d led by %d; broker 1 says %d", i+1, single, part, p.Leader, singleLeaders[part])
			}
		}
	}
	t.Logf("%s partitions led by %v", single, singleLeaders)
	for i, b := range c.brokers {
		var ls struct{ Topics []httpapi.TopicSummary }
		if code := getJSON(t, httpBase(b)+"/v1/topics", &ls); code != http.StatusOK || len(ls.Topics) != 2 ||
			ls.Topics[0].Name != single || ls.Topics[0].Partitions != 3 || ls.Topics[1].ReplicationFactor != 3 {
			t.Fatalf("broker %d: list topics: %d %+v", i+1, code, ls)
		}
	}

	// Groups: a franz-go consumer reads everything and commits; then more
	// records arrive that it does not read, so every partition lags.
	const groupID = "listers"
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(single),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.ClientID("lister"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	var total int64
	for _, n := range singleN {
		total += n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for read := int64(0); read < total; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d: %v", read, total, fs.Errors())
		}
		read += int64(fs.NumRecords())
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	const more = 4
	for p := range singleN {
		produce(single, int32(p), more)
	}
	var coordinator int32
	for i, b := range c.brokers {
		var gs groupsAnswer
		eventuallyTrue(t, fmt.Sprintf("broker %d lists the group", i+1), func() (bool, string) {
			gs = groupsAnswer{}
			code := getJSON(t, httpBase(b)+"/v1/groups", &gs)
			return code == http.StatusOK && len(gs.Groups) == 1 && gs.Groups[0].State == "Stable",
				fmt.Sprintf("%d %+v", code, gs)
		})
		if g := gs.Groups[0]; g.Group != groupID || g.ProtocolType != "consumer" || len(gs.Errors) != 0 ||
			(coordinator != 0 && g.Coordinator != coordinator) {
			t.Fatalf("broker %d lists %+v", i+1, gs)
		}
		coordinator = gs.Groups[0].Coordinator
	}
	remote := 0
	for _, l := range singleLeaders {
		if l != coordinator {
			remote++
		}
	}
	t.Logf("group %s coordinated by %d; %d of its partitions led elsewhere", groupID, coordinator, remote)
	for i, b := range c.brokers {
		var d httpapi.GroupDescription
		if code := getJSON(t, httpBase(b)+"/v1/groups/"+groupID, &d); code != http.StatusOK {
			t.Fatalf("broker %d: describe group: %d %+v", i+1, code, d)
		}
		if d.Coordinator != coordinator || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].ClientID != "lister" ||
			len(d.Members[0].Assignment) != 1 || len(d.Members[0].Assignment[0].Partitions) != 3 || len(d.Offsets) != 3 {
			t.Fatalf("broker %d describes %+v", i+1, d)
		}
		for part, o := range d.Offsets {
			if o.Error != "" || o.Topic != single || o.Partition != int32(part) || o.Committed != singleN[part] ||
				o.LogEnd != singleN[part]+more || o.Lag != more || o.LagBytes <= 0 {
				t.Fatalf("broker %d: offsets of %s-%d: %+v", i+1, single, part, o)
			}
		}
	}
	var unknown map[string]httpapi.APIError
	if code := getJSON(t, httpBase(c.brokers[0])+"/v1/groups/nobody", &unknown); code != http.StatusNotFound {
		t.Fatalf("an unknown group: %d %v", code, unknown)
	}
	if code := getJSON(t, httpBase(c.brokers[1])+"/v1/topics/nothing", &unknown); code != http.StatusNotFound {
		t.Fatalf("an unknown topic: %d %v", code, unknown)
	}

	// Brokers: three live, one controller, the same from every broker.
	for i, b := range c.brokers {
		var ba brokersAnswer
		if code := getJSON(t, httpBase(b)+"/v1/brokers", &ba); code != http.StatusOK || len(ba.Brokers) != 3 {
			t.Fatalf("broker %d: brokers: %d %+v", i+1, code, ba)
		}
		controllers := 0
		for j, bl := range ba.Brokers {
			if bl.ID != int32(j+1) || !bl.Live || bl.AZ != string(rune('a'+j)) || bl.Kafka != c.brokers[j].KafkaAddr() ||
				bl.HTTP == "" || bl.InterBroker == "" {
				t.Fatalf("broker %d lists %+v", i+1, bl)
			}
			if bl.Controller {
				controllers++
			}
		}
		if controllers != 1 || ba.Controller != b.ControllerID() || !ba.Brokers[ba.Controller-1].Controller {
			t.Fatalf("broker %d: %d controllers, controller %d: %+v", i+1, controllers, ba.Controller, ba.Brokers)
		}
	}

	// A broker that stops: it is listed as not live, and the partition only
	// it held is listed without figures while the others keep theirs.
	gone := singleLeaders[0]
	c.stops[gone-1]()
	asker := c.brokers[gone%3] // another broker
	eventuallyTrue(t, "the stopped broker listed as not live", func() (bool, string) {
		var ba brokersAnswer
		getJSON(t, httpBase(asker)+"/v1/brokers", &ba)
		for _, bl := range ba.Brokers {
			if bl.ID == gone {
				return !bl.Live && bl.Kafka == "" && len(ba.Brokers) == 3, fmt.Sprintf("%+v", bl)
			}
		}
		return false, fmt.Sprintf("not listed: %+v", ba.Brokers)
	})
	var d httpapi.TopicDescription
	if code := getJSON(t, httpBase(asker)+"/v1/topics/"+single, &d); code != http.StatusOK {
		t.Fatalf("describe %s without broker %d: %d", single, gone, code)
	}
	for part, p := range d.Partitions {
		switch {
		case singleLeaders[part] == gone && (p.PartitionFigures != nil || p.StatsError == "" || p.Leader != -1 || !slices.Equal(p.Offline, []int32{gone})):
			t.Fatalf("%s-%d on the stopped broker: %+v", single, part, p)
		case singleLeaders[part] != gone && (p.PartitionFigures == nil || p.HighWatermark != singleN[part]+more):
			t.Fatalf("%s-%d on a live broker: %+v (%s)", single, part, p, p.StatsError)
		}
	}
	t.Logf("%s-0 without its broker: %q", single, d.Partitions[0].StatsError)
}

// A lone broker: the listings' shapes, and 404s for what does not exist.
func TestHTTPListingsLoneBroker(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	createTopic(t, testClient(t, b), "solo", 2, map[string]string{"retention.ms": "60000"})
	base := "http://" + b.Cfg.HTTPListen
	var d httpapi.TopicDescription
	if code := getJSON(t, base+"/v1/topics/solo", &d); code != http.StatusOK || len(d.Partitions) != 2 {
		t.Fatalf("describe: %d %+v", code, d)
	}
	for _, p := range d.Partitions {
		if p.PartitionFigures == nil || p.Leader != b.Cfg.NodeID || p.HighWatermark != 0 {
			t.Fatalf("partition %+v (%s)", p, p.StatsError)
		}
	}
	var gs groupsAnswer
	if code := getJSON(t, base+"/v1/groups", &gs); code != http.StatusOK || gs.Groups == nil || len(gs.Groups) != 0 || len(gs.Errors) != 0 {
		t.Fatalf("groups: %d %+v", code, gs)
	}
	var ba brokersAnswer
	if code := getJSON(t, base+"/v1/brokers", &ba); code != http.StatusOK || len(ba.Brokers) != 1 || !ba.Brokers[0].Live {
		t.Fatalf("brokers: %d %+v", code, ba)
	}
	// The internal routes are on the inter-broker listener only.
	resp, err := http.Get(base + httpapi.InternalPartitionsPath + "?topic=solo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the public listener answers %s: %d", httpapi.InternalPartitionsPath, resp.StatusCode)
	}
	var ans httpapi.PartitionsAnswer
	if code := getJSON(t, "http://"+b.kafka.InterBrokerAdvertise()+httpapi.InternalPartitionsPath+"?topic=solo", &ans); code != http.StatusOK || len(ans.Partitions) != 2 {
		t.Fatalf("the inter-broker listener answers %s: %d %+v", httpapi.InternalPartitionsPath, code, ans)
	}
	for _, path := range []string{"/v1/topics/none", "/v1/groups/none"} {
		var e map[string]httpapi.APIError
		if code := getJSON(t, base+path, &e); code != http.StatusNotFound || e["error"].Message == "" {
			t.Fatalf("GET %s: %d %+v", path, code, e)
		}
	}
}
