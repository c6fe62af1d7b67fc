package main

// cmd_stat.go owns `tierctl stat`: one line of watermarks, counts and sizes
// per partition.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/sluice-mq/sluice/tier"
)

type statPartition struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStart       int64  `json:"log_start"`
	Clean          int64  `json:"clean"`
	PendingClean   int64  `json:"pending_clean"`
	PendingCleanMs int64  `json:"pending_clean_ms,omitempty"`
	RemoteEnd      int64  `json:"remote_end"`
	LocalStart     *int64 `json:"local_start,omitempty"`
	LocalEnd       *int64 `json:"local_end,omitempty"`
	LocalBytes     *int64 `json:"local_bytes,omitempty"`
	LocalSegments  *int   `json:"local_segments,omitempty"`
	Objects        int    `json:"objects"`
	Manifests      int    `json:"manifests"`
	Intents        int    `json:"intents"`
	RemoteBytes    int64  `json:"remote_bytes"`
	HeadBytes      int    `json:"head_bytes"` // key and value in etcd
}

func statFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		ts, err := e.connectTargets(ctx, args)
		if err != nil {
			return err
		}
		var out []statPartition
		for _, t := range ts {
			s, err := e.stat(ctx, t)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		if e.g.json {
			return e.writeJSON(map[string]any{"partitions": out})
		}
		w := e.table()
		fmt.Fprintln(w, "PARTITION\tLOG START\tCLEAN\tPENDING CLEAN\tREMOTE END\tLOCAL START\tLOCAL END\tOBJECTS\tMANIFESTS\tINTENTS\tREMOTE BYTES\tHEAD BYTES")
		for _, s := range out {
			pending := "-"
			if s.PendingClean > s.Clean {
				pending = fmt.Sprintf("%d (due %s)", s.PendingClean, msTime(s.PendingCleanMs))
			}
			ls, le := "-", "-"
			if s.LocalStart != nil {
				ls, le = fmt.Sprint(*s.LocalStart), fmt.Sprint(*s.LocalEnd)
			}
			fmt.Fprintf(w, "%s/%d\t%d\t%d\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", s.Topic, s.Partition, s.LogStart, s.Clean, pending,
				s.RemoteEnd, ls, le, s.Objects, s.Manifests, s.Intents, humanBytes(s.RemoteBytes), s.HeadBytes)
		}
		return w.Flush()
	}
}

func (e *env) stat(ctx context.Context, t target) (statPartition, error) {
	h := t.head
	s := statPartition{Topic: t.topic.Name, Partition: t.n, LogStart: h.LogStart, Clean: h.Clean, PendingClean: h.PendingClean,
		PendingCleanMs: h.PendingCleanMs, RemoteEnd: h.RemoteEnd, Manifests: len(h.Manifests), Intents: len(h.Intents)}
	if h.Revision != 0 {
		// The stored value is the head's JSON (meta/remote.go); the key is
		// <prefix>heads/<topic id>/<partition>.
		val, err := json.Marshal(h)
		if err != nil {
			return s, err
		}
		s.HeadBytes = len(val) + len(fmt.Sprintf("%sheads/%s/%d", e.meta.Prefix(), t.topicID(), t.n))
	}
	objs, err := tier.ListObjects(ctx, e.store, h)
	if err != nil {
		return s, fmt.Errorf("%s: %w", t, err)
	}
	for _, o := range objs {
		if o.Next > h.Clean {
			s.Objects++
			s.RemoteBytes += o.Size
		}
	}
	l, err := e.local(t)
	if err != nil || l == nil {
		return s, err
	}
	start, end, size := int64(l.log.StartOffset()), int64(l.log.EndOffset()), l.log.Size()
	n := len(l.log.Segments())
	s.LocalStart, s.LocalEnd, s.LocalBytes, s.LocalSegments = &start, &end, &size, &n
	return s, nil
}
