// Package checker reads a chaos history (chaos/history) and reports the
// anomalies it contains, under Jepsen's names for Kafka (lost-write, unseen,
// duplicate, inconsistent-offsets, nonmonotonic-send, poll-skip,
// nonmonotonic-poll, aborted-read, unexpected-read) and Sluice's own
// (replica-divergence, stale-generation-commit, offset-regression,
// handover-skip, epoch-regression, tiered-read-mismatch). Each anomaly is
// defined exactly in the chaos package doc (chaos/doc.go), in one place.
//
// Check is a pure function of the history: no I/O, no goroutines, no clock.
// Its Report has a count for every name (zeros included), up to MaxExamples
// anomalies of each kind with their keys, offsets and an excerpt of the
// events involved, and what could not be checked; it renders as a text
// table (WriteText) or JSON (WriteJSON). Report.OK is the runner's verdict.
//
// # Files
//
//	check.go     Check: the order of the checks
//	index.go     one pass over the history: sends, reads, final log, commits, replicas
//	reads.go     aborted-read, unexpected-read, inconsistent-offsets, duplicate, lost-write, unseen
//	order.go     nonmonotonic-send, poll-skip, nonmonotonic-poll, handover-skip
//	groups.go    stale-generation-commit, offset-regression, the committed-offset bound
//	replicas.go  replica-divergence, epoch-regression, tiered-read-mismatch
//	report.go    Kind, Anomaly, Report and its renderings
package checker
