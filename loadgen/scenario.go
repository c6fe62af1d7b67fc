package loadgen

// This file owns the named scenarios: their default payloads and keys and
// the production phases each one runs.

import (
	"sort"
	"time"
)

// Scenario names.
const (
	ScenarioSteady        = "steady"
	ScenarioPeak          = "peak"
	ScenarioHotKey        = "hot-key"
	ScenarioLargePayloads = "large-payloads"
	ScenarioReplay        = "replay"
	ScenarioConsumerCrash = "consumer-crash"
)

type scenario struct {
	about   string
	sizes   string // default size distribution
	keys    string // default key distribution
	prefill bool   // write Config.Prefill records before consumers start
	crash   bool   // kill consumer 0 at Config.CrashAfter
	phases  func(c Config) []phase
}

// phase is a stretch of production at one rate. rate 0 means as fast as
// possible. untilDrained phases end early once the backlog has drained.
type phase struct {
	name         string
	rate         float64
	dur          time.Duration
	untilDrained bool
}

func steadyPhases(c Config) []phase {
	return []phase{{name: "steady", rate: c.Rate, dur: c.Duration}}
}

var scenarios = map[string]scenario{
	ScenarioSteady: {
		about: "constant rate (or as fast as possible with --rate 0)",
		sizes: "fixed:1KiB", keys: "uniform:10000", phases: steadyPhases,
	},
	ScenarioPeak: {
		about: "steady, then peak-factor x rate for peak-duration, then steady until the backlog drains",
		sizes: "fixed:1KiB", keys: "uniform:10000",
		phases: func(c Config) []phase {
			return []phase{
				{name: "steady", rate: c.Rate, dur: c.Duration},
				{name: "peak", rate: c.Rate * c.PeakFactor, dur: c.PeakDuration},
				{name: "drain", rate: c.Rate, dur: c.DrainTimeout, untilDrained: true},
			}
		},
	},
	ScenarioHotKey: {
		about: "steady with keys Zipf-skewed over 1000 keys (s=1.5): a few partitions take most records",
		sizes: "fixed:1KiB", keys: "zipf:1000:1.5", phases: steadyPhases,
	},
	ScenarioLargePayloads: {
		about: "steady with 64-256 KiB payloads",
		sizes: "mix:64KiB*70,128KiB*20,256KiB*10", keys: "none", phases: steadyPhases,
	},
	ScenarioReplay: {
		about: "prefill the topic, then the consumers read it from the earliest offset",
		sizes: "fixed:1KiB", keys: "uniform:10000", prefill: true,
		phases: func(Config) []phase { return nil },
	},
	ScenarioConsumerCrash: {
		about: "steady with a consumer group; member 0 is killed (no leave, no commit) at crash-after",
		sizes: "fixed:1KiB", keys: "uniform:10000", crash: true, phases: steadyPhases,
	},
}

// Scenarios lists the scenario names, sorted.
func Scenarios() []string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ScenarioHelp describes a scenario in one line.
func ScenarioHelp(name string) string { return scenarios[name].about }
