package node

import (
	"strings"
	"testing"
)

// TestDiskLadderSteps drives the ladder's state machine through readings:
// it climbs each level at its watermark, skips none on a jump, holds a
// level within the hysteresis below its watermark, and falls back step by
// step as the disk drains.
func TestDiskLadderSteps(t *testing.T) {
	l := diskLadder{marks: Watermarks{80, 90, 95}}
	steps := []struct {
		used     float64
		from, to int
	}{
		{10, 0, 0},
		{79.9, 0, 0},
		{80, 0, 1},   // first watermark reached
		{78.5, 1, 1}, // within the hysteresis: stays
		{77.9, 1, 0}, // 2 points below: leaves
		{80, 0, 1},
		{90, 1, 2},
		{95, 2, 3},
		{96, 3, 3},
		{93.5, 3, 3}, // hysteresis of the third
		{92.9, 3, 2},
		{99, 2, 3},
		{50, 3, 0}, // drained at once: falls through every level
		{97, 0, 3}, // filled at once: climbs through every level
	}
	for i, s := range steps {
		from, to := l.step(s.used)
		if from != s.from || to != s.to {
			t.Fatalf("step %d (%.1f%%): %d → %d, want %d → %d", i, s.used, from, to, s.from, s.to)
		}
	}
	off := diskLadder{}
	if _, to := off.step(100); to != 0 {
		t.Fatalf("a ladder without watermarks reached level %d", to)
	}
}

func TestParseWatermarks(t *testing.T) {
	cases := []struct {
		in   string
		want Watermarks
		err  string
	}{
		{"", Watermarks{}, ""},
		{"80,90,95", Watermarks{80, 90, 95}, ""},
		{" 70%, 85% ,99 ", Watermarks{70, 85, 99}, ""},
		{"80,90", Watermarks{}, "three percentages"},
		{"90,80,95", Watermarks{}, "must increase"},
		{"80,90,101", Watermarks{}, "at most 100"},
		{"1,90,95", Watermarks{}, "must be above"},
		{"80,x,95", Watermarks{}, "not a number"},
	}
	for _, c := range cases {
		got, err := ParseWatermarks(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseWatermarks(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseWatermarks(%q) = %v, want an error containing %q", c.in, err, c.err)
		}
	}
}

func TestBurstAllowed(t *testing.T) {
	for level := 0; level <= 3; level++ {
		if !BurstAllowed(level, false) {
			t.Errorf("level %d took a normal tenant's burst", level)
		}
		if got, want := BurstAllowed(level, true), level < 2; got != want {
			t.Errorf("level %d: low-priority burst allowed = %v, want %v", level, got, want)
		}
	}
}
