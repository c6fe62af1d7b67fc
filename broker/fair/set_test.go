package fair

import (
	"context"
	"testing"
)

// TestSetWithoutLanesRunsAtOnce: the zero Set (the overhead benchmark's
// "lanes off") runs every function at once in every lane, as a nil Set
// does, instead of dereferencing a lane it does not have.
func TestSetWithoutLanesRunsAtOnce(t *testing.T) {
	for name, s := range map[string]*Set{"nil": nil, "zero": {}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may wait: a cancelled context still runs
		ran := 0
		if err := s.RunTimed(ctx, "a", func() { ran++ }); err != nil {
			t.Fatalf("%s: RunTimed: %v", name, err)
		}
		var tail *Lane
		if s != nil {
			tail = s.Tail
		}
		if err := s.Run(ctx, tail, "a", func() float64 { ran++; return 1 }); err != nil {
			t.Fatalf("%s: Run: %v", name, err)
		}
		done, err := s.Gate(ctx, "a")
		if err != nil {
			t.Fatalf("%s: Gate: %v", name, err)
		}
		done(1 << 20)
		s.SetWeight(func(string) float64 { return 2 })
		if ran != 2 {
			t.Fatalf("%s: ran %d functions, want 2", name, ran)
		}
	}
}
