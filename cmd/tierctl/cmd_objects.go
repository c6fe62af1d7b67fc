package main

// cmd_objects.go owns `tierctl objects`: the large payloads' upload
// sessions (meta/uploads.go), the reference ledger's entries of each
// (meta/largerefs.go) against the partitions' log starts, and what the
// retention state machine plans for each (tier.PlanRelease); and the
// check `tierctl verify` makes of them: every live reference resolves to a
// published object of its session's size and SHA-256, read back.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
)

type objectRef struct {
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	Open      bool   `json:"open"`
	ClaimedMs int64  `json:"claimed_ms"`
	Upto      int64  `json:"upto"`
	// LogStart is the partition's remote log start when it is tiered with
	// objects; -1 when only its leader knows it (a local log).
	LogStart int64  `json:"log_start"`
	State    string `json:"state"`
}

type largeObject struct {
	Ref          string      `json:"ref"`
	Tenant       string      `json:"tenant"`
	Topic        string      `json:"topic"`
	State        string      `json:"state"`
	Size         int64       `json:"size"`
	SHA256       string      `json:"sha256"`
	Key          string      `json:"key"`
	ExpiresMs    int64       `json:"expires_ms"`
	ReleaseDueMs int64       `json:"release_due_ms,omitempty"`
	Refs         []objectRef `json:"refs"`
	Plan         string      `json:"plan"`
}

func objectsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	grace := fs.Duration("grace", 10*time.Minute, "the brokers' --tier-grace, for the plan's due times")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) > 0 {
			return usagef("objects takes no arguments")
		}
		if err := e.connect(ctx, false); err != nil {
			return err
		}
		objs, err := e.largeObjects(ctx, time.Now(), *grace)
		if err != nil {
			return err
		}
		if e.g.json {
			return e.writeJSON(objs)
		}
		w := e.table()
		fmt.Fprintln(w, "REF\tTENANT\tSTATE\tSIZE\tREFS\tPLAN")
		for _, o := range objs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", o.Ref, o.Tenant, o.State, humanBytes(o.Size), len(o.Refs), o.Plan)
			for _, r := range o.Refs {
				fmt.Fprintf(w, "  %s/%d\t\t\t\t\t%s\n", r.Topic, r.Partition, r.State)
			}
		}
		return w.Flush()
	}
}

// largeObjects lists every session with its ledger entries and plan at now.
func (e *env) largeObjects(ctx context.Context, now time.Time, grace time.Duration) ([]largeObject, error) {
	var ups []meta.Upload
	if err := e.meta.ListUploads(ctx, func(u meta.Upload) error { ups = append(ups, u); return nil }); err != nil {
		return nil, err
	}
	all, err := e.meta.AllRefs(ctx)
	if err != nil {
		return nil, err
	}
	topics, err := e.meta.Topics(ctx)
	if err != nil {
		return nil, err
	}
	names := map[[16]byte]string{}
	for _, t := range topics {
		names[t.ID] = t.Name
	}
	byRef := map[string][]meta.LargeRef{}
	for _, r := range all {
		byRef[r.Ref] = append(byRef[r.Ref], r)
	}
	out := make([]largeObject, 0, len(ups))
	for _, u := range ups {
		o := largeObject{Ref: u.ID, Tenant: u.Tenant, Topic: u.Topic, State: string(u.State), Size: u.Size, SHA256: u.SHA256,
			Key: u.ObjectKey, ExpiresMs: u.ExpiresMs, ReleaseDueMs: u.ReleaseDueMs, Refs: []objectRef{}}
		live := 0
		for _, r := range byRef[u.ID] {
			or := objectRef{Topic: r.Topic, TopicID: uuid.UUID(r.TopicID).String(), Partition: r.Partition, Open: r.Open,
				ClaimedMs: r.ClaimedMs, Upto: r.Upto, LogStart: -1}
			name, ok := names[r.TopicID]
			if ok {
				live++
				or.Topic = name
				if h, err := e.meta.RemoteHead(ctx, r.TopicID, r.Partition); err == nil && h.Revision > 0 && h.RemoteEnd > h.LogStart {
					or.LogStart = h.LogStart
				}
			}
			switch {
			case !ok:
				or.State = "topic deleted: dropped at the next sweep"
			case r.Open:
				or.State = fmt.Sprintf("open: claimed %s, bounded by the log end once settled", msTime(r.ClaimedMs))
			case or.LogStart >= 0 && r.Upto <= or.LogStart:
				or.State = fmt.Sprintf("below the log start (records < %d, log start %d): dropped at the next pass", r.Upto, or.LogStart)
			case or.LogStart >= 0:
				or.State = fmt.Sprintf("live: records < %d, log start %d", r.Upto, or.LogStart)
			default:
				or.State = fmt.Sprintf("records < %d; log start on the leader", r.Upto)
			}
			o.Refs = append(o.Refs, or)
		}
		o.Plan = planOf(u, live, now, grace)
		out = append(out, o)
	}
	return out, nil
}

