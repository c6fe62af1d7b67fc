package redriveapi

// This file owns what a job knows of the jobs before it on the same DLQ and
// target (a repeated redrive), so that it does not publish again what one
// of them published; runner.go states the invariant.
//
// Nothing is stored per offset: an earlier job's frozen scope and, per DLQ
// partition, its start and last recorded cursor say which DLQ records it
// decided and published (those in [start, cursor) that its scope matches).
// What it published past its recorded cursor (its runner died or was cut
// off before the next progress write) is read back from the target, as a
// resumed runner does for its own job: the copies whose
// sluice.redrive.source names it and a DLQ offset at or after its cursor.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/queue"
)

// span is the DLQ offsets [From, To) an earlier job decided in a partition.
type span struct{ From, To int64 }

// earlier is one ended job on the same DLQ and target as a later job.
type earlier struct {
	ID      string
	Scope   queue.RedriveScope
	Decided map[int32]span
	// Beyond holds, per DLQ partition, offsets at or after its recorded
	// cursor whose copies it published (found on the target).
	Beyond map[int32]map[int64]bool
}

// coveredBy reports the earlier job that published DLQ record rec of
// partition p already, if one did: it decided the record (its offset is
// in the job's decided span) and its scope took it, or a copy of it
// naming that job is on the target past its recorded cursor.
func coveredBy(prior []earlier, p int32, rec Record) (string, bool) {
	for _, e := range prior {
		if e.Beyond[p][rec.Offset] {
			return e.ID, true
		}
		if d, ok := e.Decided[p]; ok && rec.Offset >= d.From && rec.Offset < d.To &&
			e.Scope.Match(rec.Offset, rec.TimestampMs, rec.Key, rec.Headers) {
			return e.ID, true
		}
	}
	return "", false
}

// covered reports whether an earlier job published rec already.
func (w *worker) covered(rec Record) bool {
	_, ok := coveredBy(w.prior, w.prog.Partition, rec)
	return ok
}

// before orders jobs by creation (their ids break ties).
func before(a, b meta.Redrive) bool {
	return a.CreatedMs < b.CreatedMs || (a.CreatedMs == b.CreatedMs && a.ID < b.ID)
}

// errEarlierBusy: a job on the same DLQ and target still runs (created
// before this one), or ended but its runner still holds its claim (it may
// still write its progress); this job waits for it.
var errEarlierBusy = errors.New("an earlier redrive of the same DLQ to the same target is still running")

