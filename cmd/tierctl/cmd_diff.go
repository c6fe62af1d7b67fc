package main

// cmd_diff.go owns `tierctl diff`: the bucket compared with every head in
// etcd (tier.Diff), and with --delete-orphans the broker's rate-limited
// scrub (tier.Scrub). Exit status 1 when objects are missing.

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// defaultGrace is the broker's TierGrace default (broker/config.go).
const defaultGrace = 10 * time.Minute

type diffOrphan struct {
	Key       string `json:"key"`
	Size      int64  `json:"size"`
	Modified  string `json:"modified"`
	AgeSec    int64  `json:"age_seconds"`
	Removable bool   `json:"removable"`
	Held      string `json:"held,omitempty"`
}

type diffMissing struct {
	Key       string `json:"key"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	Base      int64  `json:"base"`
	Next      int64  `json:"next"`
	Manifest  bool   `json:"manifest"`
	NamedBy   string `json:"named_by"`
}

type diffForeign struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

type diffOutput struct {
	Heads      int           `json:"heads"`
	Listed     int           `json:"listed"`
	Referenced int           `json:"referenced"`
	Orphans    []diffOrphan  `json:"orphans"`
	Missing    []diffMissing `json:"missing"`
	Foreign    []diffForeign `json:"foreign"`
	Deleted    int           `json:"deleted"`
}

// countingStore counts the keys a List hands on, for the progress line.
type countingStore struct {
	objstore.Store
	p *progress
	n int64
}

func (s *countingStore) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	return s.Store.List(ctx, prefix, func(info objstore.Info) error {
		s.n++
		s.p.set(s.n)
		return fn(info)
	})
}

func diffFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	grace := fs.Duration("grace", defaultGrace, "orphans younger than this are kept (the broker's --tier-grace)")
	now := fs.String("now", "", "judge orphans' ages at this RFC 3339 time of the store's clock instead of its newest LastModified, and pending clean-ups at it instead of now")
	del := fs.Bool("delete-orphans", false, "delete the removable orphans (rate-limited)")
	rate := fs.Float64("rate", 20, "deletions per second with --delete-orphans")
	force := fs.Bool("force", false, "with --delete-orphans, delete even when etcd holds no head at all (a wrong --prefix or bucket would make every object an orphan)")
	return func(ctx context.Context, e *env, args []string) error {
		if len(args) != 0 {
			return usagef("diff takes no arguments")
		}
		at, err := nowFlag(*now)
		if err != nil {
			return err
		}
		if *rate <= 0 {
			return usagef("--rate must be above 0")
		}
		if err := e.connect(ctx, true); err != nil {
			return err
		}
		// The bucket is listed before the heads are read (tier.Diff), and
		// without --now an orphan's age is the store's clock against itself.
		var heads []meta.RemoteHead
		readHeads := func(ctx context.Context) ([]meta.RemoteHead, error) {
			var err error
			heads, err = e.meta.RemoteHeads(ctx)
			return heads, err
		}
		cfg := tier.DiffConfig{Grace: *grace, Now: at}
		if *now != "" {
			cfg.StoreNow = at
		}
		p := e.progress("listing the bucket", 0)
		rep, err := tier.Diff(ctx, &countingStore{Store: e.store, p: p}, readHeads, cfg)
		p.done()
		if err != nil {
			return err
		}
		out := diffReport(rep)
		if *del && rep.Removable() > 0 {
			if len(heads) == 0 && !*force {
				return fmt.Errorf("etcd under prefix %q holds no head, so all %d of our keys look orphaned: check --prefix and --object-store, or pass --force", e.g.prefix, len(rep.Orphans))
			}
			out.Deleted, err = tier.Scrub(ctx, e.store, rep, tier.NewTokenBucket(*rate, 1))
			if err != nil {
				return fmt.Errorf("deleted %d orphans, then: %w", out.Deleted, err)
			}
		}
		if e.g.json {
			err = e.writeJSON(out)
		} else {
			err = e.printDiff(out, *grace, *del)
		}
		if err != nil {
			return err
		}
		if len(out.Missing) > 0 {
			return errProblems
		}
		return nil
	}
}

func diffReport(rep tier.DiffReport) diffOutput {
	out := diffOutput{Heads: rep.Heads, Listed: rep.Listed, Referenced: rep.Referenced,
		Orphans: []diffOrphan{}, Missing: []diffMissing{}, Foreign: []diffForeign{}}
	for _, o := range rep.Orphans {
		out.Orphans = append(out.Orphans, diffOrphan{Key: o.Key, Size: o.Size, Modified: o.Modified.UTC().Format(time.RFC3339),
			AgeSec: int64(o.Age / time.Second), Removable: o.Removable, Held: o.Held})
	}
	for _, m := range rep.Missing {
		out.Missing = append(out.Missing, diffMissing{Key: m.Key, TopicID: uuid.UUID(m.TopicID).String(), Partition: m.Partition,
			Base: m.Base, Next: m.Next, Manifest: m.Manifest, NamedBy: m.NamedBy})
	}
	for _, f := range rep.Foreign {
		out.Foreign = append(out.Foreign, diffForeign{Key: f.Key, Size: f.Size})
	}
	return out
}

func (e *env) printDiff(out diffOutput, grace time.Duration, deleting bool) error {
	w := e.table()
	fmt.Fprintf(w, "bucket: %d keys, %d named by %d heads\n", out.Listed, out.Referenced, out.Heads)
	removable := 0
	for _, o := range out.Orphans {
		if o.Removable {
			removable++
		}
	}
	fmt.Fprintf(w, "\norphans: %d (%d older than the grace of %v)\n", len(out.Orphans), removable, grace)
	if len(out.Orphans) > 0 {
		fmt.Fprintln(w, "  KEY\tSIZE\tMODIFIED\tAGE\tSTATE")
		for _, o := range out.Orphans {
			state := "young: kept"
			switch {
			case o.Held != "":
				state = "kept: " + o.Held
			case o.Removable && deleting:
				state = "deleted"
			case o.Removable:
				state = "removable"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%v\t%s\n", o.Key, humanBytes(o.Size), o.Modified, time.Duration(o.AgeSec)*time.Second, state)
		}
	}
	fmt.Fprintf(w, "\nmissing: %d\n", len(out.Missing))
	if len(out.Missing) > 0 {
		fmt.Fprintln(w, "  KEY\tPARTITION\tOFFSETS\tNAMED BY")
		for _, m := range out.Missing {
			what := ""
			if m.Manifest {
				what = " (manifest)"
			}
			fmt.Fprintf(w, "  %s%s\t%s/%d\t[%d, %d)\t%s\n", m.Key, what, m.TopicID, m.Partition, m.Base, m.Next, m.NamedBy)
		}
	}
	fmt.Fprintf(w, "\nforeign keys (not Sluice's, never deleted): %d\n", len(out.Foreign))
	for _, f := range out.Foreign {
		fmt.Fprintf(w, "  %s\t%s\n", f.Key, humanBytes(f.Size))
	}
	if deleting {
		fmt.Fprintf(w, "\ndeleted %d orphans\n", out.Deleted)
	}
	return w.Flush()
}
