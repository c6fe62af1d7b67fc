package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/quota"
)

// TestFairQueueDelayTenantLabelBounded: far more tenants than
// quota.MaxTenantLabels each queue in the handler lane behind a request
// holding its one slot; sluice_fair_queue_delay_seconds then has at most
// MaxTenantLabels tenant labels of their own plus quota.OtherTenant, which
// holds the rest of the waits, and no wait is lost.
func TestFairQueueDelayTenantLabelBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	tenants := quota.NewMetrics(reg)
	s := newFair(Config{FairHandlerSlots: 1}, reg, tenants.Label)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	n := quota.MaxTenantLabels + 50
	release := make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	defer letGo()
	holding := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.RunTimed(ctx, "holder", func() { close(holding); <-release })
	}()
	<-holding
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.RunTimed(ctx, fmt.Sprintf("t%03d", i), func() {}); err != nil {
				t.Error(err)
			}
		}()
	}
	for queued := 0; queued < n; {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d tenants queued", queued, n)
		}
		queued = 0
		for i := range n {
			queued += s.Handler.Queued(fmt.Sprintf("t%03d", i))
		}
		time.Sleep(5 * time.Millisecond)
	}
	letGo()
	wg.Wait()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels, other := map[string]bool{}, uint64(0)
	var waits uint64
	for _, mf := range mfs {
		if mf.GetName() != "sluice_fair_queue_delay_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "tenant" {
					continue
				}
				labels[l.GetValue()] = true
				if l.GetValue() == quota.OtherTenant {
					other += m.GetHistogram().GetSampleCount()
				}
			}
			waits += m.GetHistogram().GetSampleCount()
		}
	}
	if len(labels) > quota.MaxTenantLabels+1 || !labels[quota.OtherTenant] {
		t.Fatalf("%d tenant labels (with %s: %v), want at most %d and %s", len(labels), quota.OtherTenant, labels[quota.OtherTenant], quota.MaxTenantLabels+1, quota.OtherTenant)
	}
	if waits != uint64(n) || other < uint64(n-quota.MaxTenantLabels) {
		t.Fatalf("%d waits observed, %d under %s; want %d, at least %d there", waits, other, quota.OtherTenant, n, n-quota.MaxTenantLabels)
	}
}
