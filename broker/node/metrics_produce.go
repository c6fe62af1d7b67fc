package node

// This file owns the metrics of Produce acknowledgements:
//
//	sluice_produce_ack_seconds{acks}     from a Produce request's receipt to its answer
//	sluice_produce_errors_total{code}    partitions answered with an error, by Kafka error name
//
// broker/kafka's connection writer calls ProduceAnswered once per Produce
// request, when the request's answer is complete (every partition appended,
// fsynced as its acks ask, refused, or timed out) and is about to be
// written: replies go out in request order, so the time includes waiting
// behind the connection's earlier replies, as the client sees it.
//
// Invariant: the acks label takes only the values "0", "1" and "all" (a
// request with any other acks is refused and not observed), and the code
// label only the names of Kafka error codes (kerr), so both label sets are
// bounded.

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type produceMetrics struct {
	ack    *prometheus.HistogramVec
	errors *prometheus.CounterVec
}

func newProduceMetrics(reg *prometheus.Registry) produceMetrics {
	pm := produceMetrics{
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_produce_ack_seconds",
			Help: "Time from a Produce request's receipt to its answer, by the request's acks (0, 1, all): " +
				"for acks=all until a quorum fsynced it, for 1 until the leader did, for 0 until the leader did (no answer is sent).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2.5, 14),
		}, []string{"acks"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_produce_errors_total",
			Help: "Partitions of Produce requests answered with an error, by Kafka error name.",
		}, []string{"code"}),
	}
	reg.MustRegister(pm.ack, pm.errors)
	return pm
}

// ProduceAnswered observes the answer resp to request body received at
// received; silent marks a request sent with acks=0 (broker/kafka answers
// it as acks=1 without writing the answer). Other requests are ignored.
func (m *Metrics) ProduceAnswered(body kmsg.Request, resp kmsg.Response, silent bool, received time.Time) {
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
		m.produce.ack.WithLabelValues(acks).Observe(time.Since(received).Seconds())
	}
	for _, t := range pr.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.produce.errors.WithLabelValues(kerr.TypedErrorForCode(p.ErrorCode).Message).Inc()
			}
		}
	}
}
