package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestOffsetClockFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	c := newOffsetClock(path, zerolog.Nop())
	if d := time.Until(c.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("no file: clock is %v off the wall clock", d)
	}
	for _, tc := range []struct {
		text string
		want time.Duration
	}{{"2h\n", 2 * time.Hour}, {"-90m", -90 * time.Minute}, {"not a duration", -90 * time.Minute}, {"0s", 0}} {
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		c.read()
		got := time.Until(c.Now())
		if got < tc.want-time.Second || got > tc.want+time.Second {
			t.Fatalf("file %q: clock is %v off the wall clock, want %v", tc.text, got, tc.want)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c.read()
	if d := time.Until(c.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("file removed: clock is %v off the wall clock", d)
	}
}
