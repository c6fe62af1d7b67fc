package node

// This file owns the broker's Prometheus metrics. Each Broker has its own
// registry, so several brokers can run in one test process.

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/produceack"
	"github.com/sluice-mq/sluice/wal"
)

type Metrics struct {
	Reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	bytesInC   *prometheus.CounterVec
	recordsInC *prometheus.CounterVec
	bytesOutC  *prometheus.CounterVec
	recordsOut *prometheus.CounterVec
	fsync      prometheus.Histogram
	// consumerBytes counts consumer fetch bytes by this broker's AZ and
	// the client's rack (KIP-392), so cross-AZ reads can be seen.
	consumerBytes *prometheus.CounterVec
	// replicaBytes counts the record batch bytes this broker received as a
	// follower, by topic (broker/cluster/fetcher.go).
	replicaBytes *prometheus.CounterVec

	ConnsOpen    prometheus.Gauge       // broker/kafka/conn.go
	ConnsRefused *prometheus.CounterVec // broker/kafka/conn.go
	ConnsIdle    prometheus.Counter     // broker/kafka/conn.go
	ConnsClosed  *prometheus.CounterVec // closed by the broker, by reason (broker/kafka)
	RequestMem   prometheus.Gauge       // reserved request bytes (broker/kafka/frames)

	orphans        prometheus.Gauge   // tiering.go: orphans left after the last scrub
	orphansRemoved prometheus.Counter // tiering.go

	Produce *produceack.Metrics // Produce answers (broker/produceack)
}

// Refusal reasons, as labelled in sluice_connections_refused_total.
const (
	RefusedMaxConnections = "max_connections"
	RefusedMaxPerIP       = "max_connections_per_ip"
)

// ClosedSlowReceive labels, in sluice_connections_closed_total, the
// connections closed below the minimum receive rate.
const ClosedSlowReceive = "slow_receive"

