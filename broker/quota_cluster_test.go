package broker

// A tenant's produce quota is one figure for the whole cluster, split
// among the brokers by where its traffic lands (quota_split.go,
// broker/quota's Shares): three in-process brokers, one quota, a producer
// as fast as it is let. The pure split is simulated over 60 s in
// broker/quota (TestSplitThreeBrokers); this test crosses the real parts:
// the demands published to etcd, each broker's share, the hold on the
// wire.

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// clusterQuotaSpan is each phase's warm-up, counted from its first
// acknowledgement, and its measured span. The split follows a change of
// traffic within about two periods (TestSplitCoupledClient); the warm-up
// gives it four, as a loaded machine publishes and reads demands late.
func clusterQuotaSpan() (warm, span time.Duration) {
	if os.Getenv("SLUICE_QUOTA_SOAK") != "" {
		return 4 * quota.SplitPeriod, 60 * time.Second
	}
	return 4 * quota.SplitPeriod, 9 * time.Second
}

// TestClusterProduceQuotaFollowsTraffic: the default tenant's
// producer_byte_rate holds cluster-wide ±10% both when its producer writes
// only to partitions one broker leads (that broker gets nearly the whole
// quota, not a third of it) and when it writes to partitions of all three
// (together they allow the quota, not three times it).
func TestClusterProduceQuotaFollowsTraffic(t *testing.T) {
	const rate = 256 << 10
	c := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := c.brokers[0].Store
	if _, err := store.EnsureTenant(ctx, meta.DefaultTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SetQuotas(ctx, meta.DefaultTenant, map[string]float64{quota.ProducerByteRate: rate}, nil, quota.Check); err != nil {
		t.Fatal(err)
	}
	for _, b := range c.brokers {
		eventuallyTrue(t, fmt.Sprintf("broker %d has the quota", b.Cfg.NodeID), func() (bool, string) {
			l := b.Quotas().Limits(meta.DefaultTenant)
			return l[quota.ProducerByteRate] == rate, fmt.Sprint(l)
		})
	}
	const partitions = 6
	createReplicated(t, c, "in", partitions)
	// A first election may pick another replica than the preferred one
	// (not ready yet); the controller then moves leadership to it. Wait
	// for the preferred leaders, placed evenly, so no leader moves while
	// a phase is measured (a move is a shift of traffic the split follows
	// a period late).
	var byLeader map[int][]int32
	eventuallyTrue(t, "each broker leads two partitions", func() (bool, string) {
		byLeader = map[int][]int32{}
		for p := range int32(partitions) {
			if i := c.leaderOf("in", p); i >= 0 {
				byLeader[i] = append(byLeader[i], p)
			}
		}
		return len(byLeader) == 3 && len(byLeader[0]) == partitions/3 && len(byLeader[1]) == partitions/3, fmt.Sprint(byLeader)
	})
	one := byLeader[0]
	var all []int32
	for p := range int32(partitions) {
		all = append(all, p)
	}

	value := make([]byte, 16<<10)
	warm, span := clusterQuotaSpan()
	phase := func(name string, parts []int32) {
		t.Helper()
		// A client of its own each phase: the first phase's records cut
		// off by its end do not carry into the second.
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
			kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var acked atomic.Int64
		var measuring atomic.Bool
		first, firstOnce := make(chan struct{}), sync.Once{}
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; pctx.Err() == nil; i++ {
				cl.Produce(pctx, &kgo.Record{Topic: "in", Partition: parts[i%len(parts)], Value: value}, func(r *kgo.Record, err error) {
					if err == nil {
						firstOnce.Do(func() { close(first) })
						if measuring.Load() {
							acked.Add(int64(len(r.Value)))
						}
					}
				})
			}
		}()
		// The warm-up counts from the first acknowledgement: a loaded
		// machine may take seconds to give the new client its producer id
		// and metadata, which is no part of the split.
		select {
		case <-first:
		case <-time.After(time.Minute):
			stop()
			wg.Wait()
			t.Fatalf("%s: nothing acknowledged within a minute", name)
		}
		time.Sleep(warm)
		measuring.Store(true)
		start := time.Now()
		time.Sleep(span)
		got := float64(acked.Load()) / time.Since(start).Seconds()
		measuring.Store(false)
		stop()
		wg.Wait()
		if math.Abs(got-rate) > 0.10*rate {
			t.Errorf("%s: %.0f bytes/s acknowledged cluster-wide, want the quota %d ±10%%", name, got, rate)
			return
		}
		t.Logf("%s: %.0f bytes/s acknowledged cluster-wide (quota %d, %+.1f%%)", name, got, rate, (got/rate-1)*100)
	}
	phase(fmt.Sprintf("partitions %v of one leader", one), one)
	phase("partitions of every leader", all)
}
