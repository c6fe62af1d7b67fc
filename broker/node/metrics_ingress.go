package node

// This file owns the per-partition ingress metrics, read at scrape time
// from each led partition's hot-key meter (broker/hotkeys):
//
//	sluice_partition_ingress_bytes_per_second{topic,partition}
//	sluice_partition_ingress_records_per_second{topic,partition}
//	sluice_partition_hot_key_records_per_second{topic,partition,rank,key}
//
// Invariant: the series are bounded: two per partition this broker leads,
// and at most HotKeysExported hot-key series per such partition (rank 1 is
// the hottest), whose key label is at most hotkeys.KeyPrefix bytes of the
// key as text, or "0x" and their hex. The key of a rank changes as the
// traffic does; the number of series does not grow with it.

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/replica"
)

// HotKeysExported is how many of a partition's hottest keys are exported
// as metrics (the HTTP API and sluicectl top show all the sketch holds).
const HotKeysExported = 5

type ingressCollector struct {
	b                 *Node
	bytes, recs, keys *prometheus.Desc
}

// NewIngressCollector reports the ingress rates and hot keys of the
// partitions b leads.
func NewIngressCollector(b *Node) prometheus.Collector {
	labels := []string{"topic", "partition"}
	return &ingressCollector{
		b: b,
		bytes: prometheus.NewDesc("sluice_partition_ingress_bytes_per_second",
			"Record batch bytes the partition's leader accepted per second, decayed over about 10 s.", labels, nil),
		recs: prometheus.NewDesc("sluice_partition_ingress_records_per_second",
			"Records the partition's leader accepted per second, decayed over about 10 s.", labels, nil),
		keys: prometheus.NewDesc("sluice_partition_hot_key_records_per_second",
			"Records per second of the partition's hottest keys (rank 1 first, at most 5), from a space-saving sketch of 16 counters: "+
				"an upper bound, over by at most 1/16 of the partition's records per second; key is the key's first 32 bytes as text, or 0x and their hex.",
			append(labels, "rank", "key"), nil),
	}
}

func (c *ingressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.bytes
	ch <- c.recs
	ch <- c.keys
}

func (c *ingressCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.b.AllPartitions() {
		if p.ReplicaStatus().Role != replica.RoleLeader {
			continue
		}
		r := p.Ingress(HotKeysExported)
		part := strconv.Itoa(int(p.Index()))
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, r.BytesPerSec, p.Topic(), part)
		ch <- prometheus.MustNewConstMetric(c.recs, prometheus.GaugeValue, r.RecordsPerSec, p.Topic(), part)
		for i, k := range r.Keys {
			ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, k.RecordsPerSec, p.Topic(), part, strconv.Itoa(i+1), k.Key)
		}
	}
}