// planOf says what happens to session u next.
func planOf(u meta.Upload, live int, now time.Time, grace time.Duration) string {
	switch u.State {
	case meta.UploadOpen:
		return "aborted at " + msTime(u.ExpiresMs) + " unless completed"
	case meta.UploadCompleted:
		return "orphan: deleted at " + msTime(u.ExpiresMs) + " unless published"
	case meta.UploadAborted, meta.UploadExpired:
		return "bytes deleted; record forgotten after the brokers' retention"
	}
	step, due := tier.PlanRelease(u.Ledger, live, u.ReleaseDueMs, now, grace)
	switch {
	case !u.Ledger:
		return "keep: published before the reference ledger"
	case step == tier.ReleaseCondemn:
		return "unreferenced: condemned at the next sweep, deleted about " + msTime(due)
	case step == tier.ReleaseDelete:
		return "delete at the next sweep"
	case u.ReleaseDueMs > 0:
		return "condemned: deleted at " + msTime(due)
	}
	return fmt.Sprintf("keep: %d live references", live)
}

// verifyLargeRefs checks every object a ledger entry of a live topic names:
// its session is published, and the object holds its size and SHA-256.
func (e *env) verifyLargeRefs(ctx context.Context, res *verifyResult) error {
	all, err := e.meta.AllRefs(ctx)
	if err != nil {
		return err
	}
	topics, err := e.meta.Topics(ctx)
	if err != nil {
		return err
	}
	live := map[[16]byte]bool{}
	for _, t := range topics {
		live[t.ID] = true
	}
	var ids []string
	for _, r := range all {
		if live[r.TopicID] && !slices.Contains(ids, r.Ref) {
			ids = append(ids, r.Ref)
		}
	}
	for _, id := range ids {
		res.References++
		where := "large/" + id
		problem := func(format string, args ...any) {
			res.Problems = append(res.Problems, verifyProblem{Partition: "large object " + id, Where: where, Problem: fmt.Sprintf(format, args...)})
		}
		u, err := e.meta.GetUpload(ctx, id)
		if err != nil {
			problem("a live reference names no session: %v", err)
			continue
		}
		where = u.ObjectKey
		if u.State != meta.UploadPublished {
			problem("a live reference names a session in state %s", u.State)
			continue
		}
		info, err := e.store.Head(ctx, u.ObjectKey)
		if err != nil {
			problem("object: %v", err)
			continue
		}
		if info.Size != u.Size {
			problem("object holds %d bytes, the reference says %d", info.Size, u.Size)
			continue
		}
		h := sha256.New()
		for off := int64(0); off < u.Size; {
			n := min(4<<20, u.Size-off)
			b, err := e.store.Get(ctx, u.ObjectKey, off, n)
			if err != nil {
				problem("read [%d, %d): %v", off, off+n, err)
				break
			}
			h.Write(b)
			off += int64(len(b))
			if len(b) == 0 {
				problem("read [%d, %d): no bytes", off, off+n)
				break
			}
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != u.SHA256 {
			problem("sha256 %s, the reference says %s", got, u.SHA256)
		}
	}
	return nil
}
