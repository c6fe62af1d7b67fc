package httpapi

// This file owns consumer lag: per group and partition, the distance from
// the committed offset to the log end in offsets and in bytes, the age of
// the oldest unconsumed record, and the time to catch up at the rate the
// group has been committing. GET /v1/groups/{group}/lag serves it and a
// Prometheus collector exports it, and the committed offset, at scrape time.
//
// Invariant: the partitions reported are those the group has committed and
// those its members are assigned; an assigned partition with nothing
// committed reports committed -1 and its whole backlog, from the log start.
// Assignments are read only for the "consumer" protocol type (whose
// assignment is the standard ConsumerMemberAssignment, also what the broker's
// range assignor writes for HTTP members) and only while the group is
// Stable, when the coordinator exposes them.
//
// The commit rate comes from the committed offsets this broker observed
// (on lag requests and scrapes) over the last rateWindow; the samples are
// kept in lagstat.Rates.

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/group"
	"github.com/sluice-mq/sluice/broker/httpapi/lagstat"
	"github.com/sluice-mq/sluice/broker/partition"
)

// PartitionLag is one partition's lag (lagstat).
type PartitionLag = lagstat.PartitionLag

// NoCommit is the committed offset reported for an assigned partition the
// group has committed nothing for (Kafka's OffsetFetch answer for it).
const NoCommit = lagstat.NoCommit

func partitionBacklog(p *partition.Partition, committed int64, now time.Time) PartitionLag {
	return lagstat.Backlog(p, committed, now)
}

// groupLag computes the lag of every partition the group has committed or a
// member is assigned, from the replicas this broker hosts: a scrape must not
// wait on other brokers. GET /v1/groups/{group}/lag asks each partition's
// leader instead (leaderLag).
func (b *Server) groupLag(groupID string, now time.Time) ([]PartitionLag, error) {
	qs, err := b.lagQueries(groupID)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionLag, 0, len(qs))
	for _, q := range qs {
		p, err := b.PartitionOf(q.Topic, q.Partition)
		if err != nil {
			continue // deleted since the commit, or not hosted here
		}
		out = append(out, b.withCommitRate(groupID, partitionBacklog(p, q.Committed, now), now))
	}
	return out, nil
}

// assignedPartitions returns the partitions the members of a Stable
// "consumer" group are assigned; nothing for other groups.
func (b *Server) assignedPartitions(groupID string) []group.TopicPartition {
	d, err := b.coord.DescribeGroup(groupID)
	if err != nil || d.ProtocolType != httpProtocolType {
		return nil
	}
	var out []group.TopicPartition
	for _, m := range d.Members {
		if len(m.Assignment) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.Assignment); err != nil {
			b.Logger.Debug().Err(err).Str("group", groupID).Str("member", m.ID).Msg("lag: undecodable assignment")
			continue
		}
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				out = append(out, group.TopicPartition{Topic: memberTopic(groupID, t.Topic), Partition: p})
			}
		}
	}
	return out
}

// withCommitRate adds the commit rate this broker has observed, and the
// time to catch up at it.
func (b *Server) withCommitRate(groupID string, l PartitionLag, now time.Time) PartitionLag {
	committed := l.Committed
	if committed == NoCommit {
		return l // no commits: no commit rate
	}
	key := groupID + "\x00" + l.Topic + "\x00" + strconv.Itoa(int(l.Partition))
	if rate, ok := b.lagRates.Observe(key, now, committed); ok {
		l.CommitRate = &rate
		if rate > 0 {
			eta := math.Round(float64(l.Lag)/rate*10) / 10
			l.CatchUpSeconds = &eta
		}
	}
	return l
}

func (b *Server) httpLag(w http.ResponseWriter, r *http.Request) {
	groupID, err := groupFromPath(r)
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	if _, err := b.coord.DescribeGroup(groupID); err != nil {
		b.writeError(w, r, err)
		return
	}
	qs, err := b.lagQueries(groupID)
	if err != nil {
		b.writeError(w, r, err)
		return
	}
	lags := b.withPauses(r, groupID, b.leaderLag(r.Context(), groupID, qs))
	s := scopeFrom(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"group": s.name(groupID), "partitions": s.showLags(lags)})
}

// lagCollector exports every group's lag at scrape time.
type lagCollector struct {
	b                      *Server
	offsets, bytes, ageSec *prometheus.Desc
	committed              *prometheus.Desc // only for a partition with a commit
}

func newLagCollector(b *Server) *lagCollector {
	labels := []string{"group", "topic", "partition"}
	return &lagCollector{
		b:         b,
		offsets:   prometheus.NewDesc("sluice_group_lag_offsets", "Log end minus committed offset (minus log start for an assigned partition with nothing committed).", labels, nil),
		bytes:     prometheus.NewDesc("sluice_group_lag_bytes", "Bytes between the committed offset (or log start) and the log end.", labels, nil),
		ageSec:    prometheus.NewDesc("sluice_group_lag_oldest_age_seconds", "Age of the oldest unconsumed record.", labels, nil),
		committed: prometheus.NewDesc("sluice_group_committed_offset", "The group's committed offset (the next offset it will consume).", labels, nil),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.offsets
	ch <- c.bytes
	ch <- c.ageSec
	ch <- c.committed
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	if c.b.coord == nil {
		return
	}
	now := time.Now()
	for _, g := range c.b.coord.ListGroups() {
		lags, err := c.b.groupLag(g.Group, now)
		if err != nil {
			continue
		}
		for _, l := range lags {
			part := strconv.Itoa(int(l.Partition))
			ch <- prometheus.MustNewConstMetric(c.offsets, prometheus.GaugeValue, float64(l.Lag), g.Group, l.Topic, part)
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(l.LagBytes), g.Group, l.Topic, part)
			ch <- prometheus.MustNewConstMetric(c.ageSec, prometheus.GaugeValue, float64(l.OldestAgeMs)/1000, g.Group, l.Topic, part)
			if l.Committed != NoCommit {
				ch <- prometheus.MustNewConstMetric(c.committed, prometheus.GaugeValue, float64(l.Committed), g.Group, l.Topic, part)
			}
		}
	}
}
