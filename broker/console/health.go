package console

// This file owns the health the console shows: every live broker's etcd
// round trip, disk-watermark level and WAL fsync latency (the cluster
// page), asked of GET /v1/brokers/{id}/health for each broker at once,
// and its tenants' quota use, throttling and rejections (the tenants
// page), from this broker's own metrics registry, so they are exactly what
// /metrics exports.
//
// Invariant: read-only; a figure that cannot be read is left out and said
// so, never shown as zero.
// Invariant: the cluster page waits for the brokers' health at most
// Config.HealthTimeout (plus the time of one in-process call), however many
// brokers do not answer: they are asked concurrently under one deadline,
// and a broker that has not answered by then is shown unreachable.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// defaultHealthTimeout is Config.HealthTimeout's default.
const defaultHealthTimeout = time.Second

// brokerHealth is one broker's health as the cluster page shows it.
type brokerHealth struct {
	Asked     bool   // false: the broker is not live, so it was not asked
	Error     string // it did not answer in time, or was refused: unreachable
	EtcdOK    bool
	EtcdError string
	EtcdRTT   string
	DiskLevel int
	DiskWhat  string
	Fsyncs    uint64
	FsyncP50  string
	FsyncP99  string
}

// State is the row's health in one word: ok, warn (etcd unhealthy or a
// disk level above 0), unreachable, or not-asked.
func (h brokerHealth) State() string {
	switch {
	case !h.Asked:
		return "not-asked"
	case h.Error != "":
		return "unreachable"
	case !h.EtcdOK || h.DiskLevel > 0:
		return "warn"
	}
	return "ok"
}

// brokersHealth asks every live broker of b for its health, concurrently,
// all within the console's health timeout. A broker not live has no entry;
// its zero brokerHealth says it was not asked.
func (q *request) brokersHealth(b brokersAnswer) map[int32]brokerHealth {
	ctx, cancel := context.WithTimeout(q.ctx(), q.c.cfg.HealthTimeout)
	defer cancel()
	out := make(map[int32]brokerHealth, len(b.Brokers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, br := range b.Brokers {
		if !br.Live {
			continue // not asked: its zero brokerHealth
		}
		wg.Add(1)
		go func(id int32) {
			defer wg.Done()
			h := brokerHealth{Asked: true}
			var a healthAnswer
			if err := q.api.get(ctx, fmt.Sprintf("/v1/brokers/%d/health", id), nil, &a); err != nil {
				h.Error = err.Error()
				if ctx.Err() != nil {
					h.Error = fmt.Sprintf("no answer within %s (%v)", q.c.cfg.HealthTimeout, err)
				}
			} else {
				h = a.shown()
			}
			mu.Lock()
			out[id] = h
			mu.Unlock()
		}(br.ID)
	}
	wg.Wait()
	return out
}

// shown is an answer as the page shows it.
func (a healthAnswer) shown() brokerHealth {
	h := brokerHealth{Asked: true, EtcdOK: a.Etcd.OK, EtcdError: a.Etcd.Error,
		DiskLevel: a.Disk.Level, DiskWhat: a.Disk.Meaning, Fsyncs: a.Fsync.Count}
	if a.Etcd.OK {
		h.EtcdRTT = time.Duration(a.Etcd.RoundTripMs * float64(time.Millisecond)).Round(10 * time.Microsecond).String()
	}
	if h.Fsyncs > 0 {
		h.FsyncP50, h.FsyncP99 = bound(a.Fsync.P50Seconds), bound(a.Fsync.P99Seconds)
	}
	return h
}

// bound is a quantile's bound for a person; nil is beyond the largest
// bucket (healthapi).
func bound(s *float64) string {
	if s == nil {
		return "> the largest bucket"
	}
	return "≤ " + time.Duration(*s*float64(time.Second)).String()
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
