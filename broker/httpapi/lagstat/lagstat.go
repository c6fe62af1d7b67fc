// Package lagstat computes a consumer group's lag on one partition from
// its local replica: the distance from the committed offset to the high
// watermark in offsets and bytes, the age of the oldest unconsumed record,
// and the commit rate observed over a window (Rates), from which the HTTP
// API (broker/httpapi, lag.go) derives the time to catch up.
//
// Invariant: Backlog reads only the local replica and never waits on
// another broker; a partition with nothing committed counts its backlog
// from the log start.
package lagstat

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/httpapi/queueapi"
	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/broker/partition"
	"github.com/sluice-mq/sluice/wal"
)

const (
	rateWindow     = 10 * time.Minute
	maxRateSamples = 32
)

// NoCommit is the committed offset reported for an assigned partition the
// group has committed nothing for (Kafka's OffsetFetch answer for it).
const NoCommit = -1

// PartitionLag is one partition's lag, as GET /v1/groups/{group}/lag
// answers it.
type PartitionLag struct {
	Topic          string   `json:"topic"`
	Partition      int32    `json:"partition"`
	Committed      int64    `json:"committed"` // NoCommit (-1) for an assigned partition with nothing committed
	LogEnd         int64    `json:"log_end"`
	Lag            int64    `json:"lag"`
	LagBytes       int64    `json:"lag_bytes"`
	OldestAgeMs    int64    `json:"oldest_unconsumed_age_ms"`
	CommitRate     *float64 `json:"commit_rate_per_second"` // null until two distinct commits were seen
	CatchUpSeconds *float64 `json:"catch_up_seconds"`       // null while the rate is unknown or zero
	// Paused: the keys (or the whole partition) the group paused on a
	// nack of a strict topic (queueapi, keys:resume).
	Paused []queueapi.PausedKey `json:"paused,omitempty"`
}

type rateSample struct {
	at     time.Time
	offset int64
}

// Rates remembers recent committed offsets per group partition; the zero
// value is ready.
type Rates struct {
	mu      sync.Mutex
	samples map[string][]rateSample // guarded by mu
}

// Observe records a committed offset and returns the commit rate over the
// window, in offsets per second, if it can be told.
func (lr *Rates) Observe(key string, now time.Time, offset int64) (float64, bool) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.samples == nil {
		lr.samples = make(map[string][]rateSample)
	}
	s := lr.samples[key]
	for len(s) > 0 && now.Sub(s[0].at) > rateWindow {
		s = s[1:]
	}
	if len(s) == 0 || s[len(s)-1].offset != offset {
		s = append(s, rateSample{at: now, offset: offset})
	}
	if len(s) > maxRateSamples {
		s = s[len(s)-maxRateSamples:]
	}
	lr.samples[key] = s
	if len(s) < 2 {
		return 0, false
	}
	first, last := s[0], s[len(s)-1]
	secs := now.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0, false
	}
	return float64(last.offset-first.offset) / secs, true
}

// Backlog is the lag of one partition from its local replica,
// without the commit rate.
func Backlog(p *partition.Partition, committed int64, now time.Time) PartitionLag {
	hw, _ := p.HighWatermark()
	l := PartitionLag{Topic: p.Topic(), Partition: p.Index(), Committed: committed, LogEnd: int64(hw)}
	from := max(wal.Offset(committed), p.Log().StartOffset())
	if from < hw {
		l.Lag = int64(hw - from)
		backlog, err1 := p.Log().BytesFrom(from)
		beyond, err2 := p.Log().BytesFrom(hw)
		if err1 == nil && err2 == nil {
			l.LagBytes = backlog - beyond
		}
		if ts, ok := recordTimestamp(p, from, hw); ok {
			l.OldestAgeMs = max(0, now.UnixMilli()-ts)
		}
	}
	return l
}

// recordTimestamp returns the timestamp of the record at offset off.
func recordTimestamp(p *partition.Partition, off, hw wal.Offset) (int64, bool) {
	data, err := p.Log().Read(off, hw, 1)
	if err != nil || len(data) == 0 {
		return 0, false
	}
	h, err := wal.ParseBatchHeader(data)
	if err != nil || h.Size() > len(data) {
		return 0, false
	}
	var ts int64
	found := false
	_ = node.EachRecord(data[:h.Size()], func(o, t int64, _ *kmsg.Record) bool {
		if o >= int64(off) {
			ts, found = t, true
			return false
		}
		return true
	})
	return ts, found
}
