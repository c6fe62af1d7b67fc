package queueapi

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDLQCollectorOldestAge: the oldest age is now − the oldest record's
// timestamp, 0 for an empty DLQ, and absent (not a wrong 0) when the
// record at a log start could not be read.
func TestDLQCollectorOldestAge(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	src := func() []Depth {
		return []Depth{
			{Tenant: "default", Topic: "a.dlq", Records: 2, Oldest: now.Add(-90 * time.Second)},
			{Tenant: "default", Topic: "b.dlq", Records: 0},
			{Tenant: "acme", Topic: "c.dlq", Records: 5}, // unreadable
		}
	}
	c := newDLQCollector(src, func() time.Time { return now })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	depths := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == MetricDLQDepth {
				depths++
				continue
			}
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetValue() + "/"
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"default/a.dlq/": 90, "default/b.dlq/": 0}
	if depths != 3 || len(got) != len(want) || got["default/a.dlq/"] != 90 || got["default/b.dlq/"] != 0 {
		t.Fatalf("ages %v (want %v), %d depth series (want 3)", got, want, depths)
	}
}

// TestPausedCollector: a group's paused keys per topic and the age of the
// oldest, from the durable commits.
func TestPausedCollector(t *testing.T) {
	h := keyedHarness(t, "per-key-strict", "K", "L", "K")
	h.fetch()
	h.nack(0)
	h.now = h.now.Add(30 * time.Second)
	h.nack(1)
	h.now = h.now.Add(15 * time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewPausedCollector(h.api))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	if got[MetricPausedKeys+"/g/jobs"] != 2 || got[MetricPausedOldestAge+"/g/jobs"] != 45 || len(got) != 2 {
		t.Fatalf("metrics %v", got)
	}
}
