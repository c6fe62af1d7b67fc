package console

// This file owns what the console reads of this broker itself rather than
// through the API: its etcd round trip, disk-watermark level and WAL fsync
// latency (the cluster page), and its tenants' quota use, throttling and
// rejections (the tenants page), the last two from the broker's own
// metrics registry, so they are exactly what /metrics exports.
//
// Invariant: read-only; a figure that cannot be read is left out and said
// so, never shown as zero.

import (
	"context"
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// localHealth is this broker's own state.
type localHealth struct {
	NodeID    int32
	EtcdOK    bool
	EtcdError string
	EtcdRTT   string
	DiskLevel int
	DiskWhat  string
	Fsyncs    uint64
	FsyncP50  string
	FsyncP99  string
	Known     bool // false without a node (a unit test)
}

var diskLevels = []string{"none", "no new topics or partitions", "no bursts for low-priority tenants", "publishes over quota refused"}

func (c *Console) localHealth(ctx context.Context) localHealth {
	n := c.cfg.Node
	if n == nil {
		return localHealth{}
	}
	h := localHealth{NodeID: n.Cfg.NodeID, Known: true, DiskLevel: n.DiskLevel()}
	if h.DiskLevel >= 0 && h.DiskLevel < len(diskLevels) {
		h.DiskWhat = diskLevels[h.DiskLevel]
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if _, _, err := n.Store.ControllerID(ctx); err != nil {
		h.EtcdError = err.Error()
	} else {
		h.EtcdOK = true
		h.EtcdRTT = time.Since(start).Round(10 * time.Microsecond).String()
	}
	for _, f := range c.gather() {
		if f.GetName() != "sluice_wal_fsync_duration_seconds" || len(f.GetMetric()) == 0 {
			continue
		}
		hist := f.GetMetric()[0].GetHistogram()
		h.Fsyncs = hist.GetSampleCount()
		if h.Fsyncs > 0 {
			h.FsyncP50 = secs(quantile(hist, 0.5))
			h.FsyncP99 = secs(quantile(hist, 0.99))
		}
	}
	return h
}

// gather is the broker's metric families, none when they cannot be read.
func (c *Console) gather() []*dto.MetricFamily {
	if c.cfg.Node == nil || c.cfg.Node.M == nil {
		return nil
	}
	fams, err := c.cfg.Node.M.Reg.Gather()
	if err != nil {
		c.log.Debug().Err(err).Msg("console: gather metrics")
	}
	return fams
}

// quantile is the upper bound of the bucket holding quantile q (a bound,
// as a histogram allows: "p99 ≤ 2ms").
func quantile(h *dto.Histogram, q float64) float64 {
	total := h.GetSampleCount()
	want := uint64(math.Ceil(q * float64(total)))
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() >= want {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

func secs(s float64) string {
	if math.IsInf(s, 1) {
		return "> the largest bucket"
	}
	return "≤ " + time.Duration(s*float64(time.Second)).String()
}

// tenantUse is one tenant's figures on this broker.
type tenantUse struct {
	Utilisation  map[string]float64 // by quota key: measured rate / this broker's share
	ThrottledSec map[string]float64 // by quota key
	Rejections   map[string]float64 // by reason
	BytesIn      float64
	BytesOut     float64
	Connections  float64
	StorageBytes float64
}

func (c *Console) tenantUse() map[string]tenantUse {
	out := map[string]tenantUse{}
	get := func(tenant string) tenantUse {
		u, ok := out[tenant]
		if !ok {
			u = tenantUse{Utilisation: map[string]float64{}, ThrottledSec: map[string]float64{}, Rejections: map[string]float64{}}
		}
		return u
	}
	for _, f := range c.gather() {
		for _, m := range f.GetMetric() {
			tenant, ok := label(m, "tenant")
			if !ok {
				continue
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			u := get(tenant)
			switch f.GetName() {
			case "sluice_tenant_quota_utilisation":
				k, _ := label(m, "key")
				u.Utilisation[k] = v
			case "sluice_tenant_throttle_seconds_total":
				k, _ := label(m, "reason")
				u.ThrottledSec[k] = v
			case "sluice_tenant_rejections_total":
				k, _ := label(m, "reason")
				u.Rejections[k] = v
			case "sluice_tenant_bytes_in_total":
				u.BytesIn = v
			case "sluice_tenant_bytes_out_total":
				u.BytesOut = v
			case "sluice_tenant_connections":
				u.Connections = v
			case "sluice_tenant_storage_bytes":
				u.StorageBytes = v
			default:
				continue
			}
			out[tenant] = u
		}
	}
	return out
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// sortedKeys is a map's keys in order, for the templates.
func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
