package node

// storage.go owns the storage quota (storage_bytes): every storageInterval
// its own loop (started by the disk guard loop) sums, by tenant, the bytes
// retained by the partitions this broker leads, as the retention machine
// knows them: the local log plus what object storage holds below the local
// log start (the tiered head's objects, older ones estimated,
// tier.RemoteBytesBelow), plus the tenant's large objects as the
// metadata store records them (SetLargeObjectBytes; broker/largeobj
// says which bytes count). Produce checks the tenant's figure before
// appending (CheckAppend).
//
// The code of a refusal is KAFKA_STORAGE_ERROR: retriable, and retried by
// every client we test with (franz-go and the Java producer retry it until
// their delivery timeout; librdkafka retries it where it treats an unknown
// code such as THROTTLING_QUOTA_EXCEEDED on produce as permanent), so a
// producer resumes by itself once retention frees room or the quota is
// raised. POLICY_VIOLATION would fail the send for good; the message says
// it is the tenant's quota, not a broken disk. HTTP answers 507.
//
// Bounds: the figure is at most storageInterval old, so a tenant may
// overshoot by what it produces in that time; a partition counts once (at
// its leader), and a tenant's figure is the sum over the brokers, exchanged
// through etcd (meta/usage.go: each broker publishes what the partitions it
// leads retain, under a lease, and sums every broker's); while etcd cannot
// be reached, this broker's own figures hold.
//
// Invariant: a refusal happens before the batch is enqueued, so nothing
// refused is acknowledged and nothing acknowledged is dropped.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/broker/quota"
)

// ErrDiskOverQuota refuses a publish at the third disk level; retriable.
var ErrDiskOverQuota = errors.New("disk above the third watermark")

// storageInterval is how often the retained bytes are summed and exchanged.
const storageInterval = 2 * time.Second

