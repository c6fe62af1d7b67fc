package main

// cmd_retention.go owns `tierctl retention`: what the retention state
// machine (tier/retention.go, carried out by tier/machine.go) would decide
// for each partition at a given time, with the reason for each deletion.
// The decisions come from tier.LocalDeleteBelow, tier.RemoteLogStart and
// tier.NextClean themselves; the reasons are worked out here to explain them.
//
// Offline, tierctl does not know a partition's high watermark or its
// readers' pins: it takes the local log's end as the high watermark and no
// pins, so a broker may delete less than shown, never more.

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/wal"
)

// Topic config defaults, from broker/topicconfig.go (topicConfigDefs),
// which cmd/tierctl cannot import: only explicitly set configs are stored.
var retentionDefaults = map[string]string{
	"retention.ms":          "86400000",
	"retention.bytes":       "-1",
	"remote.storage.enable": "true",
	"local.retention.ms":    "1800000",
	"local.retention.bytes": "-2",
}

// topicPolicy is t's effective retention policy, as broker/topicconfig.go's
// topicSettings.policy builds it.
func topicPolicy(t meta.Topic, grace time.Duration) (tier.Policy, error) {
	get := func(key string) string {
		if v, ok := t.Configs[key]; ok {
			return v
		}
		return retentionDefaults[key]
	}
	num := func(key string) (int64, error) {
		n, err := strconv.ParseInt(get(key), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("topic %s: config %s=%q: %w", t.Name, key, get(key), err)
		}
		return n, nil
	}
	var p tier.Policy
	var err error
	if p.Tiered, err = strconv.ParseBool(get("remote.storage.enable")); err != nil {
		return p, fmt.Errorf("topic %s: config remote.storage.enable: %w", t.Name, err)
	}
	for key, dst := range map[string]*int64{"retention.ms": &p.RetentionMs, "retention.bytes": &p.RetentionBytes,
		"local.retention.ms": &p.LocalRetentionMs, "local.retention.bytes": &p.LocalRetentionBytes} {
		if *dst, err = num(key); err != nil {
			return p, err
		}
	}
	p.Grace = grace
	return p.Resolve(), nil
}

type retentionSegment struct {
	Base   int64  `json:"base"`
	Next   int64  `json:"next"`
	Size   int64  `json:"size"`
	MaxTs  int64  `json:"max_ts"`
	Reason string `json:"reason"`
}

type retentionObject struct {
	Key    string `json:"key"`
	Base   int64  `json:"base"`
	Next   int64  `json:"next"`
	Size   int64  `json:"size"`
	MaxTs  int64  `json:"max_ts"`
	Reason string `json:"reason,omitempty"`
}

type retentionPolicy struct {
	Tiered              bool  `json:"remote_storage_enable"`
	RetentionMs         int64 `json:"retention_ms"`
	RetentionBytes      int64 `json:"retention_bytes"`
	LocalRetentionMs    int64 `json:"local_retention_ms"`
	LocalRetentionBytes int64 `json:"local_retention_bytes"`
	GraceMs             int64 `json:"grace_ms"`
}

type retentionPlan struct {
	Topic      string          `json:"topic"`
	Partition  int32           `json:"partition"`
	Policy     tier.Policy     `json:"-"`
	PolicyJSON retentionPolicy `json:"policy"`
	Now        string          `json:"now"`
	Notes      []string        `json:"notes"`
	// Local: segments below LocalDeleteBelow (0: none).
	LocalDeleteBelow int64              `json:"local_delete_below"`
	LocalSegments    []retentionSegment `json:"local_segments"`
	// The remote log start before and after, and the objects it passes.
	LogStart      int64             `json:"log_start"`
	NewLogStart   int64             `json:"new_log_start"`
	PassedByStart []retentionObject `json:"passed_by_log_start"`
	// Clean-up: "none", "start-grace" (objects below CleanTarget go at
	// CleanDue), "wait" (a grace period runs until CleanDue) or "delete"
	// (CleanObjects go now and the clean offset becomes CleanTarget).
	CleanAction  string            `json:"clean_action"`
	CleanTarget  int64             `json:"clean_target,omitempty"`
	CleanDue     string            `json:"clean_due,omitempty"`
	CleanObjects []retentionObject `json:"clean_objects"`
}

func retentionFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	now := fs.String("now", "", "decide at this RFC 3339 time instead of now")
	grace := fs.Duration("grace", defaultGrace, "the brokers' --tier-grace")
	return func(ctx context.Context, e *env, args []string) error {
		spec, err := optionalSpec(args)
		if err != nil {
			return err
		}
		at, err := nowFlag(*now)
		if err != nil {
			return err
		}
		if err := e.connect(ctx, true); err != nil {
			return err
		}
		ts, err := e.targets(ctx, spec)
		if err != nil {
			return err
		}
		plans := []retentionPlan{}
		for _, t := range ts {
			p, err := e.retentionPlan(ctx, t, at, *grace)
			if err != nil {
				return err
			}
			plans = append(plans, p)
		}
		if e.g.json {
			return e.writeJSON(map[string]any{"partitions": plans})
		}
		return e.printRetention(plans)
	}
}

