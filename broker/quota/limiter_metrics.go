package quota

// This file owns the per-tenant metrics of the meters:
//
//	sluice_tenant_throttle_seconds_total{tenant,reason}  time clients were held, by quota key
//	sluice_tenant_quota_utilisation{tenant,key}         measured rate / local limit, last period
//	sluice_tenant_bytes_in_total{tenant}                produced and published record bytes
//	sluice_tenant_records_in_total{tenant}              produced and published records
//	sluice_tenant_bytes_out_total{tenant}               fetch bytes
//	sluice_tenant_records_out_total{tenant}             fetched records
//	sluice_tenant_rejections_total{tenant,reason}       refusals by a hard limit or quota
//	sluice_tenant_connections{tenant}                   open Kafka connections (this broker)
//	sluice_tenant_storage_bytes{tenant}                 retained bytes, cluster-wide, as last summed
//
// (tenant_metrics.go owns the last three and the rejection reasons.)
//
// Invariant: the tenant label takes at most MaxTenantLabels values; later
// tenants are counted under OtherTenant, so a cluster of many tenants
// cannot grow the series without bound.
//
// mu guards labels; the vectors are safe for concurrent use.

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxTenantLabels bounds the tenant label's values.
const MaxTenantLabels = 200

// OtherTenant is the label of the tenants past MaxTenantLabels.
const OtherTenant = "_other"

// Metrics are the meters' metrics. A nil *Metrics counts nothing.
type Metrics struct {
	throttle   *prometheus.CounterVec
	util       *prometheus.GaugeVec
	bytesIn    *prometheus.CounterVec
	recordsIn  *prometheus.CounterVec
	bytesOut   *prometheus.CounterVec
	recordsOut *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	conns      *prometheus.GaugeVec
	storage    *prometheus.GaugeVec

	mu     sync.Mutex
	labels map[string]bool // guarded by mu: tenants with their own label

	storageMu     sync.Mutex
	storageLabels map[string]bool // guarded by storageMu: labels of the storage gauge now set
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		throttle: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_throttle_seconds_total",
			Help: "Time a tenant's clients were held by a rate quota (throttle_time_ms, Retry-After) or a Kafka connection was not read at inflight_requests, by quota key (reason).",
		}, []string{"tenant", "reason"}),
		util: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_tenant_quota_utilisation",
			Help: "A tenant's measured rate over the last split period divided by this broker's share of its quota, by key.",
		}, []string{"tenant", "key"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_bytes_in_total", Help: "Record bytes of a tenant's produce requests and HTTP publishes (keys, values and headers of a publish, not its JSON).",
		}, []string{"tenant"}),
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_records_in_total", Help: "Records a tenant produced or published.",
		}, []string{"tenant"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_bytes_out_total", Help: "Record bytes returned to a tenant's fetches.",
		}, []string{"tenant"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_records_out_total", Help: "Records returned to a tenant's fetches.",
		}, []string{"tenant"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_tenant_rejections_total",
			Help: "Requests, connections and frames of a tenant refused by a hard limit or quota, by reason (the quota key, or disk_watermark, disk_reserve, http_throttled, slow_receive).",
		}, []string{"tenant", "reason"}),
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_tenant_connections", Help: "A tenant's open Kafka connections on this broker (as its connections quota counts them).",
		}, []string{"tenant"}),
		storage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_tenant_storage_bytes", Help: "A tenant's retained bytes, cluster-wide, as its storage_bytes quota last read them.",
		}, []string{"tenant"}),
		labels:        map[string]bool{},
		storageLabels: map[string]bool{},
	}
	reg.MustRegister(m.throttle, m.util, m.bytesIn, m.recordsIn, m.bytesOut, m.recordsOut, m.rejected, m.conns, m.storage)
	return m
}

// label is the tenant label of tenant.
func (m *Metrics) label(tenant string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.labels[tenant] {
		return tenant
	}
	if len(m.labels) < MaxTenantLabels {
		m.labels[tenant] = true
		return tenant
	}
	return OtherTenant
}

// Throttled counts d of holding the tenant's client for key.
func (m *Metrics) Throttled(tenant, key string, d time.Duration) {
	if m == nil || d <= 0 {
		return
	}
	m.throttle.WithLabelValues(m.label(tenant), key).Add(d.Seconds())
}

// RecordsOut counts n records fetched by the tenant.
func (m *Metrics) RecordsOut(tenant string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.recordsOut.WithLabelValues(m.label(tenant)).Add(float64(n))
}

func (m *Metrics) recorded(tenant, key string, n float64) {
	if m == nil || n <= 0 {
		return
	}
	var c *prometheus.CounterVec
	switch key {
	case ProducerByteRate:
		c = m.bytesIn
	case ProducerRecordRate:
		c = m.recordsIn
	case ConsumerByteRate:
		c = m.bytesOut
	default:
		return
	}
	c.WithLabelValues(m.label(tenant)).Add(n)
}

func (m *Metrics) utilisation(tenant, key string, u float64) {
	if m == nil {
		return
	}
	m.util.WithLabelValues(m.label(tenant), key).Set(u)
}
