package lagstat

import (
	"testing"
	"time"
)

func TestLagRates(t *testing.T) {
	var lr Rates
	start := time.Unix(1000, 0)
	if _, ok := lr.Observe("k", start, 100); ok {
		t.Fatal("a rate from one sample")
	}
	if _, ok := lr.Observe("k", start.Add(5*time.Second), 100); ok {
		t.Fatal("a rate without a second distinct commit")
	}
	rate, ok := lr.Observe("k", start.Add(10*time.Second), 300)
	if !ok || rate != 20 {
		t.Fatalf("rate %v %v, want 20/s", rate, ok)
	}
	// Samples older than the window are forgotten.
	if _, ok := lr.Observe("k", start.Add(rateWindow+time.Hour), 300); ok {
		t.Fatal("a rate from samples outside the window")
	}
}
