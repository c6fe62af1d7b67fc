package canary

// This file owns the canary's verdict (availability): a pure core, its
// clock and its store injected, that turns the publisher's rounds and the
// reconciler's overdue results into the sluice_canary_available gauge, the
// outage count and the outage log lines, and keeps a mark in the store
// (format in doc.go) so that the run after a crash of its broker reports
// the outage the crash caused.
//
// Invariants (all state guarded by mu):
//   - Each outage is counted once, when it starts: by the run that sees a
//     round fail or a result go overdue, or, for an outage that began when
//     its broker stopped without a clean stop (killed, crashed), by the
//     next run, at its start, from its predecessor's last mark.
//   - The mark says "down" from the moment an outage is counted until the
//     canary is available again, so a run that dies during an outage
//     leaves it to the next run to carry on, not to count again.
//   - While available the mark is rewritten at most once per every (and
//     at each change of verdict), so an outage reported from a mark begins
//     less than every before the last moment its run saw the canary
//     available: its length is overstated by less than every, never
//     understated.
//   - A clean stop while available leaves a "stopped" mark: a broker
//     stopped on purpose is no outage of the canary's.

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// markState is what a run's last mark says of its canary.
type markState byte

// The states of a mark (their byte values are stored: doc.go).
const (
	markNone    markState = 0 // no mark stored
	markUp      markState = 1 // available at the mark's time; the run may have died since
	markDown    markState = 2 // in an outage since the mark's time, counted already
	markStopped markState = 3 // stopped cleanly at the mark's time, available until then
)

// mark is what a run leaves in the store for the next run.
type mark struct {
	state markState
	at    time.Time
}

// causeNotRunning is the cause logged for an outage that spans the
// canary's restart (docs/chaos.md's check greps for it).
const causeNotRunning = "the broker was not running"

// availability is the canary's verdict: up while the last round was
// acknowledged in full and no acknowledged record waits for its result
// past the deadline. It is updated by both loops as they learn something,
// so the gauge and the outage count follow every change, not a sample.
// Each change is logged too (a warning when an outage starts, with its
// cause; a line with its length when it ends; a line when a run first
// finds its canary available), so an outage stays on record after a
// restart resets the counters.
type availability struct {
	m   *metrics
	log zerolog.Logger
	now func() time.Time
	// save writes the mark the next run takes over (nil: none is kept);
	// every is the least time between two marks saved while available.
	save  func(mark) error
	every time.Duration
	mu    sync.Mutex
	// roundOK: the last round was acknowledged in full; overdue: a record
	// waits past the deadline; up: the verdict last exported; wasUp: it
	// was up once, in this run or (an outage carried over) before it;
	// downSince: when the current outage began; savedAt: when the last
	// mark was saved.
	roundOK, overdue, up, wasUp bool
	downSince, savedAt          time.Time
}

func (a *availability) round(ok bool) { a.set(func() { a.roundOK = ok }) }

func (a *availability) late(overdue bool) { a.set(func() { a.overdue = overdue }) }

func (a *availability) clock() time.Time {
	if a.now == nil {
		return time.Now()
	}
	return a.now()
}

// resume takes over prev, the mark the previous run left, before this
// run's first round: a run that was available when its broker stopped
// without a clean stop left an outage that began at its last mark, which
// this run counts and logs; one that died during an outage left that
// outage to carry on (counted by the run that saw it start). Either way
// the first round acknowledged in full logs "canary available again" with
// the outage's length from its start.
func (a *availability) resume(prev mark) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch prev.state {
	case markUp:
		a.m.outages.Inc()
		a.wasUp, a.downSince = true, prev.at
		a.store(mark{state: markDown, at: prev.at})
		a.log.Warn().Str("cause", causeNotRunning).Time("since", prev.at).Msg("canary unavailable")
	case markDown:
		a.wasUp, a.downSince = true, prev.at
		a.log.Info().Str("cause", causeNotRunning).Time("since", prev.at).Msg("canary outage carried over from an earlier run")
	case markNone, markStopped:
		// A first run, or its broker was stopped on purpose: no outage.
	}
}

// stop is the run's clean end (its context cancelled): an available
// canary leaves a stopped mark; an unavailable one leaves its down mark,
// and the next run carries that outage on.
func (a *availability) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.up {
		a.store(mark{state: markStopped, at: a.clock()})
	}
}

func (a *availability) set(change func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	change()
	now := a.clock()
	up := a.roundOK && !a.overdue
	// The mark is saved before the line is logged: a log that says the
	// canary was available is never followed by a run that finds no mark.
	switch {
	case a.up && !up:
		a.m.outages.Inc()
		a.downSince = now
		a.store(mark{state: markDown, at: now})
		cause := "a round was not acknowledged in full"
		if a.overdue {
			cause = "an acknowledged record has no result past the deadline"
		}
		a.log.Warn().Str("cause", cause).Msg("canary unavailable")
	case !a.up && up && a.wasUp:
		a.store(mark{state: markUp, at: now})
		a.log.Info().Dur("outage_ms", max(0, now.Sub(a.downSince))).Msg("canary available again")
	case !a.up && up:
		a.store(mark{state: markUp, at: now})
		a.log.Info().Msg("canary available")
	case up && now.Sub(a.savedAt) >= a.every:
		a.store(mark{state: markUp, at: now})
	}
	a.up = up
	a.wasUp = a.wasUp || up
	if up {
		a.m.available.Set(1)
	} else {
		a.m.available.Set(0)
	}
}

// store saves m if a store is injected; a failure is logged and the mark
// tried again no sooner than every (the verdict does not depend on it).
func (a *availability) store(m mark) {
	if a.save == nil {
		return
	}
	a.savedAt = a.clock()
	if err := a.save(m); err != nil {
		a.log.Warn().Err(err).Msg("canary: its mark for the next run not saved")
	}
}
