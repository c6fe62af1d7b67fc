package replica

// The simulation tests: many seeds within a time budget, one seed on
// demand (-seed), a determinism check, and the planted bugs the checker
// must catch.

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	flagSeed    = flag.Int64("seed", -1, "run only this simulation seed, with a trace on failure")
	flagSeeds   = flag.Int("seeds", 1000, "number of simulation seeds for TestSim")
	flagTrace   = flag.Bool("simtrace", false, "print the event trace of -seed")
	flagSimLong = flag.Bool("simlong", false, "full-length schedules even under -race or -short")
)

func shortSchedules(t testing.TB) bool {
	return !*flagSimLong && (raceEnabled || testing.Short())
}

type simResult struct {
	seed    uint64
	failure string
	hash    uint64
	steps   int
	records int
	acked   int
	trace   string
}

func runSeed(seed uint64, short bool, b bugs, cb controllerBugs, trace bool) simResult {
	s := newSim(seed, short, b, cb)
	if trace {
		s.trace = &strings.Builder{}
	}
	s.run()
	res := simResult{seed: seed, failure: s.failure, hash: s.hash.Sum64(), steps: s.steps, records: len(s.records)}
	for _, r := range s.records {
		if r.acked {
			res.acked++
		}
	}
	if s.trace != nil {
		res.trace = s.trace.String()
	}
	return res
}

// forSeeds runs seeds [first, first+n) on all CPUs and stops at the first
// failure (reporting the lowest failing seed it saw).
func forSeeds(first uint64, n int, fn func(seed uint64) simResult) (ran int, fail *simResult, stats simResult) {
	var next atomic.Uint64
	next.Store(first)
	var mu sync.Mutex
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				seed := next.Add(1) - 1
				if seed >= first+uint64(n) {
					return
				}
				r := fn(seed)
				mu.Lock()
				ran++
				stats.steps += r.steps
				stats.records += r.records
				stats.acked += r.acked
				if r.failure != "" {
					if fail == nil || r.seed < fail.seed {
						fail = &r
					}
					stop.Store(true)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ran, fail, stats
}

func TestSim(t *testing.T) {
	short := shortSchedules(t)
	if *flagSeed >= 0 {
		r := runSeed(uint64(*flagSeed), short, bugs{}, controllerBugs{}, true)
		if *flagTrace || r.failure != "" {
			t.Log("\n" + r.trace)
		}
		if r.failure != "" {
			t.Fatalf("seed %d: %s", r.seed, r.failure)
		}
		t.Logf("seed %d: %d steps, %d records, %d acknowledged, hash %x", r.seed, r.steps, r.records, r.acked, r.hash)
		return
	}
	start := time.Now()
	ran, fail, st := forSeeds(1, *flagSeeds, func(seed uint64) simResult {
		return runSeed(seed, short, bugs{}, controllerBugs{}, false)
	})
	t.Logf("%d seeds in %v (short schedules %v): %d steps, %d records proposed, %d acknowledged",
		ran, time.Since(start).Round(time.Millisecond), short, st.steps, st.records, st.acked)
	if fail != nil {
		t.Fatalf("seed %d: %s\nrerun: go test ./broker/replica/ -run 'TestSim$' -seed %d -v%s",
			fail.seed, fail.failure, fail.seed, map[bool]string{true: " -short", false: ""}[short && !raceEnabled])
	}
}

func TestSimDeterministic(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		a := runSeed(seed, true, bugs{}, controllerBugs{}, false)
		b := runSeed(seed, true, bugs{}, controllerBugs{}, false)
		if a.hash != b.hash || a.steps != b.steps {
			t.Fatalf("seed %d: event hash %x (%d steps) then %x (%d steps)", seed, a.hash, a.steps, b.hash, b.steps)
		}
	}
}

// TestSimPlantedBugs: each planted bug must be caught within a few hundred seeds.
func TestSimPlantedBugs(t *testing.T) {
	cases := []struct {
		name  string
		bugs  bugs
		cbugs controllerBugs
	}{
		{"hw-ignores-epoch-start", bugs{hwIgnoresEpochStart: true}, controllerBugs{}},
		{"skip-divergence", bugs{skipDivergence: true}, controllerBugs{}},
		{"ack-fence-early", bugs{ackFenceEarly: true}, controllerBugs{}},
		{"winner-ignores-up-to-date", bugs{}, controllerBugs{winnerIgnoresUpToDate: true}},
	}
	const limit = 500
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran, fail, _ := forSeeds(1, limit, func(seed uint64) simResult {
				return runSeed(seed, true, tc.bugs, tc.cbugs, false)
			})
			if fail == nil {
				t.Fatalf("planted bug not caught in %d seeds", ran)
			}
			t.Logf("caught at seed %d (of %d run): %s", fail.seed, ran, fail.failure)
		})
	}
}

var _ = fmt.Sprint
