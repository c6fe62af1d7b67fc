package loadgen

// This file owns the latency histogram: an HDR histogram of microseconds
// (1 µs to 1 h, 3 significant digits) behind a mutex, so producers'
// acknowledgment callbacks and consumers can record concurrently. Each
// Histogram keeps a cumulative and an interval histogram; the sampler takes
// and resets the interval one once per interval.

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

const (
	histMinMicros = 1
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

// Histogram records durations. Safe for concurrent use.
type Histogram struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram // guarded by mu
	interval *hdrhistogram.Histogram // guarded by mu
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{
		total:    hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs),
		interval: hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs),
	}
}

// Record adds one duration, clamped to the histogram's range.
func (h *Histogram) Record(d time.Duration) {
	us := d.Microseconds()
	us = min(max(us, histMinMicros), histMaxMicros)
	h.mu.Lock()
	_ = h.total.RecordValue(us) // in range by construction
	_ = h.interval.RecordValue(us)
	h.mu.Unlock()
}

// Summary is a histogram's quantiles in milliseconds.
type Summary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) Summary {
	if h.TotalCount() == 0 {
		return Summary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Summary{
		Count:  h.TotalCount(),
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P95Ms:  ms(h.ValueAtQuantile(95)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}

// Summary returns the cumulative quantiles.
func (h *Histogram) Summary() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	return summarize(h.total)
}

// TakeInterval returns the quantiles since the previous call and resets them.
func (h *Histogram) TakeInterval() Summary {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := summarize(h.interval)
	h.interval.Reset()
	return s
}

// Merge adds all of other's cumulative values into h.
func (h *Histogram) Merge(other *Histogram) {
	other.mu.Lock()
	snap := other.total.Export()
	other.mu.Unlock()
	imported := hdrhistogram.Import(snap)
	h.mu.Lock()
	h.total.Merge(imported)
	h.mu.Unlock()
}
