package main

// cmd_verify.go owns `tierctl verify`: every remote object read whole and
// checked against the index (tier.CheckIndex, tier.VerifyObject), and with
// --data-dir every local batch's CRC and the offsets' continuity, locally
// and from the remote end to the local log; without a topic, also every
// large object a live reference names (cmd_objects.go). Exit status 1 on
// any problem.

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
	"github.com/sluice-mq/sluice/tier/object"
	"github.com/sluice-mq/sluice/wal"
)

type verifyProblem struct {
	Partition string `json:"partition"`
	Where     string `json:"where"` // an object or manifest key, "head" or "local"
	Problem   string `json:"problem"`
}

type verifyResult struct {
	Partitions    int             `json:"partitions"`
	Objects       int             `json:"objects"`
	LocalBatches  int             `json:"local_batches"`
	References    int             `json:"large_objects_referenced"` // objects live ledger entries name (cmd_objects.go)
	Problems      []verifyProblem `json:"problems"`
	progress      *progress
	objectsToRead int
}

func verifyFlags(*flag.FlagSet) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		ts, err := e.connectTargets(ctx, args)
		if err != nil {
			return err
		}
		res := &verifyResult{Problems: []verifyProblem{}}
		lists := make([][]meta.RemoteObject, len(ts))
		listed := make([]bool, len(ts))
		for i, t := range ts {
			objs, err := tier.ListObjects(ctx, e.store, t.head)
			if err != nil {
				res.add(t, "head", fmt.Sprintf("list objects: %v", err))
				continue
			}
			lists[i], listed[i] = objs, true
			res.objectsToRead += len(objs)
		}
		res.progress = e.progress("verify", int64(res.objectsToRead))
		for i, t := range ts {
			res.Partitions++
			if listed[i] {
				e.verifyRemote(ctx, t, lists[i], res)
			}
			if err := e.verifyLocal(t, res); err != nil {
				res.progress.done()
				return err
			}
		}
		res.progress.done()
		if len(args) == 0 { // the whole cluster: its large objects' references too
			if err := e.verifyLargeRefs(ctx, res); err != nil {
				return err
			}
		}
		if e.g.json {
			if err := e.writeJSON(res); err != nil {
				return err
			}
		} else {
			for _, p := range res.Problems {
				fmt.Fprintf(e.stdout, "%s: %s: %s\n", p.Partition, p.Where, p.Problem)
			}
			if res.References > 0 {
				fmt.Fprintf(e.stdout, "verified %d large objects named by live references\n", res.References)
			}
			fmt.Fprintf(e.stdout, "verified %d partitions, %d objects, %d local batches: %d problems\n",
				res.Partitions, res.Objects, res.LocalBatches, len(res.Problems))
		}
		if len(res.Problems) > 0 {
			return errProblems
		}
		return nil
	}
}

func (r *verifyResult) add(t target, where, msg string) {
	r.Problems = append(r.Problems, verifyProblem{Partition: t.String(), Where: where, Problem: msg})
}

func (r *verifyResult) addAll(t target, ps []tier.Problem) {
	for _, p := range ps {
		where := p.Key
		if where == "" {
			where = "head"
		}
		r.add(t, where, p.Msg)
	}
}

// verifyRemote checks the index and every object above the clean offset
// (those below may already be deleted).
func (e *env) verifyRemote(ctx context.Context, t target, objs []meta.RemoteObject, res *verifyResult) {
	res.addAll(t, tier.CheckIndex(t.head, objs))
	prev := int64(-1)
	for _, o := range objs {
		if o.Next > t.head.Clean {
			res.addAll(t, tier.VerifyObject(ctx, e.store, t.head, o, prev))
			res.Objects++
		}
		prev = o.Next
		res.progress.set(int64(res.Objects))
	}
}

// verifyLocal scans the local log: every batch's CRC and offsets, the
// repairs opening it would make, and that it continues the remote log.
func (e *env) verifyLocal(t target, res *verifyResult) error {
	l, err := e.local(t)
	if err != nil {
		res.add(t, "local", err.Error())
		return nil
	}
	if l == nil {
		return nil
	}
	for _, c := range l.fs.Changes() {
		res.add(t, "local", "recovery would change "+c+" (a torn tail, a write in progress or damage)")
	}
	start, end := l.log.StartOffset(), l.log.EndOffset()
	if re := wal.Offset(t.head.RemoteEnd); t.head.Revision != 0 && start > re && end > start {
		res.add(t, "local", fmt.Sprintf("the local log starts at %d, above the remote end %d: offsets [%d, %d) are in neither (unless retention passed them and the next upload moves the remote end)", start, re, re, start))
	}
	next := start
	for next < end {
		data, err := l.log.Read(next, end, localReadBytes)
		if err != nil {
			res.add(t, "local", fmt.Sprintf("read at %d: %v", next, err))
			return nil
		}
		if len(data) == 0 {
			break
		}
		before, seen := next, false
		err = object.Batches(data, func(b []byte) error {
			h, err := wal.ParseBatchHeader(b)
			if err != nil {
				return err
			}
			if seen && h.BaseOffset != next {
				return fmt.Errorf("batch at %d follows one ending at %d: %w", h.BaseOffset, next, wal.ErrCorrupt)
			}
			if err := wal.CheckCRC(b); err != nil {
				res.add(t, "local", fmt.Sprintf("batch at %d: %v", h.BaseOffset, err))
			}
			res.LocalBatches++
			seen, next = true, h.LastOffset()+1
			return nil
		})
		if err != nil || next == before {
			if err == nil {
				err = errors.New("no progress")
			}
			res.add(t, "local", fmt.Sprintf("scan at %d: %v", before, err))
			return nil
		}
	}
	return nil
}
