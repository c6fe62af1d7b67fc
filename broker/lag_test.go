package broker

// Lag of a group whose members hold partitions but have committed nothing
// (issue 7, item 15): every assigned partition appears, over HTTP and in the
// Prometheus gauges, with its whole backlog from the log start.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/httpapi"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// getLag GETs a group's lag over HTTP.
func getLag(t *testing.T, base, groupID string) []httpapi.PartitionLag {
	t.Helper()
	resp, err := http.Get(base + "/v1/groups/" + groupID + "/lag")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lag struct{ Partitions []httpapi.PartitionLag }
	if err := json.NewDecoder(resp.Body).Decode(&lag); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("lag of %s: %d %v", groupID, resp.StatusCode, err)
	}
	return lag.Partitions
}

func TestLagOfAssignedPartitionsWithoutCommits(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	base := "http://" + b.Cfg.HTTPListen
	const topic = "backlog"
	admin := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(admin)
	ctx := context.Background()
	// 1 KiB segments hold two of the ~470-byte batches below.
	createTopic(t, admin, topic, 3, map[string]string{"segment.bytes": "1024"})
	produce := func(partition int32, n int) {
		for range n { // one batch each
			rec := &kgo.Record{Topic: topic, Partition: partition, Value: make([]byte, 400)}
			if err := admin.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(1, 1)
	produce(2, 2)
	produce(0, 6)
	// Retention moves partition 0's log start to 4, so its backlog is 2, not 6.
	if resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("0")}}, topic); err != nil || resp[0].Err != nil {
		t.Fatalf("alter retention.bytes: %v %v", err, resp)
	}
	waitStartOffset(t, adm, topic, 4, 10*time.Second)
	want := map[int32]struct{ start, end int64 }{0: {4, 6}, 1: {0, 1}, 2: {0, 2}}

	check := func(t *testing.T, groupID string) {
		t.Helper()
		var lags []httpapi.PartitionLag
		brokertest.Eventually(t, 15*time.Second, "lag of every assigned partition", func() bool {
			lags = getLag(t, base, groupID)
			return len(lags) == len(want)
		})
		for _, l := range lags {
			w := want[l.Partition]
			p, err := b.PartitionOf(topic, l.Partition)
			if err != nil {
				t.Fatal(err)
			}
			if l.Topic != topic || l.Committed != httpapi.NoCommit || l.LogEnd != w.end || l.Lag != w.end-w.start {
				t.Errorf("partition %d: %+v, want committed -1, log end %d, lag %d", l.Partition, l, w.end, w.end-w.start)
			}
			if size := p.Log().Size(); l.LagBytes != size || size == 0 {
				t.Errorf("partition %d: lag bytes %d, want the whole log, %d", l.Partition, l.LagBytes, size)
			}
			if l.OldestAgeMs < 0 || l.OldestAgeMs > time.Hour.Milliseconds() || l.CommitRate != nil {
				t.Errorf("partition %d: oldest age %dms, commit rate %v", l.Partition, l.OldestAgeMs, l.CommitRate)
			}
		}
		metrics := scrape(t, base)
		for p, w := range want {
			line := fmt.Sprintf("sluice_group_lag_offsets{group=%q,partition=\"%d\",topic=%q} %d", groupID, p, topic, w.end-w.start)
			if !strings.Contains(metrics, line+"\n") {
				t.Errorf("metrics lack %s", line)
			}
		}
	}

	t.Run("kafka member", func(t *testing.T) {
		const groupID = "idle"
		assigned := make(chan struct{})
		var once sync.Once
		cl := testClient(t, b, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }))
		pollCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx) // consumes, never commits
			}
		}()
		t.Cleanup(func() { cancel(); wg.Wait() })
		select {
		case <-assigned:
		case <-time.After(20 * time.Second):
			t.Fatal("the consumer was not assigned partitions within 20s")
		}
		check(t, groupID)
	})

	t.Run("http member", func(t *testing.T) {
		const groupID = "idle-http"
		if code, body := postJSON(t, base+"/v1/groups/"+groupID+"/members:join", `{"topics":["backlog"],"session_timeout_ms":30000}`); code != http.StatusOK {
			t.Fatalf("join: %d %v", code, body)
		}
		check(t, groupID)
	})
}

// scrape returns the /metrics exposition.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %v", resp.StatusCode, err)
	}
	return string(raw)
}