// storageLoop refreshes the storage figures until ctx ends.
func (b *Node) storageLoop(ctx context.Context) {
	t := time.NewTicker(storageInterval)
	defer t.Stop()
	for {
		b.refreshStorage(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refreshStorage sums the retained bytes of the partitions this broker
// leads, by tenant.
func (b *Node) refreshStorage(ctx context.Context) {
	out := make(map[string]int64)
	for _, t := range b.SortedTopics() {
		tenant, _ := SplitName(t.Meta.Name)
		for i, p := range t.Partitions {
			if p == nil || !b.Leads(t, int32(i)) {
				continue
			}
			l := p.Log()
			n := l.Size()
			if b.Tiers != nil {
				rctx, cancel := context.WithTimeout(ctx, time.Second)
				remote, err := b.Tiers.RemoteBytesBelow(rctx, p.TopicID(), p.Index(), int64(l.StartOffset()))
				cancel()
				if err == nil {
					n += remote
				}
			}
			out[tenant] += n
		}
	}
	if total, err := b.shareUsage(ctx, out); err == nil {
		out = total
	} else if ctx.Err() == nil {
		// This broker's own figures hold the tenant meanwhile.
		b.Logger.Debug().Err(err).Msg("storage figures not exchanged through etcd; using this broker's")
	}
	f := &storageFigures{logs: out}
	if last := b.storage.Load(); last != nil {
		f.large = last.large // kept while the large objects cannot be read
	}
	if fn := b.largeBytes.Load(); fn != nil {
		lctx, cancel := context.WithTimeout(ctx, storageInterval)
		large, err := (*fn)(lctx)
		cancel()
		if err == nil {
			f.large = large
		} else if ctx.Err() == nil {
			b.Logger.Debug().Err(err).Msg("large objects not counted afresh; using the last figures")
		}
	}
	b.storage.Store(f)
	b.Tenants.SetStorage(f.totals())
}

// storageFigures are the retained bytes by tenant, cluster-wide: of the
// logs (local and remote) and of large objects. Immutable once stored.
type storageFigures struct {
	logs, large map[string]int64
}

func (f *storageFigures) totals() map[string]int64 {
	out := make(map[string]int64, len(f.logs)+len(f.large))
	for t, n := range f.logs {
		out[t] += n
	}
	for t, n := range f.large {
		out[t] += n
	}
	return out
}

// SetLargeObjectBytes sets how the storage loop reads the tenants' stored
// large-object bytes (cluster-wide, from the metadata store); they count
// towards storage_bytes with the logs'. Call it before Run.
func (b *Node) SetLargeObjectBytes(fn func(context.Context) (map[string]int64, error)) {
	b.largeBytes.Store(&fn)
}

// shareUsage publishes this broker's figures and returns the cluster's sum.
func (b *Node) shareUsage(ctx context.Context, mine map[string]int64) (map[string]int64, error) {
	if b.Store == nil {
		return nil, errors.New("no metadata store")
	}
	ctx, cancel := context.WithTimeout(ctx, storageInterval)
	defer cancel()
	lease, err := b.Store.UsageLease(ctx, b.usageLease, 3*storageInterval)
	if err != nil {
		return nil, err
	}
	b.usageLease = lease
	if err := b.Store.PutUsage(ctx, b.Cfg.NodeID, mine, lease); err != nil {
		return nil, err
	}
	return b.Store.Usage(ctx)
}

// StorageBytes is the tenant's retained bytes as last summed: its logs'
// and its large objects'.
func (b *Node) StorageBytes(tenant string) int64 {
	if f := b.storage.Load(); f != nil {
		return f.logs[tenant] + f.large[tenant]
	}
	return 0
}

// LogStorageBytes is the part of StorageBytes in the tenant's logs, local
// and remote: what an upload adds its large objects to, counted afresh.
func (b *Node) LogStorageBytes(tenant string) int64 {
	if f := b.storage.Load(); f != nil {
		return f.logs[tenant]
	}
	return 0
}

// CheckAppend decides whether a batch may be appended to topic now: the
// disk guard and the reserve (diskguard.go), the third disk level for
// tenants over quota, and the tenant's storage quota. A refusal is counted
// in sluice_tenant_rejections_total.
func (b *Node) CheckAppend(topic string) error {
	tenant, _ := SplitName(topic)
	reason, err := b.appendRefusal(tenant)
	b.Tenants.Rejected(tenant, reason)
	return err
}

// PrecheckAppend is CheckAppend for a whole request before its batches,
// which each check again: it returns (and counts) only a refusal by a
// quota or the disk ladder (QuotaRefusal), which answers the whole request;
// any other refusal is left to the batches, so none is counted twice.
func (b *Node) PrecheckAppend(topic string) error {
	tenant, _ := SplitName(topic)
	reason, err := b.appendRefusal(tenant)
	if !QuotaRefusal(err) {
		return nil
	}
	b.Tenants.Rejected(tenant, reason)
	return err
}

// appendRefusal is CheckAppend's decision for the tenant, and the reason
// of a refusal, counting nothing.
func (b *Node) appendRefusal(tenant string) (reason string, err error) {
	if err := b.CheckDisk(); err != nil {
		return quota.RejectDiskReserve, err
	}
	max, limited := b.limits(tenant).Get(quota.StorageBytes)
	used := b.StorageBytes(tenant)
	if limited && float64(used) >= max {
		return quota.StorageBytes, fmt.Errorf("%w: tenant %q: quota %s is %d bytes; it retains %d; retry once retention frees room or the quota is raised",
			ErrStorageQuota, tenant, quota.StorageBytes, int64(max), used)
	}
	if over := b.overQuota.Load(); b.DiskLevel() >= 3 && over != nil && *over != nil && (*over)(tenant) {
		return quota.RejectDiskWatermark, fmt.Errorf("%w: tenant %q is over its quota; retry later", ErrDiskOverQuota, tenant)
	}
	return "", nil
}

// QuotaRefusal reports whether err is a refusal by a tenant's quota or the
// disk ladder: the client's to see, not an operator's error.
func QuotaRefusal(err error) bool {
	var te *ThrottleError
	return errors.Is(err, ErrStorageQuota) || errors.Is(err, ErrDiskOverQuota) || errors.Is(err, ErrCountQuota) ||
		errors.Is(err, ErrDiskWatermark) || errors.As(err, &te)
}
