package queueapi

// This file owns the counters of the copies the HTTP queue writes:
//
//	sluice_queue_retries_total{topic}        nacks whose copy went to a retry tier
//	sluice_queue_dead_letters_total{topic}   nacks (and keys:skip) whose copy went
//	                                         to the dead-letter topic
//
// topic is the source topic's internal name (a nack of a tier's record
// counts under its source). A copy is counted once the replicas
// acknowledged it (Backend.Produce returned), so a nack whose copy failed,
// and stays outstanding, is not.
//
// Invariant: the series are bounded by the topics with a queue contract
// that the HTTP queue has nacked records of on this broker; they are not
// removed when a topic is deleted (counters since the broker started).

import "github.com/prometheus/client_golang/prometheus"

// Metric names of the copies.
const (
	MetricRetries     = "sluice_queue_retries_total"
	MetricDeadLetters = "sluice_queue_dead_letters_total"
)

type copyCounters struct {
	retries, deadLetters *prometheus.CounterVec
}

func newCopyCounters() *copyCounters {
	return &copyCounters{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRetries,
			Help: "Records the HTTP queue's nacks copied to a retry tier, by source topic."}, []string{"topic"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDeadLetters,
			Help: "Records the HTTP queue copied to a dead-letter topic (a nack, or keys:skip of a pause), by source topic."}, []string{"topic"}),
	}
}

// CopyMetrics is the collector of the counters above, to register once.
func (a *API) CopyMetrics() prometheus.Collector { return a.copies }

func (c *copyCounters) Describe(ch chan<- *prometheus.Desc) {
	c.retries.Describe(ch)
	c.deadLetters.Describe(ch)
}

func (c *copyCounters) Collect(ch chan<- prometheus.Metric) {
	c.retries.Collect(ch)
	c.deadLetters.Collect(ch)
}