func (e *env) retentionPlan(ctx context.Context, t target, now time.Time, grace time.Duration) (retentionPlan, error) {
	pol, err := topicPolicy(t.topic, grace)
	if err != nil {
		return retentionPlan{}, err
	}
	h := t.head
	plan := retentionPlan{Topic: t.topic.Name, Partition: t.n, Policy: pol, PolicyJSON: retentionPolicy{Tiered: pol.Tiered,
		RetentionMs: pol.RetentionMs, RetentionBytes: pol.RetentionBytes, LocalRetentionMs: pol.LocalRetentionMs,
		LocalRetentionBytes: pol.LocalRetentionBytes, GraceMs: pol.Grace.Milliseconds()}, Now: now.UTC().Format(time.RFC3339),
		Notes: []string{}, LocalSegments: []retentionSegment{}, PassedByStart: []retentionObject{}, CleanObjects: []retentionObject{},
		LogStart: h.LogStart, NewLogStart: h.LogStart, CleanAction: "none"}
	l, err := e.local(t)
	if err != nil {
		return plan, err
	}
	var localAbove int64
	if l == nil {
		plan.Notes = append(plan.Notes, "no local log (no --data-dir, or none for this partition): local deletions not shown, local bytes not counted toward retention.bytes")
	} else {
		plan.planLocal(pol, h, l.log, now)
		if b, err := l.log.BytesFrom(max(l.log.StartOffset(), wal.Offset(h.RemoteEnd))); err == nil {
			localAbove = b
		}
	}
	if !pol.Tiered || h.Revision == 0 {
		plan.Notes = append(plan.Notes, "nothing tiered: no remote decisions")
		return plan, nil
	}
	objs, err := tier.ListObjects(ctx, e.store, h)
	if err != nil {
		return plan, fmt.Errorf("%s: %w", t, err)
	}
	plan.planRemote(pol, h, objs, localAbove, now)
	return plan, nil
}

// planLocal asks LocalDeleteBelow and explains each segment it passes.
func (p *retentionPlan) planLocal(pol tier.Policy, h meta.RemoteHead, log *wal.Log, now time.Time) {
	segs := log.Segments()
	logStart := log.StartOffset()
	if h.RemoteEnd > h.LogStart {
		logStart = wal.Offset(h.LogStart)
	}
	hw := log.EndOffset()
	p.Notes = append(p.Notes, fmt.Sprintf("high watermark taken as the local end %d; readers' pins unknown", hw))
	below := tier.LocalDeleteBelow(pol, tier.LocalInput{Segments: segs, HW: hw, LogStart: logStart, RemoteEnd: wal.Offset(h.RemoteEnd), Now: now})
	p.LocalDeleteBelow = int64(below)
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	for _, s := range segs {
		if below == 0 || s.Next > below {
			break
		}
		var reason string
		switch {
		case s.Next <= logStart:
			reason = fmt.Sprintf("below the log start %d", logStart)
		case expired(pol.RetentionMs, s.MaxTimestamp, now):
			reason = fmt.Sprintf("past retention.ms=%d", pol.RetentionMs)
		case pol.RetentionBytes != tier.Unlimited && total > pol.RetentionBytes:
			reason = fmt.Sprintf("the local log (%d bytes) is above retention.bytes=%d", total, pol.RetentionBytes)
		case expired(pol.LocalRetentionMs, s.MaxTimestamp, now):
			reason = fmt.Sprintf("uploaded (below the remote end %d) and past local.retention.ms=%d", h.RemoteEnd, pol.LocalRetentionMs)
		default:
			reason = fmt.Sprintf("uploaded (below the remote end %d) and the local log (%d bytes) is above local.retention.bytes=%d", h.RemoteEnd, total, pol.LocalRetentionBytes)
		}
		p.LocalSegments = append(p.LocalSegments, retentionSegment{Base: int64(s.Base), Next: int64(s.Next), Size: s.Size, MaxTs: s.MaxTimestamp, Reason: reason})
		total -= s.Size
	}
}