// earlierJobs loads the ended jobs on job's DLQ and target, with their
// progress and the copies they published past it. It refuses with
// errEarlierBusy while one of them may still publish or record progress.
func (m *Manager) earlierJobs(ctx context.Context, job meta.Redrive) ([]earlier, error) {
	jobs, err := m.store.ListRedrives(ctx)
	if err != nil {
		return nil, err
	}
	var out []earlier
	partial := map[string]map[int32]meta.RedriveProgress{} // ended short of their ends: scanned below
	var scanFrom map[int32]int64
	for _, j := range jobs {
		if j.ID == job.ID || j.DLQ != job.DLQ || j.Target != job.Target {
			continue
		}
		if j.State == meta.RedriveRunning {
			if before(j, job) {
				return nil, fmt.Errorf("%w: %s", errEarlierBusy, j.ID)
			}
			continue // it waits for this one
		}
		if _, held, err := m.store.RedriveHolder(ctx, j.ID); err != nil {
			return nil, err
		} else if held {
			return nil, fmt.Errorf("%w: %s (%s, its runner still stopping)", errEarlierBusy, j.ID, j.State)
		}
		j, prog, err := m.store.GetRedrive(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		e := earlier{ID: j.ID, Scope: scopeOf(j.Scope), Decided: map[int32]span{}, Beyond: map[int32]map[int64]bool{}}
		for p, end := range j.Ends {
			cur := j.Starts[p]
			pr, ok := prog[p]
			if ok {
				cur = pr.Cursor
			}
			e.Decided[p] = span{From: j.Starts[p], To: cur}
			if cur >= end {
				continue
			}
			if partial[j.ID] == nil {
				partial[j.ID] = map[int32]meta.RedriveProgress{}
			}
			partial[j.ID][p] = meta.RedriveProgress{Partition: p, Cursor: cur}
			if scanFrom == nil {
				scanFrom = map[int32]int64{}
			}
			for tp, start := range j.TargetStarts {
				if mark, ok := pr.Marks[tp]; ok {
					start = mark
				}
				if from, ok := scanFrom[tp]; !ok || start < from {
					scanFrom[tp] = start
				}
			}
		}
		out = append(out, e)
	}
	if len(partial) == 0 {
		return out, nil
	}
	byID := map[string]*earlier{}
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	found := 0
	err = m.scanCopies(ctx, job.Target, func(tp int32) int64 { return scanFrom[tp] }, func(id string, p int32, o int64) {
		if pr, ok := partial[id][p]; ok && o >= pr.Cursor {
			e := byID[id]
			if e.Beyond[p] == nil {
				e.Beyond[p] = map[int64]bool{}
			}
			e.Beyond[p][o] = true
			found++
		}
	})
	if err != nil {
		return nil, err
	}
	if found > 0 {
		m.log.Info().Str("redrive", job.ID).Int("found", found).
			Msg("copies an earlier redrive published past its recorded progress found on the target; not publishing them again")
	}
	return out, nil
}

// scanCopies reads each partition tp of target from from(tp) to its log
// end as the leader had it when the scan reached the partition (settled)
// and calls each for every record carrying a well-formed
// sluice.redrive.source header.
func (m *Manager) scanCopies(ctx context.Context, target string, from func(tp int32) int64, each func(job string, p int32, off int64)) error {
	n, ok := m.be.Partitions(target)
	if !ok {
		return fmt.Errorf("%w: %s", errTargetGone, target)
	}
	for tp := range n {
		at := from(tp)
		hw, err := m.settled(ctx, target, tp)
		if err != nil {
			return fmt.Errorf("scan %s-%d: %w", target, tp, err)
		}
		for at < hw {
			recs, err := m.be.Read(ctx, target, tp, at, readBytes)
			if err != nil {
				return fmt.Errorf("scan %s-%d at %d: %w", target, tp, at, err)
			}
			if len(recs) == 0 || recs[len(recs)-1].Offset < at {
				break
			}
			for _, rec := range recs {
				for _, h := range rec.Headers {
					if h.Key != queue.HeaderRedriveSource {
						continue
					}
					if id, p, o, err := queue.ParseRedriveSource(string(h.Value)); err == nil {
						each(id, p, o)
					}
					break
				}
			}
			at = recs[len(recs)-1].Offset + 1
		}
	}
	return nil
}

// settled waits until the high watermark of partition tp of target has
// passed the leader's log end as first read, and answers it. A copy a dead
// runner's publish appended just before it died may be on the leader
// above the high watermark, unacknowledged (its followers had not all
// reported it, or a new leader's high watermark had not caught up yet);
// it becomes readable moments later. Reading only to the high watermark
// would miss it and publish the record again. Whatever the leader holds
// when the scan starts is therefore waited for: committed, it is read;
// replaced by a new leader's log, it can no longer appear.
func (m *Manager) settled(ctx context.Context, target string, tp int32) (int64, error) {
	b, err := m.be.Bounds(ctx, target, tp)
	if err != nil {
		return 0, err
	}
	end := b.End
	deadline := m.now().Add(settleTimeout)
	for b.HW < end {
		if m.now().After(deadline) {
			return 0, fmt.Errorf("%w: high watermark %d below the log end %d after %v", errUnsettled, b.HW, end, settleTimeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(settlePoll):
		}
		if b, err = m.be.Bounds(ctx, target, tp); err != nil {
			return 0, err
		}
	}
	return b.HW, nil
}

// errUnsettled: a target partition's appended records were not committed
// in time; the scan is tried again later (retryInterval).
var errUnsettled = errors.New("appended records not yet committed")
