package loadgen

// This file owns the text reports: the final table, JSON and the
// per-interval CSV.

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes res as indented JSON.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("loadgen: write json: %w", err)
	}
	return nil
}

// WriteTable writes the human-readable final report.
func WriteTable(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	target := "max"
	if res.TargetRate > 0 {
		target = fmt.Sprintf("%.0f/s", res.TargetRate)
	}
	title := res.System
	if res.Label != "" {
		title += " (" + res.Label + ")"
	}
	p("%s · %s · target %s · %d producers · %d consumers (%s) · %d partitions", title, res.Scenario, target,
		res.Producers, res.Consumers, orDash(res.ConsumerMode), res.Partitions)
	p("sizes %s · keys %s · acks=%s · idempotent=%v · linger %.1fms · batch %d B · in-flight %d",
		res.Sizes, res.Keys, res.Acks, res.Idempotent, res.LingerMs, res.BatchBytes, res.InFlight)
	p("")
	p("\trecords\tmsgs/s\tMB/s\tfailed\tduplicates")
	p("produced\t%d\t%.0f\t%.2f\t%d\t", res.Produced.Records, res.Produced.MsgsPerSec, res.Produced.MBPerSec, res.Produced.Failed)
	p("consumed\t%d\t%.0f\t%.2f\t\t%d", res.Consumed.Records, res.Consumed.MsgsPerSec, res.Consumed.MBPerSec, res.Consumed.Duplicates)
	p("")
	p("latency (ms)\tcount\tp50\tp95\tp99\tp99.9\tmax")
	for _, row := range []struct {
		name string
		s    Summary
	}{{"publish ack", res.AckLatency}, {"end-to-end", res.E2ELatency}} {
		p("%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f", row.name, row.s.Count, row.s.P50Ms, row.s.P95Ms, row.s.P99Ms, row.s.P999Ms, row.s.MaxMs)
	}
	p("")
	p("consumer lag\tmax %d\tfinal %d\tcatch-up %.2fs\tcaught up %v", res.Lag.Max, res.Lag.Final, res.Lag.CatchUpSeconds, res.Lag.CaughtUp)
	if pk := res.Peak; pk != nil {
		p("peak\t%.0f/s → %.0f/s for %.1fs\tmax backlog %d\tdrain %.2fs (threshold %d, drained %v)",
			pk.SteadyRate, pk.PeakRate, pk.PeakSeconds, pk.MaxBacklog, pk.DrainSeconds, pk.DrainThreshold, pk.Drained)
	}
	if rp := res.Replay; rp != nil {
		p("replay\tprefilled %d in %.2fs (%.0f/s)\tread in %.2fs\t%.0f msgs/s\t%.2f MB/s",
			rp.Prefilled, rp.PrefillSeconds, rp.PrefillMsgsPerSec, rp.ReadSeconds, rp.ReadMsgsPerSec, rp.ReadMBPerSec)
	}
	if cr := res.Crash; cr != nil {
		p("consumer crash\tkilled at %.2fs\tpause %.2fs (resumed %v)\treplayed %d\tredelivered %d",
			cr.KilledAtSeconds, cr.PauseSeconds, cr.Resumed, cr.Replayed, cr.Redelivered)
	}
	if len(res.Errors) == 0 {
		p("errors\tnone")
	} else {
		kinds := make([]string, 0, len(res.Errors))
		for k := range res.Errors {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			p("errors\t%s\t%d", k, res.Errors[k])
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("loadgen: write table: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

var csvHeader = []string{"t_s", "phase", "sent_per_sec", "acked_per_sec", "consumed_per_sec",
	"produce_mb_per_sec", "consume_mb_per_sec", "ack_p50_ms", "ack_p99_ms", "e2e_p50_ms", "e2e_p99_ms",
	"lag", "backlog", "errors"}

// WriteCSV writes one row per sampling interval.
func WriteCSV(w io.Writer, res *Result) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	_ = cw.Write(csvHeader)
	for _, s := range res.Series {
		_ = cw.Write([]string{f(s.T), strings.ReplaceAll(s.Phase, ",", ";"), f(s.SentPerSec), f(s.AckedPerSec),
			f(s.ConsumedPerSec), f(s.ProduceMBps), f(s.ConsumeMBps), f(s.AckP50Ms), f(s.AckP99Ms),
			f(s.E2EP50Ms), f(s.E2EP99Ms), i(s.Lag), i(s.Backlog), i(s.Errors)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("loadgen: write csv: %w", err)
	}
	return nil
}
