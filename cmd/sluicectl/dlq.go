package main

// dlq.go owns the dead-letter commands: `dlq ls` (the DLQs with their depth
// and oldest dead letter's age), `dlq show` (dead letters with their
// history), `dlq redrive` (start a redrive, and with --wait follow its
// progress) and `dlq redrives` / `dlq cancel`. The wire types mirror
// broker/httpapi/queueapi's listing and redriveapi's View.

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type dlqListing struct {
	Topic      string      `json:"topic"`
	Partition  int32       `json:"partition"`
	LogStart   int64       `json:"log_start"`
	LogEnd     int64       `json:"log_end"`
	NextOffset int64       `json:"next_offset"`
	Messages   []deadEntry `json:"messages"`
}

type deadEntry struct {
	Offset      int64             `json:"offset"`
	TimestampMs int64             `json:"timestamp_ms"`
	MessageKey  *string           `json:"message_key,omitempty"`
	KeyBase64   *string           `json:"key_base64,omitempty"`
	MessageID   string            `json:"message_id,omitempty"`
	Headers     map[string]string `json:"headers"`
	History     *struct {
		SourceTopic     string `json:"source_topic"`
		SourcePartition int32  `json:"source_partition"`
		SourceOffset    int64  `json:"source_offset"`
		Group           string `json:"group"`
		Attempts        int    `json:"attempts"`
		ErrorClass      string `json:"error_class"`
		LastError       string `json:"last_error"`
		DeadReason      string `json:"dead_reason"`
		DueMs           int64  `json:"due_ms"`
		Failures        []struct {
			AtMs       int64  `json:"at_ms"`
			ErrorClass string `json:"error_class"`
			Error      string `json:"error"`
		} `json:"failures"`
	} `json:"history,omitempty"`
	HistoryError string `json:"history_error,omitempty"`
}

// deadAt is when a dead letter was dead-lettered.
func (d deadEntry) deadAt() int64 {
	if d.History != nil {
		return d.History.DueMs
	}
	return d.TimestampMs
}

