package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/internal/brokertest"
)

// TestGroupRebalancesMetric: each generation the coordinator starts is
// counted in sluice_group_rebalances_total{group}: the count equals the
// group's generation (a new group starts at 0) after the first franz-go
// consumer joins (at least 1), after a second joins (at least 2) and after
// it leaves and the first rejoins alone (at least 3). A slow member
// dropped from a join round makes one more generation, counted too.
func TestGroupRebalancesMetric(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	createTopic(t, testClient(t, b), "rebal", 2, nil)
	const groupID = "rebalancing"
	ctx := context.Background()

	// member joins the group and polls until the test ends or stop; its
	// channel receives every assignment it is given.
	member := func() (*kgo.Client, <-chan map[string][]int32, func()) {
		assigned := make(chan map[string][]int32, 10)
		cl := testClient(t, b, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("rebal"),
			kgo.SessionTimeout(2*time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.RebalanceTimeout(5*time.Second), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { assigned <- a }))
		pollCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx)
			}
		}()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); wg.Wait(); cl.Close() }) }
		t.Cleanup(stop)
		return cl, assigned, stop
	}
	rebalances := func() float64 {
		return metricValue(t, b, "sluice_group_rebalances_total", "group", groupID)
	}
	gen := func() int32 {
		_, g, ok := b.coord.GroupState(groupID)
		if !ok {
			return -1
		}
		return int32(g)
	}
	waitFor := func(atLeast int32) {
		t.Helper()
		brokertest.EventuallyWhy(t, 20*time.Second, fmt.Sprintf("generation %d or later, counted", atLeast), func() (bool, string) {
			g, got := gen(), rebalances()
			return g >= atLeast && got == float64(g) && gen() == g, fmt.Sprintf("counted %v, generation %d", got, g)
		})
	}

	if got := rebalances(); got != 0 {
		t.Fatalf("rebalances before any member: %v", got)
	}
	_, firstAssigned, _ := member()
	<-firstAssigned
	waitFor(1)
	_, secondAssigned, stopSecond := member()
	<-secondAssigned
	waitFor(2)
	stopSecond() // leaves the group: the first rejoins alone
	waitFor(3)
}

// TestGroupCommittedOffsetMetric: sluice_group_committed_offset exports
// the offset a group committed beside its lag, and nothing for a partition
// the group has not committed.
func TestGroupCommittedOffsetMetric(t *testing.T) {
	b, _ := startGroupBroker(t, testBrokerConfig(t), groupTestConfig())
	cl := testClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "committed", 2, nil)
	ctx := context.Background()
	for range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "committed", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const groupID = "committer"
	adm := kadm.NewClient(cl)
	commit := func(off int64) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "committed", Partition: 0, At: off, LeaderEpoch: -1})
		if resp, err := adm.CommitOffsets(ctx, groupID, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit %d: %v %v", off, err, resp.Error())
		}
	}
	labels := []string{"group", groupID, "topic", "committed", "partition", "0"}
	for _, off := range []int64{7, 9} {
		commit(off)
		if got := metricValue(t, b, "sluice_group_committed_offset", labels...); got != float64(off) {
			t.Errorf("sluice_group_committed_offset after committing %d: %v", off, got)
		}
		if got := metricValue(t, b, "sluice_group_lag_offsets", labels...); got != float64(10-off) {
			t.Errorf("sluice_group_lag_offsets after committing %d: %v, want %d", off, got, 10-off)
		}
	}
	mfs, err := b.M.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "sluice_group_committed_offset" {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "group" && lp.GetValue() == groupID {
						series++
					}
				}
			}
		}
	}
	if series != 1 {
		t.Errorf("%d committed offset series of %s, want 1 (partition 1 has no commit)", series, groupID)
	}
}
