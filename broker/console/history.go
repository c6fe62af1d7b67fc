package console

// This file owns the lag history behind the console's charts: a bounded
// ring of samples per group partition, so a group's page draws the last
// hour without Prometheus. The sampler (sampler.go) records what the lag
// listing (GET /v1/groups/{group}/lag) answered; the pages read it back.
//
// Invariant: a series holds at most Slots samples (Window / Interval, +1),
// and there are at most MaxSeries series: a key beyond that is not recorded
// (Dropped counts it), so memory is bounded by MaxSeries × Slots × the size
// of a Sample whatever the cluster holds.
// Invariant: a series not recorded for a whole Window is forgotten at the
// next Record, so groups and partitions that are gone leave no memory.
// Invariant: Series returns samples oldest first, each within Window of the
// time it is asked at; times come from the caller (an injected clock).
//
// Guarded by History.mu; safe from any goroutine.

import (
	"sort"
	"sync"
	"time"
)

// Key names one series: a group's partition, by internal names.
type Key struct {
	Group     string
	Topic     string
	Partition int32
}

// Sample is one observation of a group partition's lag.
type Sample struct {
	AtMs        int64 `json:"at_ms"`
	Lag         int64 `json:"lag"`
	LagBytes    int64 `json:"lag_bytes"`
	OldestAgeMs int64 `json:"oldest_age_ms"`
}

// HistoryConfig bounds a History.
type HistoryConfig struct {
	Window    time.Duration // how far back the charts go; default one hour
	Interval  time.Duration // the sampling period; default 15 s (10–30 s is sensible)
	MaxSeries int           // at most this many group partitions; default 2,000
}

func (c HistoryConfig) withDefaults() HistoryConfig {
	if c.Window <= 0 {
		c.Window = time.Hour
	}
	if c.Interval <= 0 {
		c.Interval = 15 * time.Second
	}
	if c.MaxSeries <= 0 {
		c.MaxSeries = 2000
	}
	return c
}

// Slots is the capacity of one series' ring.
func (c HistoryConfig) Slots() int {
	c = c.withDefaults()
	return int(c.Window/c.Interval) + 1
}

// ring is one series: the last len(buf) samples, oldest at head when full.
type ring struct {
	buf    []Sample
	head   int // where the next sample goes
	n      int // samples held
	lastMs int64
}

func (r *ring) add(s Sample) {
	r.buf[r.head] = s
	r.head = (r.head + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
	r.lastMs = s.AtMs
}

// History is the bounded lag history of every group partition sampled.
type History struct {
	cfg     HistoryConfig
	mu      sync.Mutex
	series  map[Key]*ring // guarded by mu
	dropped int64         // guarded by mu: samples of keys over MaxSeries
}

// NewHistory returns an empty history bounded by cfg.
func NewHistory(cfg HistoryConfig) *History {
	return &History{cfg: cfg.withDefaults(), series: map[Key]*ring{}}
}

// Record adds one round of samples taken at now, and forgets series
// unrecorded for a whole window.
func (h *History) Record(now time.Time, samples map[Key]Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	nowMs := now.UnixMilli()
	for k, r := range h.series {
		if nowMs-r.lastMs > h.cfg.Window.Milliseconds() {
			delete(h.series, k)
		}
	}
	for k, s := range samples {
		r, ok := h.series[k]
		if !ok {
			if len(h.series) >= h.cfg.MaxSeries {
				h.dropped++
				continue
			}
			r = &ring{buf: make([]Sample, h.cfg.Slots())}
			h.series[k] = r
		}
		s.AtMs = nowMs
		r.add(s)
	}
}

// Series is k's samples within the window before now, oldest first.
func (h *History) Series(k Key, now time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.series[k]
	if !ok {
		return nil
	}
	from := now.Add(-h.cfg.Window).UnixMilli()
	out := make([]Sample, 0, r.n)
	start := (r.head - r.n + len(r.buf)) % len(r.buf)
	for i := 0; i < r.n; i++ {
		s := r.buf[(start+i)%len(r.buf)]
		if s.AtMs >= from && s.AtMs <= now.UnixMilli() {
			out = append(out, s)
		}
	}
	return out
}

// GroupKeys is the series of one group, in topic and partition order.
func (h *History) GroupKeys(group string) []Key {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Key
	for k := range h.series {
		if k.Group == group {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Stats is the number of series held and of samples refused for the
// series bound.
func (h *History) Stats() (series int, dropped int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series), h.dropped
}
