package main

// top.go owns `sluicectl top`: the partitions taking the most records,
// with their ingress and hottest keys, from GET /v1/topics/{t}/hot-keys
// (every topic of GET /v1/topics without --topic). Rates are the
// leaders', decayed over about ten seconds; a key's rate is an upper
// bound, over by at most its error (the broker's space-saving sketch).

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/url"
	"slices"
	"strconv"
)

type keyRate struct {
	Key           string  `json:"key"`
	KeyBytes      int     `json:"key_bytes"`
	Truncated     bool    `json:"truncated,omitempty"`
	RecordsPerSec float64 `json:"records_per_sec"`
	ErrorPerSec   float64 `json:"error_per_sec"`
	Share         float64 `json:"share"`
}

type partitionHotKeys struct {
	Partition     int32     `json:"partition"`
	Leader        int32     `json:"leader"`
	BytesPerSec   float64   `json:"bytes_per_sec"`
	RecordsPerSec float64   `json:"records_per_sec"`
	Keys          []keyRate `json:"keys"`
	Error         string    `json:"error,omitempty"`
}

type hotKeys struct {
	Topic         string             `json:"topic"`
	WindowSeconds float64            `json:"window_seconds"`
	Counters      int                `json:"counters"`
	Partitions    []partitionHotKeys `json:"partitions"`
}

// maxTopKeys is the most keys a partition's sketch holds (hotkeys.K).
const maxTopKeys = 16

func topFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	topic := fs.String("topic", "", "one topic (default: every topic)")
	keys := fs.Int("keys", 1, "hot keys shown per partition, 1 to 16")
	limit := fs.Int("limit", 20, "partitions shown, busiest first (0: all)")
	return func(ctx context.Context, e *env, args []string) error {
		if err := positional(args); err != nil {
			return err
		}
		if *keys < 1 || *keys > maxTopKeys {
			return usagef("--keys %d: want 1 to %d", *keys, maxTopKeys)
		}
		if *limit < 0 {
			return usagef("--limit %d: want 0 or more", *limit)
		}
		names := []string{*topic}
		if *topic == "" {
			var ls struct {
				Topics []struct {
					Name string `json:"name"`
				} `json:"topics"`
			}
			if err := e.call(ctx, "GET", "/v1/topics", nil, nil, &ls); err != nil {
				return err
			}
			names = names[:0]
			for _, t := range ls.Topics {
				names = append(names, t.Name)
			}
		}
		q := url.Values{"top": {strconv.Itoa(*keys)}}
		var out struct {
			Topics []hotKeys `json:"topics"`
		}
		out.Topics = []hotKeys{}
		for _, n := range names {
			var hk hotKeys
			if err := e.call(ctx, "GET", "/v1/topics/"+esc(n)+"/hot-keys", q, nil, &hk); err != nil {
				return fmt.Errorf("topic %s: %w", n, err)
			}
			out.Topics = append(out.Topics, hk)
		}
		if e.json {
			if *topic != "" {
				return e.writeJSON(out.Topics[0])
			}
			return e.writeJSON(out)
		}
		return e.printTop(out.Topics, *limit)
	}
}

// printTop prints the partitions busiest first, a line per hot key.
func (e *env) printTop(topics []hotKeys, limit int) error {
	type row struct {
		topic string
		p     partitionHotKeys
	}
	var rows []row
	for _, t := range topics {
		for _, p := range t.Partitions {
			rows = append(rows, row{t.Topic, p})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(b.p.RecordsPerSec, a.p.RecordsPerSec) })
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	tw := e.table()
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tBYTES/S\tRECORDS/S\tHOT KEY\tKEY RECORDS/S\tSHARE")
	for _, r := range rows {
		lead := fmt.Sprintf("%s\t%d\t%d\t%s\t%s", r.topic, r.p.Partition, r.p.Leader, si(r.p.BytesPerSec), si(r.p.RecordsPerSec))
		switch {
		case r.p.Error != "":
			fmt.Fprintf(tw, "%s\t(%s)\t\t\n", lead, r.p.Error)
			continue
		case len(r.p.Keys) == 0:
			fmt.Fprintf(tw, "%s\t-\t\t\n", lead)
			continue
		}
		for i, k := range r.p.Keys {
			if i > 0 {
				lead = "\t\t\t\t"
			}
			key := k.Key
			if k.Truncated {
				key += "…"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s±%s\t%.0f%%\n", lead, key, si(k.RecordsPerSec), si(k.ErrorPerSec), 100*k.Share)
		}
	}
	return tw.Flush()
}

// si prints a rate with a k, M or G suffix.
func si(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.1fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
