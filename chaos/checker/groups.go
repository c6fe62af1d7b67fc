package checker

// This file owns the checks on consumer groups' commits:
// stale-generation-commit and offset-regression, and the bound on a group's
// committed offset that handover-skip uses (definitions in chaos/doc.go).
//
// Commits are judged by real time on the runner's clock: an operation that
// completed before another was invoked happened before it. Where the order is
// unknown (overlapping operations, unknown outcomes) the checks assume the
// order that makes the broker right, so every anomaly reported is certain.

import (
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/chaos/history"
)

// checkCommits reports stale-generation-commit and offset-regression.
func checkCommits(x *index, c *collector) {
	groups := make([]string, 0, len(x.byGroup))
	for g := range x.byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		checkGenerations(x, c, g)
	}
	gps := make([]groupPart, 0, len(x.commits))
	for gp := range x.commits {
		gps = append(gps, gp)
	}
	sort.Slice(gps, func(i, j int) bool {
		if gps[i].group != gps[j].group {
			return gps[i].group < gps[j].group
		}
		return gps[i].p < gps[j].p
	})
	for _, gp := range gps {
		checkRegression(x, c, gp)
	}
}

// checkGenerations: an accepted commit (ok, not a reset, generation >= 0)
// must carry the newest generation that any member of the group had been
// assigned before the commit was invoked.
func checkGenerations(x *index, c *collector, g string) {
	assigns := append([]int(nil), x.assigns[g]...)
	sort.SliceStable(assigns, func(i, j int) bool {
		return x.h[assigns[i]].(history.Assign).At < x.h[assigns[j]].(history.Assign).At
	})
	var commits []int
	for _, i := range x.byGroup[g] {
		cm := x.h[i].(history.Commit)
		if cm.Outcome == history.OK && !cm.Reset && cm.Generation >= 0 {
			commits = append(commits, i)
		}
	}
	sort.SliceStable(commits, func(i, j int) bool {
		return x.h[commits[i]].(history.Commit).Invoke < x.h[commits[j]].(history.Commit).Invoke
	})
	newest, newestIdx, j := history.NoGeneration, -1, 0
	for _, i := range commits {
		cm := x.h[i].(history.Commit)
		for ; j < len(assigns); j++ {
			a := x.h[assigns[j]].(history.Assign)
			if a.At >= cm.Invoke {
				break
			}
			if a.Generation > newest {
				newest, newestIdx = a.Generation, assigns[j]
			}
		}
		if cm.Generation < newest {
			c.add(Anomaly{Kind: StaleGenerationCommit, Partition: cm.Partition, Offsets: []history.Offset{cm.Offset},
				Detail: fmt.Sprintf("group %s accepted a commit of offset %d from member %s (process %d) with generation %d, invoked after generation %d had been assigned",
					g, cm.Offset, cm.Member, cm.Process, cm.Generation, newest)},
				newestIdx, i)
		}
	}
}

// checkRegression: an accepted commit that is not a reset must not commit a
// lower offset than one that completed before it was invoked, unless a reset
// was invoked in between. A reset (ok or unknown) counts from its invocation;
// a commit invoked before a reset does not raise the floor after it.
func checkRegression(x *index, c *collector, gp groupPart) {
	const (
		reset = iota // a reset may have applied from here on
		query        // an accepted commit is invoked
		raise        // an accepted commit completed
	)
	type point struct {
		t    history.Nanos
		what int
		idx  int
	}
	var pts []point
	for _, i := range x.commits[gp] {
		cm := x.h[i].(history.Commit)
		switch {
		case cm.Reset && cm.Outcome != history.Fail:
			pts = append(pts, point{cm.Invoke, reset, i})
		case !cm.Reset && cm.Outcome == history.OK:
			pts = append(pts, point{cm.Invoke, query, i}, point{cm.Complete, raise, i})
		}
	}
	sort.Slice(pts, func(i, j int) bool {
		a, b := pts[i], pts[j]
		if a.t != b.t {
			return a.t < b.t
		}
		if a.what != b.what {
			return a.what < b.what
		}
		return a.idx < b.idx
	})
	var (
		floor     history.Offset
		floorIdx  = -1
		lastReset = history.Nanos(-1)
	)
	for _, pt := range pts {
		cm := x.h[pt.idx].(history.Commit)
		switch pt.what {
		case reset:
			floor, floorIdx, lastReset = cm.Offset, pt.idx, cm.Invoke
		case raise:
			if cm.Invoke > lastReset && (floorIdx < 0 || cm.Offset > floor) {
				floor, floorIdx = cm.Offset, pt.idx
			}
		case query:
			if floorIdx >= 0 && cm.Offset < floor {
				c.add(Anomaly{Kind: OffsetRegression, Partition: gp.p, Offsets: []history.Offset{floor, cm.Offset},
					Detail: fmt.Sprintf("group %s committed offset %d (member %s, process %d, generation %d) after offset %d had been committed, with no reset in between",
						gp.group, cm.Offset, cm.Member, cm.Process, cm.Generation, floor)},
					floorIdx, pt.idx)
			}
		}
	}
}

// commitBound is, for one group and partition, the highest offset that may
// have been committed at any time: a commit counts from its invocation
// whatever its outcome (fail aside), and a reset discards the commits that
// completed before it was invoked.
type commitBound struct {
	invokes []history.Nanos  // candidate commits by invocation
	highest []history.Offset // highest possible committed offset once each is invoked
	by      []int            // the commit that set it
}

// at returns the highest offset that may have been committed by commits
// invoked before t, and the commit; ok is false when none was.
func (b *commitBound) at(t history.Nanos) (history.Offset, int, bool) {
	k := sort.Search(len(b.invokes), func(i int) bool { return b.invokes[i] >= t })
	if k == 0 {
		return 0, -1, false
	}
	return b.highest[k-1], b.by[k-1], true
}

// commitBound builds (once) the bound of a group's partition. A reset looks
// back over all earlier commits for ones still in flight; resets are rare,
// so this stays near linear.
func (x *index) commitBound(gp groupPart) *commitBound {
	if b, ok := x.bounds[gp]; ok {
		return b
	}
	var cands []int
	for _, i := range x.commits[gp] {
		if x.h[i].(history.Commit).Outcome != history.Fail {
			cands = append(cands, i)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		return x.h[cands[i]].(history.Commit).Invoke < x.h[cands[j]].(history.Commit).Invoke
	})
	b := &commitBound{}
	var cur history.Offset
	by := -1
	for j, i := range cands {
		cm := x.h[i].(history.Commit)
		switch {
		case cm.Reset:
			cur, by = cm.Offset, i
			for _, k := range cands[:j] {
				if prev := x.h[k].(history.Commit); prev.Complete >= cm.Invoke && prev.Offset > cur {
					cur, by = prev.Offset, k
				}
			}
		case by < 0 || cm.Offset > cur:
			cur, by = cm.Offset, i
		}
		b.invokes = append(b.invokes, cm.Invoke)
		b.highest = append(b.highest, cur)
		b.by = append(b.by, by)
	}
	x.bounds[gp] = b
	return b
}
