package broker

// Hot keys over real parts: a broker in-process, franz-go producers (plain
// and snappy batches), GET /v1/topics/{topic}/hot-keys and /metrics.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/httpapi"
)

func TestHotKeysOverHTTPAndMetrics(t *testing.T) {
	b := startBroker(t, testBrokerConfig(t))
	plain := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	snappy := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	createTopic(t, plain, "clicks", 2, nil)
	// Partition 0 plain, partition 1 snappy; "user-7" is 3 of every 5
	// records, "user-1" 1, and one has no key.
	for round := range 4 * 8 { // 32 batches a partition: 4 sampled on partition 1
		for part, cl := range []*kgo.Client{plain, snappy} {
			var recs []*kgo.Record
			for i := range 50 {
				key := []byte("user-7")
				switch i % 5 {
				case 3:
					key = []byte("user-1")
				case 4:
					key = nil
				}
				recs = append(recs, &kgo.Record{Topic: "clicks", Partition: int32(part), Key: key, Value: []byte(fmt.Sprint(round, i))})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := "http://" + b.Cfg.HTTPListen
	var hk httpapi.HotKeys
	if code := getJSON(t, base+"/v1/topics/clicks/hot-keys?top=2", &hk); code != http.StatusOK || len(hk.Partitions) != 2 || hk.Counters != 16 {
		t.Fatalf("hot keys: %d %+v", code, hk)
	}
	for _, p := range hk.Partitions {
		if p.Error != "" || p.RecordsPerSec <= 0 || p.BytesPerSec <= 0 || len(p.Keys) != 2 {
			t.Fatalf("partition %d: %+v", p.Partition, p)
		}
		hot, warm := p.Keys[0], p.Keys[1]
		if hot.Key != "user-7" || warm.Key != "user-1" || hot.KeyBytes != 6 {
			t.Fatalf("partition %d keys %+v, want user-7 then user-1", p.Partition, p.Keys)
		}
		// Exact for plain batches; the snappy partition's last batches
		// since its last sample are not in the keys yet.
		if ratio := hot.RecordsPerSec / warm.RecordsPerSec; ratio < 2.99 || ratio > 3.01 {
			t.Fatalf("partition %d: user-7/user-1 %.3f, want 3", p.Partition, ratio)
		}
		if p.Partition == 0 && (hot.Share < 0.59 || hot.Share > 0.61) {
			t.Fatalf("partition 0: user-7 share %.3f, want 0.6", hot.Share)
		}
	}
	// What a peer answering for its partitions sends (GET /v1/topics/{t}/hot-keys on another broker).
	var ans httpapi.PartitionsAnswer
	if code := getJSON(t, "http://"+b.kafka.InterBrokerAdvertise()+httpapi.InternalPartitionsPath+"?topic=clicks", &ans); code != http.StatusOK || len(ans.Partitions) != 2 {
		t.Fatalf("internal listing: %d %+v", code, ans)
	}
	for _, p := range ans.Partitions {
		if p.Ingress == nil || len(p.Ingress.Keys) != 2 || p.Ingress.Keys[0].Key != "user-7" {
			t.Fatalf("internal listing of partition %d: ingress %+v", p.Partition, p.Ingress)
		}
	}
	code, raw := httpGet(t, base+"/metrics")
	for _, want := range []string{
		`sluice_partition_hot_key_records_per_second{key="user-7",partition="0",rank="1",topic="clicks"}`,
		`sluice_partition_hot_key_records_per_second{key="user-1",partition="1",rank="2",topic="clicks"}`,
		`sluice_partition_ingress_records_per_second{partition="1",topic="clicks"}`,
	} {
		if code != http.StatusOK || !strings.Contains(string(raw), want) {
			t.Fatalf("/metrics (%d) lacks %s", code, want)
		}
	}
	for path, want := range map[string]int{"/v1/topics/clicks/hot-keys?top=0": 400, "/v1/topics/none/hot-keys": 404} {
		if code, raw := httpGet(t, base+path); code != want {
			t.Fatalf("GET %s: %d %s, want %d", path, code, raw, want)
		}
	}
}
