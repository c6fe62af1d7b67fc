package queueapi

// This file owns the dead-letter metric:
//
//	sluice_dlq_depth{tenant, topic}  records in a dead-letter topic's
//	                                 partitions this broker leads
//	                                 (high watermark − log start)
//
// Sum over brokers for a topic's depth. A topic is a dead-letter topic when
// an existing topic's contract names it (dead.letter.topic, or <topic>.dlq)
// and it exists; so the series are bounded by the topics, and go when the
// topic does. The oldest dead letter's age is issue 22's part 2.

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// Depth is one dead-letter topic's records on this broker.
type Depth struct {
	Tenant, Topic string // the topic's tenant-local name
	Records       int64
}

type dlqCollector struct {
	desc *prometheus.Desc
	src  func() []Depth
}

// NewDLQCollector reports the depths src returns at each scrape.
func NewDLQCollector(src func() []Depth) prometheus.Collector {
	return &dlqCollector{src: src, desc: prometheus.NewDesc("sluice_dlq_depth",
		"Records in the partitions of a dead-letter topic this broker leads (sum over brokers).", []string{"tenant", "topic"}, nil)}
}

func (c *dlqCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *dlqCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.src() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(d.Records), d.Tenant, d.Topic)
	}
}

// DLQDepths returns the depth of each dead-letter topic (one an existing
// topic's contract names) in the partitions n leads.
func DLQDepths(n *node.Node) func() []Depth {
	return func() []Depth {
		topics := n.SortedTopics()
		dlqs := map[string]bool{}
		for _, t := range topics {
			c, err := queue.ParseContract(t.Meta.Configs)
			if err != nil {
				continue
			}
			tenant, local := node.SplitName(t.Meta.Name)
			dlqs[node.QualifyName(tenant, c.DeadLetterTopic(local))] = true
		}
		var out []Depth
		for _, t := range topics {
			if !dlqs[t.Meta.Name] {
				continue
			}
			d := Depth{}
			d.Tenant, d.Topic = node.SplitName(t.Meta.Name)
			led := false
			for i, p := range t.Partitions {
				if p == nil || !n.Leads(t, int32(i)) {
					continue
				}
				hw, _ := p.HighWatermark()
				d.Records += max(int64(hw)-int64(n.LogStart(context.Background(), p)), 0)
				led = true
			}
			if led {
				out = append(out, d)
			}
		}
		return out
	}
}