type redriveView struct {
	ID         string `json:"id"`
	DLQ        string `json:"dlq"`
	Target     string `json:"target"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
	Rate       int    `json:"rate"`
	CreatedMs  int64  `json:"created_ms"`
	FinishedMs int64  `json:"finished_ms,omitempty"`
	Runner     *int32 `json:"runner,omitempty"`
	Total      int64  `json:"total"`
	Decided    int64  `json:"decided"`
	Redriven   int64  `json:"redriven"`
	Deduped    int64  `json:"deduped"`
	Skipped    int64  `json:"skipped"`
}

type dlqSummary struct {
	Topic        string  `json:"topic"`
	Partitions   int32   `json:"partitions"`
	Depth        int64   `json:"depth"`
	OldestMs     int64   `json:"oldest_ms,omitempty"`
	OldestAgeSec float64 `json:"oldest_age_seconds"`
}

// dlqLsFlags lists the DLQs: the topics named NAME, or every topic of the
// caller's whose name ends in ".dlq" (the default dead.letter.topic).
func dlqLsFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		var topics struct {
			Topics []struct {
				Name       string `json:"name"`
				Partitions int32  `json:"partitions"`
			} `json:"topics"`
		}
		if err := e.call(ctx, "GET", "/v1/topics", nil, nil, &topics); err != nil {
			return err
		}
		out := []dlqSummary{}
		for _, t := range topics.Topics {
			named := len(args) == 0 && strings.HasSuffix(t.Name, ".dlq")
			for _, a := range args {
				named = named || a == t.Name
			}
			if !named {
				continue
			}
			s := dlqSummary{Topic: t.Name, Partitions: t.Partitions}
			for p := range t.Partitions {
				var l dlqListing
				q := url.Values{"partition": {strconv.Itoa(int(p))}, "limit": {"1"}}
				if err := e.call(ctx, "GET", "/v1/topics/"+esc(t.Name)+"/messages", q, nil, &l); err != nil {
					return err
				}
				s.Depth += l.LogEnd - l.LogStart
				if len(l.Messages) > 0 {
					if at := l.Messages[0].deadAt(); s.OldestMs == 0 || at < s.OldestMs {
						s.OldestMs = at
					}
				}
			}
			if s.OldestMs > 0 {
				s.OldestAgeSec = time.Since(time.UnixMilli(s.OldestMs)).Round(time.Second).Seconds()
			}
			out = append(out, s)
		}
		if e.json {
			return e.writeJSON(map[string]any{"dlqs": out})
		}
		tw := e.table()
		fmt.Fprintln(tw, "DLQ\tPARTITIONS\tDEPTH\tOLDEST\tOLDEST AGE")
		for _, s := range out {
			age := "-"
			if s.OldestMs > 0 {
				age = (time.Duration(s.OldestAgeSec) * time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", s.Topic, s.Partitions, s.Depth, msTime(s.OldestMs), age)
		}
		return tw.Flush()
	}
}

// dlqShowFlags lists dead letters of one partition with their history.
func dlqShowFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	partition := fs.Int("partition", 0, "the DLQ partition")
	offset := fs.Int64("offset", -1, "first offset (default: the log start)")
	limit := fs.Int("limit", 20, "dead letters to show (1..1000)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "DLQ"); err != nil {
			return err
		}
		q := url.Values{"partition": {strconv.Itoa(*partition)}, "limit": {strconv.Itoa(*limit)}}
		if *offset >= 0 {
			q.Set("offset", strconv.FormatInt(*offset, 10))
		}
		var l dlqListing
		if err := e.call(ctx, "GET", "/v1/topics/"+esc(args[0])+"/messages", q, nil, &l); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(l)
		}
		fmt.Fprintf(e.stdout, "%s partition %d: offsets %d..%d, next %d\n", l.Topic, l.Partition, l.LogStart, l.LogEnd, l.NextOffset)
		for _, m := range l.Messages {
			key := "-"
			switch {
			case m.MessageKey != nil:
				key = *m.MessageKey
			case m.KeyBase64 != nil:
				key = "base64:" + *m.KeyBase64
			}
			fmt.Fprintf(e.stdout, "\noffset %d  key %s  message_id %s  dead %s\n", m.Offset, key, m.MessageID, msTime(m.deadAt()))
			if h := m.History; h != nil {
				fmt.Fprintf(e.stdout, "  from %s-%d@%d  group %s  attempts %d  reason %s\n", h.SourceTopic, h.SourcePartition, h.SourceOffset, h.Group, h.Attempts, h.DeadReason)
				for i, f := range h.Failures {
					fmt.Fprintf(e.stdout, "  %d. %s  %s  %s\n", i+1, msTime(f.AtMs), f.ErrorClass, f.Error)
				}
			}
			if m.HistoryError != "" {
				fmt.Fprintf(e.stdout, "  (history unreadable: %s)\n", m.HistoryError)
			}
		}
		return nil
	}
}

// offsetOrTime parses a --from/--to bound: a whole number is an offset, a
// RFC 3339 time a time.
func offsetOrTime(flagName, v string) (offset int64, ms int64, err error) {
	if v == "" {
		return 0, 0, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return n, 0, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, 0, usagef("--%s %q: want an offset or an RFC 3339 time", flagName, v)
	}
	return 0, t.UnixMilli(), nil
}

// dlqRedriveFlags starts a redrive and, with --wait, follows it.
func dlqRedriveFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	target := fs.String("target", "", "topic to redrive to: the source topic, or a shadow group's (required)")
	from := fs.String("from", "", "first DLQ offset, or an RFC 3339 time: dead-lettered at or after it")
	to := fs.String("to", "", "DLQ offset to stop before, or an RFC 3339 time: dead-lettered before it")
	key := fs.String("key", "", "only dead letters of this key")
	class := fs.String("class", "", "only dead letters whose last error class is this")
	rate := fs.Int("rate", 0, "records per second per partition (0: unpaced)")
	wait := fs.Bool("wait", false, "follow the progress until the redrive ends")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "DLQ"); err != nil {
			return err
		}
		if *target == "" {
			return usagef("--target is required")
		}
		req := map[string]any{"target": *target}
		fo, fms, err := offsetOrTime("from", *from)
		if err != nil {
			return err
		}
		tov, tms, err := offsetOrTime("to", *to)
		if err != nil {
			return err
		}
		for k, v := range map[string]int64{"from_offset": fo, "from_ms": fms, "to_offset": tov, "to_ms": tms} {
			if v != 0 {
				req[k] = v
			}
		}
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "key" {
				req["message_key"] = *key
			}
		})
		if *class != "" {
			req["error_class"] = *class
		}
		if *rate != 0 {
			req["rate"] = *rate
		}
		var v redriveView
		if err := e.call(ctx, "POST", "/v1/dlq/"+esc(args[0])+"/redrives", nil, req, &v); err != nil {
			return err
		}
		if !*wait {
			return e.printRedrive(v)
		}
		for v.State == "running" {
			if !e.json {
				fmt.Fprintf(e.stdout, "%s %s: %d/%d decided, %d redriven, %d skipped\n", v.ID, v.State, v.Decided, v.Total, v.Redriven, v.Skipped)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			if err := e.call(ctx, "GET", "/v1/redrives/"+esc(v.ID), nil, nil, &v); err != nil {
				return err
			}
		}
		if err := e.printRedrive(v); err != nil {
			return err
		}
		if v.State != "done" {
			return fmt.Errorf("redrive %s ended %s: %s", v.ID, v.State, v.Reason)
		}
		return nil
	}
}

func (e *env) printRedrive(v redriveView) error {
	if e.json {
		return e.writeJSON(v)
	}
	fmt.Fprintf(e.stdout, "redrive %s of %s to %s: %s", v.ID, v.DLQ, v.Target, v.State)
	if v.Reason != "" {
		fmt.Fprintf(e.stdout, " (%s)", v.Reason)
	}
	fmt.Fprintf(e.stdout, "; %d/%d decided, %d redriven, %d already there, %d skipped\n", v.Decided, v.Total, v.Redriven, v.Deduped, v.Skipped)
	return nil
}

// dlqRedrivesFlags lists a DLQ's redrives.
func dlqRedrivesFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "DLQ"); err != nil {
			return err
		}
		var out struct {
			Redrives []redriveView `json:"redrives"`
		}
		if err := e.call(ctx, "GET", "/v1/dlq/"+esc(args[0])+"/redrives", nil, nil, &out); err != nil {
			return err
		}
		if e.json {
			return e.writeJSON(out)
		}
		tw := e.table()
		fmt.Fprintln(tw, "ID\tTARGET\tSTATE\tDECIDED\tTOTAL\tREDRIVEN\tSKIPPED\tCREATED")
		for _, v := range out.Redrives {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", v.ID, v.Target, v.State, v.Decided, v.Total, v.Redriven, v.Skipped, msTime(v.CreatedMs))
		}
		return tw.Flush()
	}
}

// dlqCancelFlags cancels a redrive.
func dlqCancelFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args, "ID"); err != nil {
			return err
		}
		var v redriveView
		if err := e.call(ctx, "POST", "/v1/redrives/"+esc(args[0])+"/cancel", nil, map[string]any{}, &v); err != nil {
			return err
		}
		return e.printRedrive(v)
	}
}