// NewMetrics registers the broker's metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_kafka_requests_total", Help: "Kafka requests handled, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_kafka_request_duration_seconds", Help: "Time to handle a Kafka request (until its reply is ready to wait on), by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 14),
		}, []string{"api"}),
		bytesInC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_topic_bytes_in_total", Help: "Record batch bytes accepted for appending, by topic.",
		}, []string{"topic"}),
		recordsInC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_topic_records_in_total", Help: "Records accepted for appending, by topic.",
		}, []string{"topic"}),
		bytesOutC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_topic_bytes_out_total", Help: "Record batch bytes returned to fetches, by topic.",
		}, []string{"topic"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_topic_records_out_total", Help: "Records in the batches returned to fetches, by topic.",
		}, []string{"topic"}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_wal_fsync_duration_seconds", Help: "Duration of group-commit fsyncs.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
	}
	m.consumerBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_fetch_bytes_total",
		Help: "Record batch bytes returned to consumer fetches, by this broker's AZ (az) and the client's rack " +
			"(client_rack: an AZ of the cluster, \"none\" when the client sent none, \"other\" for any other); " +
			"bytes where az and client_rack differ crossed AZs.",
	}, []string{"az", "client_rack"})
	m.replicaBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_replica_fetch_bytes_total",
		Help: "Record batch bytes this broker received from leaders as a follower (replication traffic), by topic.",
	}, []string{"topic"})
	m.ConnsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_connections_open", Help: "Open Kafka connections.",
	})
	m.ConnsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_connections_refused_total", Help: "Kafka connections closed at accept, by the limit they were over.",
	}, []string{"reason"})
	for _, reason := range []string{RefusedMaxConnections, RefusedMaxPerIP} {
		m.ConnsRefused.WithLabelValues(reason) // export zeros
	}
	m.ConnsIdle = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_connections_idle_closed_total", Help: "Kafka connections closed after connections max idle without a request.",
	})
	m.ConnsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_connections_closed_total", Help: "Kafka connections the broker closed while they were sending a request, by reason (slow_receive: below the minimum receive rate).",
	}, []string{"reason"})
	m.ConnsClosed.WithLabelValues(ClosedSlowReceive) // export a zero
	m.RequestMem = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_request_memory_bytes", Help: "Request bytes held (read and not yet answered), over all Kafka connections; bounded by queued max request bytes.",
	})
	m.orphans = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_tier_orphans", Help: "Objects in the bucket no head, manifest or intent names, after the last scrub (younger than the grace, or left for the next).",
	})
	m.orphansRemoved = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_tier_orphans_removed_total", Help: "Orphaned objects removed by the scrub.",
	})
	m.Produce = produceack.New(m.Reg)
	m.Reg.MustRegister(m.ConnsOpen, m.ConnsRefused, m.ConnsIdle, m.ConnsClosed, m.RequestMem, m.consumerBytes, m.replicaBytes, m.orphans, m.orphansRemoved)
	m.Reg.MustRegister(m.requests, m.latency, m.bytesInC, m.recordsInC, m.bytesOutC, m.recordsOut, m.fsync,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) ObserveRequest(key int16, start time.Time) {
	name := kmsg.NameForKey(key)
	m.requests.WithLabelValues(name).Inc()
	m.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

func (m *Metrics) RecordsIn(topic string, bytes, records int) {
	m.bytesInC.WithLabelValues(topic).Add(float64(bytes))
	m.recordsInC.WithLabelValues(topic).Add(float64(records))
}

func (m *Metrics) BytesOut(topic string, bytes int) {
	m.bytesOutC.WithLabelValues(topic).Add(float64(bytes))
}

// consumerFetched counts bytes served to a consumer fetch; rack is the
// client's rack label (rackLabel).
func (m *Metrics) ConsumerFetched(az, rack string, bytes int) {
	m.consumerBytes.WithLabelValues(az, rack).Add(float64(bytes))
}

// ReplicaFetched counts record batch bytes a follower received for topic.
func (m *Metrics) ReplicaFetched(topic string, bytes int) {
	m.replicaBytes.WithLabelValues(topic).Add(float64(bytes))
}

func (m *Metrics) RecordsOutN(topic string, records int) {
	m.recordsOut.WithLabelValues(topic).Add(float64(records))
}

// CountRecords adds up the record counts of whole batches in data.
func CountRecords(data []byte) int {
	n := 0
	for len(data) >= wal.BatchHeaderSize {
		h, err := wal.ParseBatchHeader(data)
		if err != nil || h.Size() > len(data) {
			break
		}
		n += int(h.RecordCount)
		data = data[h.Size():]
	}
	return n
}

// observeJournalSync records one journal round's fsync, in the same
// histogram as the per-partition fsyncs it replaces.
func (m *Metrics) observeJournalSync(took time.Duration, _ int) {
	m.fsync.Observe(took.Seconds())
}

// StartFsync (partition.Metrics) starts timing one fsync; call the result when it ends.
func (m *Metrics) StartFsync() func() {
	start := time.Now()
	return func() { m.fsync.Observe(time.Since(start).Seconds()) }
}

// offsetCollector reports log start, log end and high watermark per
// partition at scrape time.
type offsetCollector struct {
	b                    *Node
	start, end, hwm, siz *prometheus.Desc
}

func NewOffsetCollector(b *Node) *offsetCollector {
	labels := []string{"topic", "partition"}
	return &offsetCollector{
		b:     b,
		start: prometheus.NewDesc("sluice_partition_log_start_offset", "First offset still in the partition's log.", labels, nil),
		end:   prometheus.NewDesc("sluice_partition_log_end_offset", "Next offset the partition will assign.", labels, nil),
		hwm:   prometheus.NewDesc("sluice_partition_high_watermark", "Offsets below this are committed and visible to consumers.", labels, nil),
		siz:   prometheus.NewDesc("sluice_partition_log_bytes", "Bytes of the partition's local log on disk.", labels, nil),
	}
}

func (c *offsetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.start
	ch <- c.end
	ch <- c.hwm
	ch <- c.siz
}

func (c *offsetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.b.AllPartitions() {
		part := strconv.Itoa(int(p.Index()))
		hw, _ := p.HighWatermark()
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(c.b.LogStart(context.Background(), p)), p.Topic(), part)
		ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(p.Log().EndOffset()), p.Topic(), part)
		ch <- prometheus.MustNewConstMetric(c.hwm, prometheus.GaugeValue, float64(hw), p.Topic(), part)
		ch <- prometheus.MustNewConstMetric(c.siz, prometheus.GaugeValue, float64(p.Log().Size()), p.Topic(), part)
	}
}
