package node

// This file owns the per-tenant hard limits of a shared cluster that the
// Node itself enforces, read through Config.Quotas (a quota.Source):
//
//	topics, partitions      counted over the topic registry (every topic in
//	                        etcd, as the watch delivered it) at the one place
//	                        every creation passes: CreateTopic (CreateTopics,
//	                        HTTP, auto-creation on produce and metadata) and
//	                        AddPartitions; POLICY_VIOLATION / HTTP 403
//	groups                  counted over etcd (group claims and groups with
//	                        committed offsets) when the coordinator makes a
//	                        new group; POLICY_VIOLATION
//	controller_mutation_rate a token bucket per tenant (KIP-599): partitions
//	                        created or deleted per second; THROTTLING_QUOTA_
//	                        EXCEEDED with throttle_time_ms / HTTP 429
//
// and the disk ladder's first step (diskladder.go): no new topics or
// partitions above the first watermark.
//
// Counts are checked under AdminMu, so one broker never overshoots; two
// brokers creating for one tenant at the same moment each see the registry
// without the other's topic and may together overshoot the count by the
// creations in flight at once (the watch brings each broker the other's
// topic within milliseconds). Kafka clients send CreateTopics to the
// controller, so in practice one broker decides.
//
// Invariant: a refused creation has written nothing to etcd.
// Invariant: each refusal here is counted once in
// sluice_tenant_rejections_total (Node.Tenants), by the quota key or
// disk_watermark, where it is decided.
// Invariant: the mutation bucket is debited only for a mutation that is
// then attempted; a refused one (count, validation) costs nothing.
// mutations is guarded by mutMu.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-mq/sluice/broker/quota"
)

// Quota refusals, classified for the Kafka and HTTP edges (errcode.go,
// httpapi). Each is wrapped with a message naming the quota and the counts.
var (
	// ErrCountQuota: a count limit (topics, partitions, groups) would be
	// exceeded. POLICY_VIOLATION, not retriable: nothing changes by waiting.
	ErrCountQuota = errors.New("quota exceeded")
	// ErrStorageQuota: the tenant's retained bytes reached storage_bytes.
	// Retriable (storage.go says why KAFKA_STORAGE_ERROR).
	ErrStorageQuota = errors.New("storage quota exceeded")
	// ErrDiskWatermark: the disk ladder refuses (diskladder.go).
	ErrDiskWatermark = errors.New("disk above the first watermark")
)

// ThrottleError is a refusal over controller_mutation_rate: the client may
// try again after Wait (Kafka's throttle_time_ms).
type ThrottleError struct {
	Tenant string
	Wait   time.Duration
	Msg    string
}

func (e *ThrottleError) Error() string { return e.Msg }

// ThrottleMillis is the throttle time err asks the client to wait, 0 when
// err is not a ThrottleError; the handlers of the mutating admin APIs put
// the largest in their response's throttle_time_ms.
func ThrottleMillis(err error) int32 {
	var te *ThrottleError
	if !errors.As(err, &te) {
		return 0
	}
	return int32(min(te.Wait.Milliseconds(), math.MaxInt32))
}

// limits returns the tenant's limits; nil when no source is set.
func (b *Node) limits(tenant string) quota.Limits {
	if b.Cfg.Quotas == nil {
		return nil
	}
	return b.Cfg.Quotas.Limits(tenant)
}

// tenantCounts counts the topics and partitions of tenant in the registry.
func (b *Node) tenantCounts(tenant string) (topics, partitions int64) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for name, t := range b.topics {
		if tn, _ := SplitName(name); tn == tenant {
			topics++
			partitions += int64(t.Meta.Partitions)
		}
	}
	return topics, partitions
}

// checkCreate decides whether the tenant of topic may have addTopics more
// topics and addParts more partitions: the disk ladder's first step, then
// the count quotas. The caller holds AdminMu.
func (b *Node) checkCreate(topic string, addTopics, addParts int64) error {
	tenant, _ := SplitName(topic)
	if lvl := b.DiskLevel(); lvl >= 1 {
		b.Tenants.Rejected(tenant, quota.RejectDiskWatermark)
		return fmt.Errorf("%w: disk level %d: new topics and partitions are refused until the disk drains", ErrDiskWatermark, lvl)
	}
	lim := b.limits(tenant)
	if len(lim) == 0 {
		return nil
	}
	topics, parts := b.tenantCounts(tenant)
	if max, ok := lim.Get(quota.Topics); ok && addTopics > 0 && float64(topics+addTopics) > max {
		b.Tenants.Rejected(tenant, quota.Topics)
		return fmt.Errorf("%w: tenant %q: quota %s is %d; it has %d topics and asked for %d more",
			ErrCountQuota, tenant, quota.Topics, int64(max), topics, addTopics)
	}
	if max, ok := lim.Get(quota.Partitions); ok && float64(parts+addParts) > max {
		b.Tenants.Rejected(tenant, quota.Partitions)
		return fmt.Errorf("%w: tenant %q: quota %s is %d; it has %d partitions and asked for %d more",
			ErrCountQuota, tenant, quota.Partitions, int64(max), parts, addParts)
	}
	return nil
}

