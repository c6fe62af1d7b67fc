package broker

// Tiering in a three-broker cluster on a real S3 server: the partition
// leader stops in the middle of uploads; the new leader resumes at the
// remote end, so the remote index has no gap and no overlap, and a replay
// from offset 0 returns every acknowledged record once.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/tier/objstore/s3test"
)

func TestTieringClusterLeaderChangeMidUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and an S3 server")
	}
	srv := s3test.Start(t)
	url := srv.URL(fmt.Sprintf("cluster-%d", time.Now().UnixNano()))
	c := startTestClusterWith(t, 3, func(cfg *Config) {
		cfg.ObjectStore, cfg.ObjectStoreOptions, cfg.TierChunkBytes = url, srv.Options(), 2048
	})
	for i, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d sees three brokers", i+1), func() (bool, string) {
			return len(b.Brokers()) == 3 && b.ControllerID() > 0, fmt.Sprintf("%d brokers", len(b.Brokers()))
		})
	}
	const topic = "tiered-cluster"
	cl := testClient(t, c.brokers[0])
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	for k, v := range tieringConfigs {
		cc := kmsg.NewCreateTopicsRequestTopicConfig()
		cc.Name, cc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cc)
	}
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	var stopped *Broker
	leaderOf := func() *Broker {
		for _, b := range c.brokers {
			if b == stopped {
				continue
			}
			if t := b.LookupTopic(topic); t != nil && len(t.States) > 0 && t.States[0].Leader > 0 {
				return c.brokers[t.States[0].Leader-1]
			}
		}
		return nil
	}
	eventuallyTrue(t, "a leader", func() (bool, string) { return leaderOf() != nil, "none" })

	producer, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ProducerLinger(0),
		kgo.RecordRetries(50), kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	var mu sync.Mutex
	acked := map[int64]string{}
	produce := func(from, n int) {
		var wg sync.WaitGroup
		for i := from; i < from+n; i++ {
			v := fmt.Sprintf("v-%05d-%0200d", i, i)
			wg.Add(1)
			producer.Produce(context.Background(), &kgo.Record{Topic: topic, Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					acked[r.Offset] = v
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	produce(0, 300)
	old := leaderOf()
	p, _ := old.PartitionOf(topic, 0)
	eventuallyTrue(t, "uploads under the first leader", func() (bool, string) {
		r := old.RemoteRange(context.Background(), p)
		return r.RemoteEnd > 0, fmt.Sprintf("remote end %d", r.RemoteEnd)
	})
	// The leader stops while its uploads go on; records keep arriving.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); produce(300, 300) }()
	stopped = old
	c.stops[old.Cfg.NodeID-1]()
	wg.Wait()
	var next *Broker
	eventuallyTrue(t, "a new leader", func() (bool, string) {
		next = leaderOf()
		return next != nil && next != old, "none yet"
	})
	np, _ := next.PartitionOf(topic, 0)
	eventuallyTrue(t, "uploads under the new leader past the records of both", func() (bool, string) {
		r := next.RemoteRange(context.Background(), np)
		hw, _ := np.HighWatermark()
		return r.RemoteEnd >= hw-20 && r.RemoteEnd > 300, fmt.Sprintf("remote end %d, hw %d", r.RemoteEnd, hw)
	})
	objs, h, err := next.Tiers.Objects(context.Background(), np.TopicID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[int32]int{}
	for i, o := range objs {
		if i > 0 && o.Base != objs[i-1].Next {
			t.Fatalf("remote index: object %d [%d, %d) after [%d, %d): a gap or an overlap", i, o.Base, o.Next, objs[i-1].Base, objs[i-1].Next)
		}
	}
	for _, o := range h.Objects {
		epochs[o.Epoch]++
	}
	if int64(objs[0].Base) != h.LogStart || int64(objs[len(objs)-1].Next) != h.RemoteEnd {
		t.Fatalf("objects cover [%d, %d), head says [%d, %d)", objs[0].Base, objs[len(objs)-1].Next, h.LogStart, h.RemoteEnd)
	}
	t.Logf("%d objects over [%d, %d), head objects by uploader epoch %v, %d acknowledged records", len(objs), h.LogStart, h.RemoteEnd, epochs, len(acked))

	// A replay from 0 on the new leader: every acknowledged record, at its
	// offset, read largely from object storage once the uploaded local
	// segments are gone.
	eventuallyTrue(t, "the new leader's uploaded local segments deleted", func() (bool, string) {
		return np.Log().StartOffset() > 0, fmt.Sprintf("local start %d", np.Log().StartOffset())
	})
	// Read past the last acknowledged offset: the offsets after it may be
	// a leader's epoch-start batch, which no consumer is given, so the
	// high watermark itself is not always reached by a record.
	last := int64(-1)
	for off := range acked {
		last = max(last, off)
	}
	vals, got := replayRecords(t, next, topic, 0, func(_ int, n int64) bool { return n > last })
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("offset %d: replayed %.12q, acknowledged %.12q", off, got[off], v)
		}
	}
	seen := map[string]bool{}
	for _, v := range vals {
		if seen[v] {
			t.Fatalf("%.12q replayed twice", v)
		}
		seen[v] = true
	}
	if next.Tiers.Stats().RemoteReadBytes == 0 {
		t.Fatal("the replay read nothing from object storage")
	}
}
