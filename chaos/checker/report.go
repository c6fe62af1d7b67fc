package checker

// This file owns the result of a check: the anomaly names, the Report with
// its counts and examples, and its two renderings (a text table, JSON).
//
// Invariant: Counts has an entry for every name in Kinds(), zero or not.
// Invariant: Anomalies holds at most MaxExamples anomalies per kind, the
// first ones found in a deterministic order, so two checks of one history
// render byte-identical reports.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sluice-mq/sluice/chaos/history"
)

// Kind names an anomaly. Jepsen's names are used where Jepsen has one, so
// results compare with its Kafka analyses.
type Kind string

// Jepsen's anomalies (defined in chaos/doc.go).
const (
	LostWrite           Kind = "lost-write"
	Unseen              Kind = "unseen"
	Duplicate           Kind = "duplicate"
	InconsistentOffsets Kind = "inconsistent-offsets"
	NonmonotonicSend    Kind = "nonmonotonic-send"
	PollSkip            Kind = "poll-skip"
	NonmonotonicPoll    Kind = "nonmonotonic-poll"
	AbortedRead         Kind = "aborted-read"
	UnexpectedRead      Kind = "unexpected-read"
)

// Sluice's own anomalies (defined in chaos/doc.go).
const (
	ReplicaDivergence     Kind = "replica-divergence"
	StaleGenerationCommit Kind = "stale-generation-commit"
	OffsetRegression      Kind = "offset-regression"
	HandoverSkip          Kind = "handover-skip"
	EpochRegression       Kind = "epoch-regression"
	TieredReadMismatch    Kind = "tiered-read-mismatch"
)

// Kinds lists every anomaly name in report order.
func Kinds() []Kind {
	return []Kind{
		LostWrite, Unseen, Duplicate, InconsistentOffsets, NonmonotonicSend,
		PollSkip, NonmonotonicPoll, AbortedRead, UnexpectedRead,
		ReplicaDivergence, StaleGenerationCommit, OffsetRegression,
		HandoverSkip, EpochRegression, TieredReadMismatch,
	}
}

// MaxExamples is how many anomalies of each kind a Report keeps; Counts
// counts them all.
const MaxExamples = 20

// maxExcerpt bounds the events quoted per anomaly, and trimmedRecords the
// records or entries kept of one quoted poll, tiered read or replica log.
const (
	maxExcerpt     = 8
	trimmedRecords = 12
)

// Anomaly is one instance of an anomaly.
type Anomaly struct {
	Kind      Kind              `json:"kind"`
	Partition history.Partition `json:"partition"`
	Offsets   []history.Offset  `json:"offsets,omitempty"`
	Keys      []string          `json:"keys,omitempty"`
	Values    []string          `json:"values,omitempty"`
	Detail    string            `json:"detail"`
	Excerpt   []Excerpt         `json:"excerpt,omitempty"`
}

// Excerpt quotes one event of the history involved in an anomaly.
type Excerpt struct {
	// Index is the event's position in the checked slice; in a history file
	// it is on line Index+2 (the header is line 1).
	Index int `json:"index"`
	// Omitted counts the records (or replica entries) left out of a long
	// event: only those near the anomaly's offsets are quoted.
	Omitted int `json:"omitted,omitempty"`
	// Event is the event as a history line.
	Event json.RawMessage `json:"event"`
}

// Stats summarises the checked history.
type Stats struct {
	Events      int `json:"events"`
	Sends       int `json:"sends"`
	Acked       int `json:"acked"`
	Failed      int `json:"failed"`
	Unknown     int `json:"unknown"`
	Polls       int `json:"polls"`
	RecordsRead int `json:"records_read"`
	Commits     int `json:"commits"`
	Partitions  int `json:"partitions"`
	Faults      int `json:"faults"`
	// BelowLogStart counts acknowledged sends below their partition's final
	// log start (retention took them); lost-write cannot judge those.
	BelowLogStart int `json:"below_log_start"`
}

// Report is the result of Check.
type Report struct {
	Stats     Stats        `json:"stats"`
	Counts    map[Kind]int `json:"counts"`
	Anomalies []Anomaly    `json:"anomalies"`
	// Unchecked lists what the history did not allow to check and why (a
	// partition without a Final event, a value sent twice). A report with
	// any is not OK: a runner that lost its drain must not pass.
	Unchecked []string `json:"unchecked,omitempty"`
}

// OK reports whether the history has no anomaly and was fully checkable.
func (r Report) OK() bool {
	for _, n := range r.Counts {
		if n != 0 {
			return false
		}
	}
	return len(r.Unchecked) == 0
}

// Total is the number of anomalies of every kind.
func (r Report) Total() int {
	t := 0
	for _, n := range r.Counts {
		t += n
	}
	return t
}

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("checker: write report: %w", err)
	}
	return nil
}

