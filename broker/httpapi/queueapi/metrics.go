package queueapi

// This file owns the dead-letter metrics:
//
//	sluice_dlq_depth{tenant, topic}               records in a dead-letter topic's
//	                                              partitions this broker leads
//	                                              (high watermark − log start)
//	sluice_dlq_oldest_age_seconds{tenant, topic}  the age of the oldest dead letter
//	                                              in them: now − the timestamp of the
//	                                              record at a partition's log start
//	                                              (its dead-lettering time: a copy is
//	                                              stamped when written); 0 when empty
//
// Sum over brokers for a topic's depth, max for its oldest age. The record
// at a log start is read once per (partition, log start) and cached, so a
// scrape reads a record only after the log start moved (a redrive or
// retention deleted dead letters); a partition whose read fails reports
// no age that scrape (logged), never a wrong one. A topic is a dead-letter topic when
// an existing topic's contract names it (dead.letter.topic, or <topic>.dlq)
// and it exists; so the series are bounded by the topics, and go when the
// topic does.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/queue"
)

// Depth is one dead-letter topic's records on this broker.
type Depth struct {
	Tenant, Topic string // the topic's tenant-local name
	Records       int64
	// Oldest is the timestamp of its oldest record (zero when none, or
	// when no partition's could be read).
	Oldest time.Time
}

// Metric names (deploy/dlq.rules.yml names them).
const (
	MetricDLQDepth     = "sluice_dlq_depth"
	MetricDLQOldestAge = "sluice_dlq_oldest_age_seconds"
)

type dlqCollector struct {
	depth, age *prometheus.Desc
	src        func() []Depth
	now        func() time.Time
}

// NewDLQCollector reports the depths src returns at each scrape.
func NewDLQCollector(src func() []Depth) prometheus.Collector {
	return newDLQCollector(src, time.Now)
}

func newDLQCollector(src func() []Depth, now func() time.Time) *dlqCollector {
	labels := []string{"tenant", "topic"}
	return &dlqCollector{src: src, now: now,
		depth: prometheus.NewDesc(MetricDLQDepth,
			"Records in the partitions of a dead-letter topic this broker leads (sum over brokers).", labels, nil),
		age: prometheus.NewDesc(MetricDLQOldestAge,
			"Age of the oldest dead letter in the partitions of a dead-letter topic this broker leads, from the timestamp of the record at each log start; 0 when empty (max over brokers).", labels, nil)}
}

func (c *dlqCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth; ch <- c.age }

func (c *dlqCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, d := range c.src() {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(d.Records), d.Tenant, d.Topic)
		age := 0.0
		switch {
		case d.Records > 0 && !d.Oldest.IsZero():
			age = max(now.Sub(d.Oldest).Seconds(), 0)
		case d.Records > 0:
			continue // unknown: no series rather than a wrong 0
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, d.Tenant, d.Topic)
	}
}

// oldestCache remembers the timestamp of the record at a partition's log
// start, keyed by the partition and that log start.
type oldestCache struct {
	mu sync.Mutex
	m  map[oldestKey]time.Time
}

type oldestKey struct {
	topic     string
	partition int32
	start     int64
}

// DLQDepths returns the depth of each dead-letter topic (one an existing
// topic's contract names) in the partitions n leads.
func DLQDepths(n *node.Node) func() []Depth {
	cache := &oldestCache{m: map[oldestKey]time.Time{}}
	return func() []Depth {
		seen := map[oldestKey]bool{}
		defer cache.prune(seen)
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
			led, unknown := false, false
			for i, p := range t.Partitions {
				if p == nil || !n.Leads(t, int32(i)) {
					continue
				}
				hw, _ := p.HighWatermark()
				start := n.LogStart(context.Background(), p)
				if int64(hw) > int64(start) {
					d.Records += int64(hw) - int64(start)
					k := oldestKey{t.Meta.Name, int32(i), int64(start)}
					seen[k] = true
					switch ts, ok := cache.oldest(n, p, k, hw); {
					case !ok:
						unknown = true
					case d.Oldest.IsZero() || ts.Before(d.Oldest):
						d.Oldest = ts
					}
				}
				led = true
			}
			if unknown {
				d.Oldest = time.Time{} // no age rather than a wrong one
			}
			if led {
				out = append(out, d)
			}
		}
		return out
	}
}

// oldest is the timestamp of the first record at or after k.start below
// hw, read once per key.
func (c *oldestCache) oldest(n *node.Node, p *partition.Partition, k oldestKey, hw wal.Offset) (time.Time, bool) {
	c.mu.Lock()
	ts, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return ts, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data, _, err := n.Read(ctx, p, wal.Offset(k.start), 64<<10)
	found := false
	for err == nil && len(data) > 0 && !found {
		h, herr := wal.ParseBatchHeader(data)
		if herr != nil || h.Size() > len(data) {
			err = fmt.Errorf("stored batch: %v", herr) //nolint:errorlint // a storage fault, logged
			break
		}
		err = node.EachRecord(data[:h.Size()], func(off, tsMs int64, _ *kmsg.Record) bool {
			if off >= k.start && off < int64(hw) {
				ts, found = time.UnixMilli(tsMs), true
				return false
			}
			return true
		})
		data = data[h.Size():]
	}
	if err != nil || !found {
		n.Logger.Warn().Err(err).Str("topic", k.topic).Int32("partition", k.partition).Int64("log_start", k.start).
			Msg("dead-letter topic: cannot read the record at the log start; no oldest age this scrape")
		return time.Time{}, false
	}
	c.mu.Lock()
	c.m[k] = ts
	c.mu.Unlock()
	return ts, true
}

// prune forgets the entries of log starts no longer current.
func (c *oldestCache) prune(current map[oldestKey]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if !current[k] {
			delete(c.m, k)
		}
	}
}
