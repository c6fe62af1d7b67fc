package quota

// This file owns the per-tenant metrics of refusals, connections and
// storage (registered with the others in limiter_metrics.go):
//
//	sluice_tenant_rejections_total{tenant,reason}  one per refusal, counted
//	                                               where the refusal is decided
//	sluice_tenant_connections{tenant}              moved with Meters' own count
//	                                               of the tenant's connections
//	sluice_tenant_storage_bytes{tenant}            set from the figures the
//	                                               storage quota checks
//
// The reasons are the quota keys that refuse (Topics, Partitions, Groups,
// Connections, ConnectionCreationRate, ControllerMutationRate,
// StorageBytes, ObjectStorageBytes) and the Reject* constants below.
//
// Invariant: a refusal is counted once, by whoever decides it (broker/node
// for counts, mutations, storage and the disk; Meters for connections; the
// HTTP admit stage for a 429; the Kafka frame reader for a slow frame).
// Invariant: tenants past MaxTenantLabels share OtherTenant's series: its
// connections and storage are the sum of theirs.

// Rejection reasons that are not quota keys.
const (
	// RejectDiskWatermark: the disk ladder refused (first watermark: a
	// new topic or partition; third: a publish of a tenant over quota).
	RejectDiskWatermark = "disk_watermark"
	// RejectDiskReserve: a publish refused to keep the disk's reserve
	// (--disk-min-free-bytes, --local-max-bytes).
	RejectDiskReserve = "disk_reserve"
	// RejectHTTPThrottled: an HTTP publish or fetch answered 429 by a rate
	// quota.
	RejectHTTPThrottled = "http_throttled"
	// RejectSlowReceive: a Kafka connection closed because its frame
	// stopped making progress while it held request memory.
	RejectSlowReceive = "slow_receive"
)

// Label is the tenant label the tenant's series take, in these metrics and
// in any other per-tenant metric of the broker (the fair lanes' queue
// delay): the tenant's own among the first MaxTenantLabels tenants seen,
// OtherTenant after. A nil *Metrics bounds nothing and answers tenant.
func (m *Metrics) Label(tenant string) string {
	if m == nil {
		return tenant
	}
	return m.label(tenant)
}

// Rejected counts one refusal of the tenant for reason.
func (m *Metrics) Rejected(tenant, reason string) {
	if m == nil || reason == "" {
		return
	}
	m.rejected.WithLabelValues(m.label(tenant), reason).Inc()
}

// connsMoved moves the tenant's open connections by delta (±1). A tenant's
// label never changes once given, so every move of a connection lands on
// the series its opening did.
func (m *Metrics) connsMoved(tenant string, delta float64) {
	if m == nil {
		return
	}
	m.conns.WithLabelValues(m.label(tenant)).Add(delta)
}

// SetStorage replaces the storage gauge with the retained bytes by tenant;
// tenants absent from bytes lose their series.
func (m *Metrics) SetStorage(bytes map[string]int64) {
	if m == nil {
		return
	}
	sums := make(map[string]float64, len(bytes))
	for tenant, n := range bytes {
		sums[m.label(tenant)] += float64(n)
	}
	m.storageMu.Lock()
	defer m.storageMu.Unlock()
	for l := range m.storageLabels {
		if _, ok := sums[l]; !ok {
			m.storage.DeleteLabelValues(l)
			delete(m.storageLabels, l)
		}
	}
	for l, v := range sums {
		m.storage.WithLabelValues(l).Set(v)
		m.storageLabels[l] = true
	}
}
