package broker

// This file owns the enforcement side of per-tenant quotas: the broker's meters
// (broker/quota) behind both front ends' admit stages, and the split loop
// that publishes this broker's demand every quota.SplitPeriod and sets its
// share of each tenant's cluster-wide rates from every live broker's.
//
// Invariant: without a quota.Source (SetQuotas not called, or nil) both
// front ends admit everything, as before quotas existed.
//
// The split loop is started and waited for by Run; the meters are safe for
// concurrent use by every connection.

import (
	"context"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/quota"
	"github.com/sluice-mq/sluice/meta"
)

// SetQuotas makes the broker enforce the tenants' quotas src answers (nil:
// none). Call it before Run.
func (b *Broker) SetQuotas(src quota.Source) { b.quotaSrc = src }

// quotaMeters returns the broker's meters, or nil without quotas.
func (b *Broker) quotaMeters() *quota.Meters {
	if b.quotaSrc == nil {
		return nil
	}
	return quota.NewMeters(b.quotaSrc, quota.DefaultBurst, b.Tenants)
}

// quotaSplitLoop publishes this broker's demand and applies its shares
// every quota.SplitPeriod until ctx ends.
func (b *Broker) quotaSplitLoop(ctx context.Context, m *quota.Meters) {
	t := time.NewTicker(quota.SplitPeriod)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.splitQuotas(ctx, m, m.TakeUsage(now.Sub(last)))
			last = now
		}
	}
}

// splitQuotas publishes own and sets the shares from every broker's
// published demand. A failure keeps the shares it had (logged): a broker
// cut off from etcd keeps its last split rather than taking the whole.
func (b *Broker) splitQuotas(ctx context.Context, m *quota.Meters, own quota.Demand) {
	ctx, cancel := context.WithTimeout(ctx, quota.SplitPeriod)
	defer cancel()
	if lease := b.RegistrationLease(); lease != 0 {
		if err := b.Store.PublishQuotaUsage(ctx, b.Cfg.NodeID, lease, meta.QuotaUsage(own)); err != nil {
			b.Logger.Warn().Err(err).Msg("quota split: publish demand")
		}
	}
	all, err := b.Store.QuotaUsages(ctx)
	if err != nil {
		b.Logger.Warn().Err(err).Msg("quota split: read demands")
		return
	}
	self := strconv.FormatInt(int64(b.Cfg.NodeID), 10)
	demands := make(map[string]quota.Demand, len(all)+1)
	for id, u := range all {
		demands[strconv.FormatInt(int64(id), 10)] = quota.Demand(u)
	}
	demands[self] = own // this period's, whether or not the put landed
	live := len(b.Brokers())
	m.SetShares(quota.Shares(self, demands, live, m.Limit), quota.DefaultShare(max(live, len(demands))))
}

// wireDiskLadder lets the disk-watermark ladder (broker/node) act through
// the rate meters: from its second step the tenants of the low priority
// class lose their burst allowance (held to their base rate), and at its
// third a tenant whose produce meters are in debt is over its quota, so its
// publishes are refused until the disk drains.
func (b *Broker) wireDiskLadder(m *quota.Meters, table *quota.Table) {
	m.SetBurstPolicy(func(tenant string) time.Duration {
		_, class := table.Scheduling(tenant)
		if !node.BurstAllowed(b.DiskLevel(), class == quota.ClassLow) {
			return quota.MinBurst
		}
		return 0 // the meters' own
	})
	b.SetOverQuota(func(tenant string) bool {
		now := time.Now()
		return m.Delay(tenant, quota.ProducerByteRate, now) > 0 || m.Delay(tenant, quota.ProducerRecordRate, now) > 0
	})
}
