package node

// This file owns the broker's fair-scheduling lanes (broker/fair): how they
// are built, the metric of the delays they impose, and the backfill gate
// the read cache passes before a GET for a reader.
//
// Invariant: a request's tenant is the one of the identity in its context
// (auth.IdentityFrom); a context without one (internal reads, tests) is the
// tenant "", scheduled like any other.
// Invariant: the queue-delay metric's tenant label is the per-tenant
// metrics' (quota.Metrics.Label): at most quota.MaxTenantLabels tenants
// have their own, the rest share quota.OtherTenant, so many tenants cannot
// grow its series without bound.

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/auth"
	"github.com/sluice-mq/sluice/broker/fair"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/cache"
)

// newFair builds the lanes with their queue-delay metric on reg, its
// tenant label given by label.
func newFair(cfg Config, reg prometheus.Registerer, label func(tenant string) string) *fair.Set {
	delay := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_fair_queue_delay_seconds",
		Help: fmt.Sprintf("Time a request waited for its tenant's turn in a fair-scheduling lane (handler, tail, backfill), by lane and tenant (the first %d tenants seen; later ones under %s); only waits that queued are observed.",
			quota.MaxTenantLabels, quota.OtherTenant),
		Buckets: prometheus.ExponentialBuckets(50e-6, 3, 12),
	}, []string{"lane", "tenant"})
	reg.MustRegister(delay)
	s, err := fair.NewSet(fair.SetConfig{
		// As many backfill slots as the read cache runs fills, so a
		// reader's fill that passed the gate finds a slot.
		BackfillSlots: cache.DefaultMaxConcurrentFills,
		HandlerSlots:  cfg.FairHandlerSlots,
		TailSlots:     cfg.FairTailSlots,
		Waited: func(lane, tenant string, d time.Duration) {
			delay.WithLabelValues(lane, label(tenant)).Observe(d.Seconds())
		},
	})
	if err != nil {
		panic(err) // the default configuration is valid
	}
	return s
}

// TenantOf is the tenant of the identity ctx carries, "" without one.
func TenantOf(ctx context.Context) string {
	id, _ := auth.IdentityFrom(ctx)
	return id.Principal.Tenant
}

// backfillGate is the read cache's FillGate: a reader's GET waits for its
// tenant's turn in the backfill lane.
func (b *Node) backfillGate(ctx context.Context) (func(int), error) {
	return b.Fair.Gate(ctx, TenantOf(ctx))
}
