package coordinator

// This file owns the coordinator's metrics, read at scrape time from the
// groups this broker coordinates:
//
//	sluice_group_rebalances_total{group}   new generations the coordinator started
//
// A generation counts once it is stored in etcd and handed to the members
// (deliver): a generation that could not be stored was never started, and
// the generation a group is loaded with at takeover was started by another
// coordinator (or by this one before it let the group go).
//
// Invariant: the series are bounded by the groups in this coordinator's
// map: a group's series goes with its runner (deleted, released to another
// broker), and a runner made anew starts counting from 0, which Prometheus
// reads as a counter reset. Groups with no generation started yet have no
// series.
//
// The count is an atomic of the runner, so a scrape never waits on a group's
// lock (held across etcd writes).

import "github.com/prometheus/client_golang/prometheus"

type metricsCollector struct {
	c          *Coordinator
	rebalances *prometheus.Desc
}

func newMetricsCollector(c *Coordinator) *metricsCollector {
	return &metricsCollector{c: c, rebalances: prometheus.NewDesc("sluice_group_rebalances_total",
		"New generations the coordinator started for a group (each completed join round), since this broker took the group over.",
		[]string{"group"}, nil)}
}

func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- m.rebalances }

func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, gr := range m.c.snapshot() {
		if n := gr.rebalances.Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(m.rebalances, prometheus.CounterValue, float64(n), gr.g.ID())
		}
	}
}