// WriteText writes the table of anomaly counts (every name, zeros too),
// then what was unchecked, then each kept anomaly with its excerpt.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	s := r.Stats
	fmt.Fprintf(tw, "events %d\tsends %d (ok %d, fail %d, info %d)\tpolls %d (%d records)\tcommits %d\tpartitions %d\tfaults %d\n",
		s.Events, s.Sends, s.Acked, s.Failed, s.Unknown, s.Polls, s.RecordsRead, s.Commits, s.Partitions, s.Faults)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("checker: write report: %w", err)
	}
	fmt.Fprintln(w)
	width := len("anomaly")
	for _, k := range Kinds() {
		width = max(width, len(k))
	}
	fmt.Fprintf(w, "%-*s  %7s\n", width, "anomaly", "count")
	for _, k := range Kinds() {
		fmt.Fprintf(w, "%-*s  %7d\n", width, k, r.Counts[k])
	}
	verdict := "OK"
	if !r.OK() {
		verdict = fmt.Sprintf("FAIL: %d anomalies, %d unchecked", r.Total(), len(r.Unchecked))
	}
	fmt.Fprintf(w, "\n%s\n", verdict)
	for _, u := range r.Unchecked {
		fmt.Fprintf(w, "unchecked: %s\n", u)
	}
	for _, a := range r.Anomalies {
		fmt.Fprintf(w, "\n%s partition %d", a.Kind, a.Partition)
		if len(a.Offsets) > 0 {
			fmt.Fprintf(w, " offsets %v", a.Offsets)
		}
		if len(a.Keys) > 0 {
			fmt.Fprintf(w, " keys %s", strings.Join(a.Keys, ","))
		}
		if len(a.Values) > 0 {
			fmt.Fprintf(w, " values %s", strings.Join(a.Values, ","))
		}
		fmt.Fprintf(w, "\n  %s\n", a.Detail)
		for _, e := range a.Excerpt {
			omitted := ""
			if e.Omitted > 0 {
				omitted = fmt.Sprintf(" (%d omitted)", e.Omitted)
			}
			fmt.Fprintf(w, "  event %d%s: %s\n", e.Index, omitted, e.Event)
		}
	}
	return nil
}

// String is WriteText into a string.
func (r Report) String() string {
	var b strings.Builder
	_ = r.WriteText(&b) // a strings.Builder does not fail
	return b.String()
}

// collector counts anomalies and keeps the first MaxExamples of each kind.
type collector struct {
	h         []history.Event
	counts    map[Kind]int
	kept      []Anomaly
	unchecked []string
	noted     map[string]bool
}

func newCollector(h []history.Event) *collector {
	c := &collector{h: h, counts: make(map[Kind]int), noted: make(map[string]bool)}
	for _, k := range Kinds() {
		c.counts[k] = 0
	}
	return c
}

// add counts a and, while fewer than MaxExamples of its kind are kept,
// quotes the events at idxs (trimmed around a's offsets) and keeps it.
func (c *collector) add(a Anomaly, idxs ...int) {
	c.counts[a.Kind]++
	if c.counts[a.Kind] > MaxExamples {
		return
	}
	seen := make(map[int]bool)
	for _, i := range idxs {
		if i < 0 || seen[i] || len(a.Excerpt) == maxExcerpt {
			continue
		}
		seen[i] = true
		a.Excerpt = append(a.Excerpt, excerpt(c.h, i, a.Offsets))
	}
	c.kept = append(c.kept, a)
}

// note records something the history did not allow to check, once.
func (c *collector) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if !c.noted[s] {
		c.noted[s] = true
		c.unchecked = append(c.unchecked, s)
	}
}

func (c *collector) report(s Stats) Report {
	order := make(map[Kind]int)
	for i, k := range Kinds() {
		order[k] = i
	}
	// Each check emits in a deterministic order; sorting by kind keeps the
	// report grouped while keeping that order within a kind.
	sort.SliceStable(c.kept, func(i, j int) bool { return order[c.kept[i].Kind] < order[c.kept[j].Kind] })
	return Report{Stats: s, Counts: c.counts, Anomalies: c.kept, Unchecked: c.unchecked}
}

// excerpt quotes event i, keeping of a long event only the records near the
// focus offsets.
func excerpt(h []history.Event, i int, focus []history.Offset) Excerpt {
	ev := h[i]
	omitted := 0
	switch e := ev.(type) {
	case history.Poll:
		e.Records, omitted = trimRecords(e.Records, focus)
		ev = e
	case history.TieredRead:
		e.Records, omitted = trimRecords(e.Records, focus)
		ev = e
	case history.ReplicaLog:
		e.Entries, omitted = trimEntries(e.Entries, focus)
		ev = e
	}
	b, err := history.MarshalEvent(ev)
	if err != nil {
		b, _ = json.Marshal("unquotable event: " + err.Error())
	}
	return Excerpt{Index: i, Omitted: omitted, Event: b}
}

func near(o history.Offset, focus []history.Offset) bool {
	if len(focus) == 0 {
		return true
	}
	for _, f := range focus {
		if o >= f-2 && o <= f+2 {
			return true
		}
	}
	return false
}

func trimRecords(rs []history.Record, focus []history.Offset) ([]history.Record, int) {
	return trimNear(rs, focus, func(r history.Record) history.Offset { return r.Offset })
}

func trimEntries(es []history.ReplicaEntry, focus []history.Offset) ([]history.ReplicaEntry, int) {
	return trimNear(es, focus, func(e history.ReplicaEntry) history.Offset { return e.Offset })
}

// trimNear keeps at most trimmedRecords of xs, those near an offset of
// focus, and says how many it left out; a short xs is kept whole.
func trimNear[T any](xs []T, focus []history.Offset, offset func(T) history.Offset) ([]T, int) {
	if len(xs) <= trimmedRecords {
		return xs, 0
	}
	var kept []T
	for _, x := range xs {
		if near(offset(x), focus) && len(kept) < trimmedRecords {
			kept = append(kept, x)
		}
	}
	return kept, len(xs) - len(kept)
}