// CheckNewGroup decides whether the tenant of the new group id (an
// internal name) may have one more group. etcdTenant is the tenant the
// coordinator keeps its claims and offsets under. It reads etcd, so it is
// called only when a group is created, never on the path of an existing
// group's requests.
func (b *Node) CheckNewGroup(ctx context.Context, etcdTenant, id string) error {
	tenant, _ := SplitName(id)
	max, ok := b.limits(tenant).Get(quota.Groups)
	if !ok {
		return nil
	}
	have, err := b.tenantGroups(ctx, etcdTenant, tenant, id)
	if err != nil {
		return fmt.Errorf("%w: count groups of tenant %q: %w", ErrCoordinatorUnavailable, tenant, err)
	}
	if float64(have+1) > max {
		b.Tenants.Rejected(tenant, quota.Groups)
		return fmt.Errorf("%w: tenant %q: quota %s is %d; it has %d groups, group %q would be one more",
			ErrCountQuota, tenant, quota.Groups, int64(max), have, strings.TrimPrefix(id, tenant+string(TenantSeparator)))
	}
	return nil
}

// tenantGroups counts the groups of tenant other than except, cluster-wide:
// a group exists while a coordinator holds its claim or while it has
// committed offsets.
func (b *Node) tenantGroups(ctx context.Context, etcdTenant, tenant, except string) (int64, error) {
	claims, err := b.Store.GroupClaims(ctx, etcdTenant)
	if err != nil {
		return 0, err
	}
	withOffsets, err := b.Store.OffsetGroups(ctx, etcdTenant)
	if err != nil {
		return 0, err
	}
	seen := make(map[string]bool, len(claims)+len(withOffsets))
	add := func(id string) {
		if tn, _ := SplitName(id); tn == tenant && id != except {
			seen[id] = true
		}
	}
	for _, c := range claims {
		add(c.Group)
	}
	for _, g := range withOffsets {
		add(g)
	}
	return int64(len(seen)), nil
}

// limitState is the Node's state of this file, the disk ladder and the
// storage figures; embedded in Node.
type limitState struct {
	mutMu     sync.Mutex
	mutations map[string]*mutationBucket // by tenant; guarded by mutMu

	ladder     diskLadder                                                      // diskladder.go; owned by the disk guard loop
	level      atomic.Int32                                                    // the ladder's level, read by every creation and produce
	storage    atomic.Pointer[storageFigures]                                  // storage.go: retained bytes by tenant, cluster-wide
	largeBytes atomic.Pointer[func(context.Context) (map[string]int64, error)] // storage.go: SetLargeObjectBytes
	usageLease clientv3.LeaseID                                                // storage.go: the lease of this broker's figures; owned by the disk guard loop
	// overQuota tells the third level a tenant over quota (SetOverQuota).
	overQuota atomic.Pointer[func(tenant string) bool]
}

// mutationBucket is one tenant's controller_mutation_rate (KIP-599): a
// token bucket holding at most burst tokens, refilled at rate per second.
// A mutation is admitted while the bucket is not in debt and then debited
// in full, so one large topic can always be created (Kafka's lenient mode
// for CreateTopics v6+); the next waits until the debt is repaid.
type mutationBucket struct {
	tokens float64
	at     time.Time
}

// mutationBurstSeconds is how many seconds of the rate the bucket holds.
const mutationBurstSeconds = 1

// admitMutation debits n partition mutations of the tenant of topic
// against its controller_mutation_rate, or refuses with a ThrottleError.
// The caller holds AdminMu.
func (b *Node) admitMutation(topic string, n int64, what string) error {
	tenant, _ := SplitName(topic)
	rate, ok := b.limits(tenant).Get(quota.ControllerMutationRate)
	if !ok || n <= 0 {
		return nil
	}
	now := b.now()
	b.mutMu.Lock()
	defer b.mutMu.Unlock()
	if b.mutations == nil {
		b.mutations = make(map[string]*mutationBucket)
	}
	burst := rate * mutationBurstSeconds
	mb := b.mutations[tenant]
	if mb == nil {
		mb = &mutationBucket{tokens: burst, at: now}
		b.mutations[tenant] = mb
	}
	if el := now.Sub(mb.at).Seconds(); el > 0 {
		mb.tokens = min(burst, mb.tokens+el*rate)
	}
	mb.at = now
	if mb.tokens < 0 {
		wait := time.Duration(math.Ceil(-mb.tokens/rate*1000)) * time.Millisecond
		b.Tenants.Rejected(tenant, quota.ControllerMutationRate)
		return &ThrottleError{Tenant: tenant, Wait: wait, Msg: fmt.Sprintf(
			"tenant %q: quota %s is %g partitions/s; %s of %d partitions must wait %v",
			tenant, quota.ControllerMutationRate, rate, what, n, wait)}
	}
	mb.tokens -= float64(n)
	return nil
}
