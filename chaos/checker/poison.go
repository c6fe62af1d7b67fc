package checker

// poison.go owns CheckPoison: the promises of poison messages (issue 22)
// over what the poison family recorded outside the history (its own
// producer, HTTP queue consumers, operator and final read of the dead-letter
// topics; chaos/runner/faults_poison.go).
//
// The anomalies are defined in the chaos package doc ("Poison messages").
//
// Invariant: a pure function of its input; a record whose publish outcome
// is unknown is judged by nothing here (it is not in Acked).

import (
	"fmt"
	"sort"
)

// Kinds of poison-family records: how the consumer treats each delivery.
const (
	PoisonOK     = "ok"     // processed at once
	PoisonFlaky  = "flaky"  // fails its first delivery (transient), processed at the next
	PoisonPoison = "poison" // fails every delivery, until an operator repairs it (resume)
)

// PoisonRecord is a record the family's producer had acknowledged.
type PoisonRecord struct {
	Topic     string
	Strict    bool // the topic's delivery.order is per-key-strict
	Partition int32
	Offset    int64
	Key, ID   string // the message key and message_id
	Kind      string
}

// Kinds of PoisonEvent.
const (
	EventProcessed = "processed" // the consumer's handler succeeded (before its ack)
	EventSkip      = "skip"      // the operator asked keys:skip of a pause at Offset
	EventResume    = "resume"    // the operator asked keys:resume of a pause at Offset
	EventNack      = "nack"      // a consumer's nack and its answer (Note); judged by nothing
)

// PoisonEvent is one step of a consumer or of the operator; Seq orders
// them as they happened (one counter for the whole run).
type PoisonEvent struct {
	Seq       int
	Kind      string
	Topic     string // the source topic (a retry tier's copy: its source)
	Partition int32  // the source partition
	Offset    int64  // the source offset; -1 for a retry tier's copy
	Key, ID   string
	Note      string `json:",omitempty"` // a nack's answer, for the record
}

// DeadLetter is one record of a dead-letter topic read after the run, with
// its parsed sluice.retry.* headers.
type DeadLetter struct {
	ID, Reason      string
	Attempt         int
	History         int // entries of sluice.retry.history.*
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	Err             string // the headers did not parse
}

// PoisonRun is everything the family recorded.
type PoisonRun struct {
	Acked  []PoisonRecord
	Events []PoisonEvent
	DLQ    []DeadLetter
}

// PoisonCounts summarises a run for the report.
type PoisonCounts struct {
	Acked, AckedPoison          int
	Processed, Duplicates       int            // distinct ids processed; extra processings
	DeadLettered                map[string]int // distinct acknowledged ids by dead reason
	Skips, Resumes, OrderChecks int
}

// CheckPoison lists the anomalies of run, sorted, and its counts.
func CheckPoison(run PoisonRun) ([]string, PoisonCounts) {
	cnt := PoisonCounts{DeadLettered: map[string]int{}}
	processed := map[string]int{}
	for _, e := range run.Events {
		switch e.Kind {
		case EventProcessed:
			processed[e.ID]++
		case EventSkip:
			cnt.Skips++
		case EventResume:
			cnt.Resumes++
		}
	}
	dead := map[string][]DeadLetter{}
	for _, d := range run.DLQ {
		dead[d.ID] = append(dead[d.ID], d)
	}
	var out []string
	for _, r := range run.Acked {
		cnt.Acked++
		if r.Kind == PoisonPoison {
			cnt.AckedPoison++
		}
		n, ds := processed[r.ID], dead[r.ID]
		if n > 0 {
			cnt.Processed++
			cnt.Duplicates += n - 1
		}
		if len(ds) > 0 {
			cnt.DeadLettered[ds[0].Reason]++
		}
		if n == 0 && len(ds) == 0 {
			out = append(out, fmt.Sprintf("poison-lost: %s (%s %s, %s/%d/%d) acknowledged, neither processed nor dead-lettered",
				r.ID, r.Kind, r.Key, r.Topic, r.Partition, r.Offset))
		}
		for _, d := range ds {
			switch {
			case d.Err != "":
				out = append(out, fmt.Sprintf("dead-letter-without-history: %s in the DLQ: %s", r.ID, d.Err))
			case d.History < 1 || d.History != d.Attempt || d.Reason == "":
				out = append(out, fmt.Sprintf("dead-letter-without-history: %s in the DLQ with attempt %d, %d history entries, reason %q",
					r.ID, d.Attempt, d.History, d.Reason))
			case d.SourceTopic != r.Topic || d.SourcePartition != r.Partition || d.SourceOffset != r.Offset:
				out = append(out, fmt.Sprintf("dead-letter-without-history: %s in the DLQ names its source %s/%d/%d, acknowledged at %s/%d/%d",
					r.ID, d.SourceTopic, d.SourcePartition, d.SourceOffset, r.Topic, r.Partition, r.Offset))
			}
		}
		if len(ds) > 0 && r.Kind != PoisonPoison {
			out = append(out, fmt.Sprintf("healthy-dead-lettered: %s (%s, %s/%d/%d) is in the DLQ (%s), yet it never failed past its first delivery",
				r.ID, r.Kind, r.Topic, r.Partition, r.Offset, ds[0].Reason))
		}
	}
	order, checks := strictOrder(run)
	cnt.OrderChecks = checks
	out = append(out, order...)
	sort.Strings(out)
	return out, cnt
}

// laneKey is one key of one partition of a strict topic.
type laneKey struct {
	topic     string
	partition int32
	key       string
}

// strictOrder replays the events in order: a record of a strict topic may
// be processed only once every acknowledged record before it of its key
// was processed or skipped. The first breach of each key is reported.
func strictOrder(run PoisonRun) ([]string, int) {
	offsets := map[laneKey][]int64{} // acknowledged offsets, sorted
	for _, r := range run.Acked {
		if r.Strict {
			k := laneKey{r.Topic, r.Partition, r.Key}
			offsets[k] = append(offsets[k], r.Offset)
		}
	}
	for _, offs := range offsets {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	}
	settled := map[laneKey]map[int64]bool{}
	prefix := map[laneKey]int{} // offsets[k][:prefix[k]] are settled
	reported := map[laneKey]bool{}
	events := append([]PoisonEvent(nil), run.Events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Seq < events[j].Seq })
	var out []string
	checks := 0
	for _, e := range events {
		k := laneKey{e.Topic, e.Partition, e.Key}
		offs, ok := offsets[k]
		if !ok || e.Offset < 0 || (e.Kind != EventProcessed && e.Kind != EventSkip) {
			continue
		}
		if settled[k] == nil {
			settled[k] = map[int64]bool{}
		}
		if e.Kind == EventProcessed {
			checks++
			idx := sort.Search(len(offs), func(i int) bool { return offs[i] >= e.Offset })
			if prefix[k] < idx && !reported[k] {
				reported[k] = true
				out = append(out, fmt.Sprintf("strict-order: %s/%d key %s: offset %d processed (event %d) before offset %d was processed or skipped",
					e.Topic, e.Partition, e.Key, e.Offset, e.Seq, offs[prefix[k]]))
			}
		}
		settled[k][e.Offset] = true
		for prefix[k] < len(offs) && settled[k][offs[prefix[k]]] {
			prefix[k]++
		}
	}
	return out, checks
}
