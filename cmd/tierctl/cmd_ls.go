package main

// cmd_ls.go owns `tierctl ls`: per partition, its local segments (with
// --data-dir) and its remote objects and intents, with the state of each.

import (
	"context"
	"flag"
	"fmt"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
)

// Remote object states.
const (
	stateCommitted  = "committed"   // readable: at or above the log start
	stateBelowStart = "below-start" // below the log start: deleted after the grace period
	stateBelowClean = "below-clean" // below the clean offset: deleted, or about to be
	stateIntent     = "intent"      // an upload in flight: may or may not exist
)

type lsSegment struct {
	Base     int64 `json:"base"`
	Next     int64 `json:"next"`
	Size     int64 `json:"size"`
	MaxTs    int64 `json:"max_ts"`
	Active   bool  `json:"active"`
	Uploaded bool  `json:"uploaded"` // wholly below the remote end
}

type lsObject struct {
	Key   string `json:"key"`
	Base  int64  `json:"base"`
	Next  int64  `json:"next,omitempty"`
	Size  int64  `json:"size,omitempty"`
	MaxTs int64  `json:"max_ts,omitempty"`
	Epoch int32  `json:"epoch"`
	State string `json:"state"`
}

type lsPartition struct {
	Topic     string      `json:"topic"`
	TopicID   string      `json:"topic_id"`
	Partition int32       `json:"partition"`
	LogStart  int64       `json:"log_start"`
	Clean     int64       `json:"clean"`
	RemoteEnd int64       `json:"remote_end"`
	LocalDir  string      `json:"local_dir,omitempty"`
	Local     []lsSegment `json:"local"`
	Remote    []lsObject  `json:"remote"`
}

func lsFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		ts, err := e.connectTargets(ctx, args)
		if err != nil {
			return err
		}
		var out []lsPartition
		for _, t := range ts {
			p, err := e.lsPartition(ctx, t)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		if e.g.json {
			return e.writeJSON(map[string]any{"partitions": out})
		}
		return e.printLs(out)
	}
}

func objectState(h meta.RemoteHead, o meta.RemoteObject) string {
	switch {
	case o.Next <= h.Clean:
		return stateBelowClean
	case o.Next <= h.LogStart:
		return stateBelowStart
	}
	return stateCommitted
}

func (e *env) lsPartition(ctx context.Context, t target) (lsPartition, error) {
	h := t.head
	p := lsPartition{Topic: t.topic.Name, TopicID: t.topicID(), Partition: t.n, LogStart: h.LogStart, Clean: h.Clean,
		RemoteEnd: h.RemoteEnd, Local: []lsSegment{}, Remote: []lsObject{}}
	l, err := e.local(t)
	if err != nil {
		return p, err
	}
	if l != nil {
		p.LocalDir = l.dir
		segs := l.log.Segments()
		for i, s := range segs {
			seg := lsSegment{Base: int64(s.Base), Next: int64(s.Next), Size: s.Size, MaxTs: s.MaxTimestamp,
				Active: i == len(segs)-1, Uploaded: s.Next > s.Base && int64(s.Next) <= h.RemoteEnd}
			p.Local = append(p.Local, seg)
		}
	}
	objs, err := tier.ListObjects(ctx, e.store, h)
	if err != nil {
		return p, fmt.Errorf("%s: %w", t, err)
	}
	for _, o := range objs {
		p.Remote = append(p.Remote, lsObject{Key: o.Key, Base: o.Base, Next: o.Next, Size: o.Size, MaxTs: o.MaxTs,
			Epoch: o.Epoch, State: objectState(h, o)})
	}
	for _, in := range h.Intents {
		p.Remote = append(p.Remote, lsObject{Key: in.Key, Base: in.Base, Epoch: in.Epoch, State: stateIntent})
	}
	return p, nil
}

func (e *env) printLs(parts []lsPartition) error {
	w := e.table()
	for i, p := range parts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s/%d  topic id %s  log start %d  clean %d  remote end %d\n", p.Topic, p.Partition, p.TopicID, p.LogStart, p.Clean, p.RemoteEnd)
		if p.LocalDir != "" {
			fmt.Fprintf(w, "  local segments in %s:\n", p.LocalDir)
			fmt.Fprintln(w, "  BASE\tNEXT\tSIZE\tMAX TIMESTAMP\tSTATE")
			for _, s := range p.Local {
				state := "local"
				switch {
				case s.Active && s.Uploaded:
					state = "active, uploaded"
				case s.Active:
					state = "active"
				case s.Uploaded:
					state = "uploaded"
				}
				fmt.Fprintf(w, "  %d\t%d\t%s\t%s\t%s\n", s.Base, s.Next, humanBytes(s.Size), msTime(s.MaxTs), state)
			}
		}
		if len(p.Remote) == 0 {
			fmt.Fprintln(w, "  no remote objects")
			continue
		}
		fmt.Fprintln(w, "  remote objects:")
		fmt.Fprintln(w, "  KEY\tBASE\tNEXT\tSIZE\tMAX TIMESTAMP\tEPOCH\tSTATE")
		for _, o := range p.Remote {
			if o.State == stateIntent {
				fmt.Fprintf(w, "  %s\t%d\t-\t-\t-\t%d\t%s\n", o.Key, o.Base, o.Epoch, o.State)
				continue
			}
			fmt.Fprintf(w, "  %s\t%d\t%d\t%s\t%s\t%d\t%s\n", o.Key, o.Base, o.Next, humanBytes(o.Size), msTime(o.MaxTs), o.Epoch, o.State)
		}
	}
	return w.Flush()
}