// planRemote asks RemoteLogStart, then NextClean on the head as the machine
// would write it, and explains what they pass.
func (p *retentionPlan) planRemote(pol tier.Policy, h meta.RemoteHead, objs []meta.RemoteObject, localAbove int64, now time.Time) {
	from := func(off int64) []tier.RemoteObject {
		var out []tier.RemoteObject
		for _, o := range objs {
			if o.Next > off {
				out = append(out, tier.RemoteObject{Key: o.Key, Base: wal.Offset(o.Base), Next: wal.Offset(o.Next), Size: o.Size, MaxTs: o.MaxTs})
			}
		}
		return out
	}
	live := from(h.LogStart)
	start := tier.RemoteLogStart(pol, tier.StartInput{Objects: live, LogStart: wal.Offset(h.LogStart), RemoteEnd: wal.Offset(h.RemoteEnd),
		LocalBytesAbove: localAbove, Now: now})
	p.NewLogStart = int64(start)
	total := localAbove
	for _, o := range live {
		total += o.Size
	}
	for _, o := range live {
		if o.Next > start {
			break
		}
		reason := fmt.Sprintf("past retention.ms=%d", pol.RetentionMs)
		if !expired(pol.RetentionMs, o.MaxTs, now) {
			reason = fmt.Sprintf("the partition (%d bytes) is above retention.bytes=%d", total, pol.RetentionBytes)
		}
		p.PassedByStart = append(p.PassedByStart, retentionObject{Key: o.Key, Base: int64(o.Base), Next: int64(o.Next), Size: o.Size, MaxTs: o.MaxTs, Reason: reason})
		total -= o.Size
	}
	st := tier.CleanState{Clean: wal.Offset(h.Clean), Pending: wal.Offset(h.PendingClean), DueMs: h.PendingCleanMs, LogStart: start}
	step, ok := tier.NextClean(pol, st, from(h.Clean), nil, now)
	switch {
	case ok && step.SetPending:
		p.CleanAction, p.CleanTarget, p.CleanDue = "start-grace", int64(step.Pending), msTime(step.DueMs)
		for _, o := range from(h.Clean) {
			if o.Next <= step.Pending {
				p.CleanObjects = append(p.CleanObjects, retentionObject{Key: o.Key, Base: int64(o.Base), Next: int64(o.Next), Size: o.Size, MaxTs: o.MaxTs})
			}
		}
	case ok:
		p.CleanAction, p.CleanTarget = "delete", int64(step.CleanTo)
		for _, o := range step.Delete {
			p.CleanObjects = append(p.CleanObjects, retentionObject{Key: o.Key, Base: int64(o.Base), Next: int64(o.Next), Size: o.Size, MaxTs: o.MaxTs})
		}
	case h.PendingClean > h.Clean:
		p.CleanAction, p.CleanTarget, p.CleanDue = "wait", h.PendingClean, msTime(h.PendingCleanMs)
	}
}

// expired is tier/retention.go's rule: data with max timestamp maxTs is past
// a retention of ms milliseconds at now.
func expired(ms, maxTs int64, now time.Time) bool {
	return ms != tier.Unlimited && maxTs < now.UnixMilli()-ms
}

func (e *env) printRetention(plans []retentionPlan) error {
	w := e.table()
	for i, p := range plans {
		if i > 0 {
			fmt.Fprintln(w)
		}
		pol := p.Policy
		fmt.Fprintf(w, "%s/%d at %s: retention.ms=%d retention.bytes=%d local.retention.ms=%d local.retention.bytes=%d tiered=%v grace=%v\n",
			p.Topic, p.Partition, p.Now, pol.RetentionMs, pol.RetentionBytes, pol.LocalRetentionMs, pol.LocalRetentionBytes, pol.Tiered, pol.Grace)
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if len(p.LocalSegments) == 0 {
			fmt.Fprintln(w, "  local: nothing to delete")
		} else {
			fmt.Fprintf(w, "  local: delete the segments below %d:\n", p.LocalDeleteBelow)
			for _, s := range p.LocalSegments {
				fmt.Fprintf(w, "    [%d, %d)\t%s\tmax ts %s\t%s\n", s.Base, s.Next, humanBytes(s.Size), msTime(s.MaxTs), s.Reason)
			}
		}
		if p.NewLogStart > p.LogStart {
			fmt.Fprintf(w, "  log start: %d -> %d (reads below it fail with OFFSET_OUT_OF_RANGE):\n", p.LogStart, p.NewLogStart)
			for _, o := range p.PassedByStart {
				fmt.Fprintf(w, "    %s\t[%d, %d)\tmax ts %s\t%s\n", o.Key, o.Base, o.Next, msTime(o.MaxTs), o.Reason)
			}
		} else {
			fmt.Fprintf(w, "  log start: stays at %d\n", p.LogStart)
		}
		switch p.CleanAction {
		case "start-grace":
			fmt.Fprintf(w, "  clean-up: a grace period starts; at %s these objects (wholly below %d) are deleted:\n", p.CleanDue, p.CleanTarget)
		case "delete":
			fmt.Fprintf(w, "  clean-up: the grace period has run; delete now (clean offset becomes %d):\n", p.CleanTarget)
		case "wait":
			fmt.Fprintf(w, "  clean-up: objects below %d wait for the grace period to end at %s\n", p.CleanTarget, p.CleanDue)
		default:
			fmt.Fprintln(w, "  clean-up: nothing to delete")
		}
		for _, o := range p.CleanObjects {
			fmt.Fprintf(w, "    %s\t[%d, %d)\t%s\n", o.Key, o.Base, o.Next, humanBytes(o.Size))
		}
	}
	return w.Flush()
}
