package loadgen

import (
	"math"
	"sync"
	"testing"
	"time"
)

func within(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*want
}

func TestHistogramQuantiles(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 10000; i++ { // 1 µs .. 10 ms
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Summary()
	tests := []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 5},
		{"p95", s.P95Ms, 9.5},
		{"p99", s.P99Ms, 9.9},
		{"p999", s.P999Ms, 9.99},
		{"max", s.MaxMs, 10},
		{"mean", s.MeanMs, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !within(tt.got, tt.want, 0.002) { // 3 significant digits
				t.Fatalf("%s = %v ms, want %v ms", tt.name, tt.got, tt.want)
			}
		})
	}
	if s.Count != 10000 {
		t.Fatalf("count %d", s.Count)
	}
}

func TestHistogramClampsAndEmpty(t *testing.T) {
	h := NewHistogram()
	if s := h.Summary(); s != (Summary{}) {
		t.Fatalf("empty summary %+v", s)
	}
	h.Record(-time.Second)  // clock skew: clamped to 1 µs
	h.Record(3 * time.Hour) // beyond the range: clamped to 1 h
	s := h.Summary()
	if s.Count != 2 || !within(s.MaxMs, float64(time.Hour/time.Millisecond), 0.002) {
		t.Fatalf("summary %+v", s)
	}
}

func TestHistogramInterval(t *testing.T) {
	h := NewHistogram()
	h.Record(time.Millisecond)
	if s := h.TakeInterval(); s.Count != 1 {
		t.Fatalf("first interval count %d", s.Count)
	}
	if s := h.TakeInterval(); s.Count != 0 {
		t.Fatalf("interval not reset: %d", s.Count)
	}
	h.Record(2 * time.Millisecond)
	if s := h.TakeInterval(); s.Count != 1 || !within(s.MaxMs, 2, 0.002) {
		t.Fatalf("second interval %+v", s)
	}
	if s := h.Summary(); s.Count != 2 {
		t.Fatalf("total count %d after intervals", s.Count)
	}
}

func TestHistogramMergeConcurrent(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				a.Record(time.Millisecond)
				b.Record(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	a.Merge(b)
	s := a.Summary()
	if s.Count != 8000 || !within(s.P50Ms, 1, 0.002) || !within(s.MaxMs, 100, 0.002) {
		t.Fatalf("merged %+v", s)
	}
}
