package canary

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAvailabilityFollowsEveryRound: a failed round takes the gauge to 0
// at once and counts one outage, even when the next round succeeds before
// any reconcile round runs (the gauge used to be set only by the
// reconcile loop, so a failover shorter than its period was invisible);
// a canary that never was up has had no outage; a record overdue for its
// result is an outage of its own.
func TestAvailabilityFollowsEveryRound(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), "a")
	a := availability{m: m}
	check := func(step string, avail, outages float64) {
		t.Helper()
		if got := testutil.ToFloat64(m.available); got != avail {
			t.Fatalf("%s: sluice_canary_available %v, want %v", step, got, avail)
		}
		if got := testutil.ToFloat64(m.outages); got != outages {
			t.Fatalf("%s: sluice_canary_outages_total %v, want %v", step, got, outages)
		}
	}
	a.round(false)
	check("first round failed", 0, 0)
	a.round(true)
	check("first round acknowledged", 1, 0)
	a.round(false)
	check("a round failed", 0, 1)
	a.round(false)
	check("another round failed", 0, 1)
	a.round(true)
	check("recovered", 1, 1)
	a.late(true)
	check("a record overdue", 0, 2)
	a.round(true)
	check("a round acknowledged while a record is overdue", 0, 2)
	a.late(false)
	check("the record's result arrived", 1, 2)
}

// TestAvailabilityLogsEachOutage: an outage is logged when it starts, with
// its cause, and when it ends, with its length (the counters restart with
// the process; the log keeps what happened); a canary that never was up
// logs no recovery, only, once up, that it is available.
func TestAvailabilityLogsEachOutage(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	a := availability{m: newMetrics(prometheus.NewRegistry(), "a"), log: zerolog.New(&buf), now: func() time.Time { return now }}
	a.round(false)
	a.round(true)
	a.round(false)
	now = now.Add(2500 * time.Millisecond)
	a.round(true)
	a.late(true)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`"level":"info","message":"canary available"}`,
		`"level":"warn","cause":"a round was not acknowledged in full","message":"canary unavailable"`,
		`"level":"info","outage_ms":2500,"message":"canary available again"`,
		`"level":"warn","cause":"an acknowledged record has no result past the deadline","message":"canary unavailable"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want %d lines", lines, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d is %s, want it to hold %s", i, lines[i], w)
		}
	}
}
