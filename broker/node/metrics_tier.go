package node

// metrics_tier.go exports tiering's counters and per-partition upload lag
// at scrape time: objects uploaded and deleted, remote reads, the read
// cache's hits and misses, and how far each led partition's uploads trail
// its high watermark in bytes and time.

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

type tierCollector struct {
	b *Node

	uploaded, uploadedBytes, uploadErrors, deleted, localDeleted *prometheus.Desc
	remoteReads, remoteReadBytes, readErrors                     *prometheus.Desc
	cacheHits, cacheMisses, cacheBytes                           *prometheus.Desc
	lagBytes, lagSeconds, remoteStart, remoteEnd                 *prometheus.Desc
}

func NewTierCollector(b *Node) *tierCollector {
	labels := []string{"topic", "partition"}
	d := func(name, help string, l ...string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return &tierCollector{
		b:               b,
		uploaded:        d("sluice_tier_objects_uploaded_total", "Objects PUT to object storage."),
		uploadedBytes:   d("sluice_tier_uploaded_bytes_total", "Bytes PUT to object storage."),
		uploadErrors:    d("sluice_tier_upload_errors_total", "Uploads that failed and will be retried."),
		deleted:         d("sluice_tier_objects_deleted_total", "Objects deleted by retention, clean-up, intents and topic deletion."),
		localDeleted:    d("sluice_tier_local_segments_deleted_total", "Local segments deleted by the retention state machine."),
		remoteReads:     d("sluice_tier_remote_reads_total", "Reads served from object storage."),
		remoteReadBytes: d("sluice_tier_remote_read_bytes_total", "Record bytes served from object storage."),
		readErrors:      d("sluice_tier_remote_read_errors_total", "Reads of object storage that failed (retriable for clients)."),
		cacheHits:       d("sluice_tier_cache_hits_total", "Read cache hits."),
		cacheMisses:     d("sluice_tier_cache_misses_total", "Read cache misses."),
		cacheBytes:      d("sluice_tier_cache_bytes", "Bytes held by the read cache."),
		lagBytes:        d("sluice_tier_upload_lag_bytes", "Local bytes at or above the remote end (not yet uploaded).", labels...),
		lagSeconds:      d("sluice_tier_upload_lag_seconds", "How long the oldest byte not yet uploaded has waited.", labels...),
		remoteStart:     d("sluice_tier_remote_log_start_offset", "The remote log start offset.", labels...),
		remoteEnd:       d("sluice_tier_remote_end_offset", "Offsets below this are in committed objects.", labels...),
	}
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.uploaded, c.uploadedBytes, c.uploadErrors, c.deleted, c.localDeleted,
		c.remoteReads, c.remoteReadBytes, c.readErrors, c.cacheHits, c.cacheMisses, c.cacheBytes,
		c.lagBytes, c.lagSeconds, c.remoteStart, c.remoteEnd} {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	if c.b.Tiers == nil {
		return
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	s := c.b.Tiers.Stats()
	counter(c.uploaded, s.ObjectsUploaded)
	counter(c.uploadedBytes, s.BytesUploaded)
	counter(c.uploadErrors, s.UploadErrors)
	counter(c.deleted, s.ObjectsDeleted)
	counter(c.localDeleted, s.LocalSegmentsDeleted)
	counter(c.remoteReads, s.RemoteReads)
	counter(c.remoteReadBytes, s.RemoteReadBytes)
	counter(c.readErrors, s.ReadErrors)
	cs := c.b.Rcache.Stats()
	counter(c.cacheHits, int64(cs.Hits))
	counter(c.cacheMisses, int64(cs.Misses))
	ch <- prometheus.MustNewConstMetric(c.cacheBytes, prometheus.GaugeValue, float64(cs.Bytes))
	now := c.b.now()
	for _, tg := range c.b.TierTargets() {
		if tg.Fence == nil || !tg.Policy.Tiered {
			continue
		}
		p := tg.P
		part := strconv.Itoa(int(p.Index()))
		t := c.b.LookupTopicID(p.TopicID())
		if t == nil {
			continue
		}
		topic := t.Meta.Name
		lag := c.b.Tiers.UploadLag(context.Background(), p, now)
		ch <- prometheus.MustNewConstMetric(c.lagBytes, prometheus.GaugeValue, float64(lag.Bytes), topic, part)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, lag.Age.Seconds(), topic, part)
		ch <- prometheus.MustNewConstMetric(c.remoteStart, prometheus.GaugeValue, float64(lag.Range.LogStart), topic, part)
		ch <- prometheus.MustNewConstMetric(c.remoteEnd, prometheus.GaugeValue, float64(lag.Range.RemoteEnd), topic, part)
	}
}
