package main

// cmd_dump.go owns `tierctl dump`: decoded records of one partition from an
// offset, read from the local log where it holds them, else from object
// storage.

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/sluice-mq/sluice/wal"
)

type dumpHeader struct {
	Key   string    `json:"key"`
	Value jsonBytes `json:"value"`
}

type dumpRecord struct {
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       jsonBytes    `json:"key"`
	Value     jsonBytes    `json:"value"`
	Headers   []dumpHeader `json:"headers"`
}

func dumpFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	var from offsetFlag
	fs.Var(&from, "offset", "first `offset` to print (required)")
	count := fs.Int("count", 10, "how many records to print")
	return func(ctx context.Context, e *env, args []string) error {
		if !from.set {
			return usagef("dump: --offset is required")
		}
		if *count <= 0 {
			return usagef("dump: --count must be above 0")
		}
		if err := onePartitionArg(args); err != nil {
			return err
		}
		if err := e.connect(ctx, true); err != nil {
			return err
		}
		t, err := e.onePartition(ctx, args)
		if err != nil {
			return err
		}
		recs, err := e.records(ctx, t, from.v, *count)
		if err != nil {
			return err
		}
		if e.g.json {
			return e.writeJSON(map[string]any{"partition": t.String(), "records": recs})
		}
		for _, r := range recs {
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, fmt.Sprintf("%s=%s", text([]byte(h.Key)), text(h.Value)))
			}
			fmt.Fprintf(e.stdout, "offset=%d timestamp=%s key=%s value=%s", r.Offset, msTime(r.Timestamp), text(r.Key), text(r.Value))
			if len(hs) > 0 {
				fmt.Fprintf(e.stdout, " headers=[%s]", strings.Join(hs, " "))
			}
			fmt.Fprintln(e.stdout)
		}
		return nil
	}
}

// records decodes up to count records of t from offset from.
func (e *env) records(ctx context.Context, t target, from wal.Offset, count int) ([]dumpRecord, error) {
	l, err := e.local(t)
	if err != nil {
		return nil, err
	}
	end := wal.Offset(t.head.RemoteEnd)
	if l != nil {
		end = max(end, l.log.EndOffset())
	}
	if from >= end {
		return nil, fmt.Errorf("%s: offset %d is at or past the end %d", t, from, end)
	}
	out := []dumpRecord{}
	err = e.eachBatch(ctx, t, l, from, end, func(batch []byte) error {
		var derr error
		err := eachRecord(batch, func(r record) bool {
			if r.Offset < int64(from) {
				return true
			}
			d := dumpRecord{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: []dumpHeader{}}
			for _, h := range r.Headers {
				d.Headers = append(d.Headers, dumpHeader{Key: h.Key, Value: h.Value})
			}
			out = append(out, d)
			if len(out) == count {
				derr = errEnough
				return false
			}
			return true
		})
		if err != nil {
			return err
		}
		return derr
	})
	return out, err
}
