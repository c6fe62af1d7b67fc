package canary

// This file owns the sluice_canary_* metrics (docs/metrics.md; the alerts
// of deploy/canary.rules.yml). Every series is created at start, so each
// reads 0 before its first event and an alert's absence is not a missing
// series.

import "github.com/prometheus/client_golang/prometheus"

// Failure stages (the stage label of sluice_canary_failures_total).
const (
	StagePublish   = "publish"   // a record was not acknowledged
	StageConsume   = "consume"   // a fetch returned an error
	StageSink      = "sink"      // the business store could not be written
	StageCommit    = "commit"    // an offset commit failed
	StageReconcile = "reconcile" // the committed offsets could not be read back
)

var stages = []string{StagePublish, StageConsume, StageSink, StageCommit, StageReconcile}

type metrics struct {
	available  prometheus.Gauge
	attempts   prometheus.Counter
	failures   *prometheus.CounterVec
	latency    prometheus.Observer
	mismatches *prometheus.CounterVec
	duplicates prometheus.Counter
	unapplied  prometheus.Gauge
	outages    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, az string) *metrics {
	l := prometheus.Labels{"az": az}
	avail := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_canary_available", ConstLabels: l,
		Help: "1 while the canary's last round was acknowledged in full and no acknowledged record waits for its result longer than the deadline; else 0."})
	attempts := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_canary_attempts_total", ConstLabels: l,
		Help: "Canary records published (each an attempt)."})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_canary_failures_total", ConstLabels: l,
		Help: "Canary failures by stage: publish (a record not acknowledged), consume, sink, commit, reconcile."}, []string{"stage"})
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_canary_latency_seconds", ConstLabels: l,
		Help:    "From a canary record's publish to its result in the business store.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)})
	mismatches := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_canary_mismatches_total", ConstLabels: l,
		Help: "Acknowledged canary records whose broker, group and business states disagree, by kind: skipped, lost, offset."}, []string{"kind"})
	dups := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_canary_duplicates_total", ConstLabels: l,
		Help: "Canary records delivered again whose id already had a result (deduplicated)."})
	unapplied := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_canary_oldest_unapplied_seconds", ConstLabels: l,
		Help: "Age of the oldest acknowledged canary record without a result yet (0: none)."})
	outages := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_canary_outages_total", ConstLabels: l,
		Help: "Times sluice_canary_available went from 1 to 0: counts an outage shorter than a scrape interval too, and, at a run's start, the outage a crash of its broker caused."})
	reg.MustRegister(avail, attempts, failures, latency, mismatches, dups, unapplied, outages)
	for _, s := range stages {
		failures.WithLabelValues(s)
	}
	for _, k := range Kinds {
		mismatches.WithLabelValues(k)
	}
	return &metrics{available: avail, attempts: attempts, failures: failures, latency: latency,
		mismatches: mismatches, duplicates: dups, unapplied: unapplied, outages: outages}
}
