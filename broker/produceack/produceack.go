// Package produceack owns the metrics of Produce answers, sluice_produce_ack_seconds
// {acks} (from a request's receipt to its answer) and
// sluice_produce_errors_total{code} (partitions answered with an error).
// broker/kafka's connection writer calls Answered once per Produce
// request when its answer is complete (every partition appended and fsynced
// as its acks ask, refused, or timed out), before writing it: replies go
// out in request order, so the time includes waiting behind the
// connection's earlier replies, as the client sees it.
//
// Invariant: acks is only "0", "1" or "all" (other acks values are refused
// and not observed) and code only a Kafka error name (kerr), so both label
// sets are bounded.
package produceack

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the two metrics of Produce answers.
type Metrics struct {
	ack  *prometheus.HistogramVec
	errs *prometheus.CounterVec
}

// New registers the metrics with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	m.ack = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sluice_produce_ack_seconds",
		Help: "Time from a Produce request's receipt to its answer, by the request's acks (0, 1, all): " +
			"for acks=all until a quorum fsynced it, for 1 and 0 until the leader did (acks=0 is not answered).",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2.5, 14),
	}, []string{"acks"})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_produce_errors_total", Help: "Partitions of Produce requests answered with an error, by Kafka error name.",
	}, []string{"code"})
	reg.MustRegister(m.ack, m.errs)
	return m
}

// Answered observes the answer resp to request body, read at
// received; silent marks a request sent with acks=0 (broker/kafka waits for
// it as for acks=1 but writes no answer). Other requests are ignored.
func (m *Metrics) Answered(body kmsg.Request, resp kmsg.Response, silent bool, received time.Time) {
	req, ok := body.(*kmsg.ProduceRequest)
	pr, ok2 := resp.(*kmsg.ProduceResponse)
	if !ok || !ok2 {
		return
	}
	acks := ""
	switch {
	case silent:
		acks = "0"
	case req.Acks == 1:
		acks = "1"
	case req.Acks == -1:
		acks = "all"
	}
	if acks != "" {
		m.ack.WithLabelValues(acks).Observe(time.Since(received).Seconds())
	}
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.errs.WithLabelValues(kerr.TypedErrorForCode(p.ErrorCode).Message).Inc()
			}
		}
	}
}
