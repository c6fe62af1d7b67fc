package checker

// This file owns Check, the one entry point: it builds the index and runs
// every check in a fixed order, so a history always yields the same Report.
//
// Invariant: Check is pure and deterministic: no I/O, no clock, no map
// iteration order in its output.
// Invariant: Check is near linear in the history's events and records (map
// operations and a few sorts); a 100k-event history checks in well under a
// second (BenchmarkCheck).

import (
	"github.com/sluice-mq/sluice/chaos/history"
)

// Check reads a history (the events after its header, in file order) and
// reports every anomaly of Kinds() it contains.
func Check(h []history.Event) Report {
	c := newCollector(h)
	x := buildIndex(h, c)
	for _, p := range sortedPartitions(x.needFinal) {
		if _, ok := x.logs[p]; !ok {
			c.note("partition %d has no final event (did the drain finish?): lost-write, unseen, poll-skip, handover-skip and tiered-read-mismatch are not checked there", p)
		}
	}
	checkValues(x, c)
	checkLost(x, c)
	checkSends(x, c)
	checkPolls(x, c)
	checkCommits(x, c)
	checkReplicas(x, c)
	checkEpochs(x, c)
	checkTiered(x, c)
	return c.report(x.stats)
}
