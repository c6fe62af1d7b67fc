package console

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestHistoryRingKeepsLastWindowOldestFirst(t *testing.T) {
	h := NewHistory(HistoryConfig{Window: time.Minute, Interval: 10 * time.Second, MaxSeries: 10})
	k := Key{Group: "g", Topic: "t", Partition: 0}
	if got := h.cfg.Slots(); got != 7 {
		t.Fatalf("slots = %d, want 7 (60 s / 10 s + 1)", got)
	}
	// 20 rounds, 10 s apart: the ring keeps the last 7, the window the
	// samples within a minute of the last.
	for i := 0; i < 20; i++ {
		h.Record(t0.Add(time.Duration(i)*10*time.Second), map[Key]Sample{k: {Lag: int64(i)}})
	}
	now := t0.Add(190 * time.Second)
	got := h.Series(k, now)
	if len(got) != 7 {
		t.Fatalf("got %d samples, want 7: %+v", len(got), got)
	}
	for i, s := range got {
		if want := int64(13 + i); s.Lag != want || s.AtMs != t0.Add(time.Duration(want)*10*time.Second).UnixMilli() {
			t.Fatalf("sample %d = %+v, want lag %d at its round's time", i, s, want)
		}
	}
	// Asked later, only what is within the window remains.
	if got := h.Series(k, now.Add(35*time.Second)); len(got) != 3 || got[0].Lag != 17 {
		t.Fatalf("35 s later: %+v, want lags 17..19", got)
	}
}

func TestHistoryBoundsSeriesAndForgetsGoneOnes(t *testing.T) {
	h := NewHistory(HistoryConfig{Window: time.Minute, Interval: 15 * time.Second, MaxSeries: 2})
	a, b, c := Key{"g", "t", 0}, Key{"g", "t", 1}, Key{"g", "t", 2}
	h.Record(t0, map[Key]Sample{a: {Lag: 1}, b: {Lag: 2}})
	h.Record(t0.Add(15*time.Second), map[Key]Sample{c: {Lag: 3}, a: {Lag: 4}})
	if n, dropped := h.Stats(); n != 2 || dropped != 1 {
		t.Fatalf("series %d dropped %d, want 2 and 1 (c over MaxSeries)", n, dropped)
	}
	if got := h.Series(c, t0.Add(15*time.Second)); got != nil {
		t.Fatalf("c was recorded over the bound: %+v", got)
	}
	// b is not sampled for more than a window: forgotten, making room for c.
	h.Record(t0.Add(61*time.Second), map[Key]Sample{a: {Lag: 5}})
	h.Record(t0.Add(76*time.Second), map[Key]Sample{c: {Lag: 6}, a: {Lag: 7}})
	if n, _ := h.Stats(); n != 2 {
		t.Fatalf("series %d, want 2", n)
	}
	if got := h.Series(b, t0.Add(76*time.Second)); got != nil {
		t.Fatalf("b not forgotten: %+v", got)
	}
	if got := h.Series(c, t0.Add(76*time.Second)); len(got) != 1 || got[0].Lag != 6 {
		t.Fatalf("c = %+v, want one sample of lag 6", got)
	}
	if keys := h.GroupKeys("g"); len(keys) != 2 || keys[0] != a || keys[1] != c {
		t.Fatalf("GroupKeys = %+v, want a, c", keys)
	}
}
