package tier

// largerefs.go is the retention state machine's part for large payloads
// (broker/largeobj): the pure decisions over the reference ledger
// (meta/largerefs.go) and the executor's per-partition fold, which the
// leader runs in each retention pass. doc.go ("Large objects") states the
// ledger's invariant.
//
// Invariant: an entry is closed only once its claim is older than Settle,
// with a bound no lower than the partition's log end at that moment; it is
// dropped only once closed with a bound at or below the partition's log
// start. An object is condemned only when no entry of a live topic is left,
// and deleted only once the grace period since its condemnation has run.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// DefaultRefSettle is how long after a claim its record is surely
// appended or never will be: far beyond the produce paths' claim timeout
// (10 s) and any produce request's timeout.
const DefaultRefSettle = 15 * time.Minute

// RefLedger is what the fold needs of the ledger; *meta.Store has it.
type RefLedger interface {
	RefsOfPartition(ctx context.Context, topicID [16]byte, n int32) ([]meta.LargeRef, error)
	CloseRef(ctx context.Context, r meta.LargeRef, upto int64) error
	DropRef(ctx context.Context, r meta.LargeRef) error
}

var _ RefLedger = (*meta.Store)(nil)

// RefAction is one change the fold makes to a ledger entry.
type RefAction struct {
	Ref   meta.LargeRef
	Close bool  // close the entry with bound Upto
	Upto  int64 // with Close
	Drop  bool  // no record of the partition names the object any more
}

// FoldPartitionRefs decides what happens to a partition's ledger entries,
// given the partition's log start and log end as its leader sees them:
// an open entry whose claim is older than settle is closed at the log end
// (every record of that claim, if appended at all, is below it); a closed
// entry whose bound is at or below the log start is dropped. Anything else
// stays as it is.
func FoldPartitionRefs(refs []meta.LargeRef, logStart, logEnd int64, now time.Time, settle time.Duration) []RefAction {
	var out []RefAction
	for _, r := range refs {
		switch {
		case r.Open && now.UnixMilli() >= r.ClaimedMs+settle.Milliseconds():
			out = append(out, RefAction{Ref: r, Close: true, Upto: max(r.Upto, logEnd)})
		case !r.Open && r.Upto <= logStart:
			out = append(out, RefAction{Ref: r, Drop: true})
		}
	}
	return out
}

// ReleaseStep is what PlanRelease decides for a published object.
type ReleaseStep int

// The steps of an object's release.
const (
	ReleaseKeep    ReleaseStep = iota // a live record may reference it, or its grace runs
	ReleaseCondemn                    // no entry is left: start the grace period (refuse claims)
	ReleaseDelete                     // condemned and the grace has run: delete the object
)

func (s ReleaseStep) String() string {
	switch s {
	case ReleaseCondemn:
		return "condemn"
	case ReleaseDelete:
		return "delete"
	}
	return "keep"
}

// PlanRelease decides a published object's next step from its ledger
// entries of live topics (live), whether its claims went through the
// ledger at all (ledger), the due time of its condemnation (0: none) and
// now. A condemnation is due at now + grace.
func PlanRelease(ledger bool, live int, dueMs int64, now time.Time, grace time.Duration) (ReleaseStep, int64) {
	switch {
	case !ledger || live > 0:
		return ReleaseKeep, dueMs
	case dueMs == 0:
		return ReleaseCondemn, now.Add(grace).UnixMilli()
	case now.UnixMilli() >= dueMs:
		return ReleaseDelete, dueMs
	}
	return ReleaseKeep, dueMs
}

// foldRefs runs the fold of t's partition (its leader only) at the log
// start and log end given; a lost race with a claim is left for the next
// pass.
func (m *Manager) foldRefs(ctx context.Context, t Target, logStart, logEnd int64) error {
	if m.cfg.Refs == nil || t.Fence == nil {
		return nil
	}
	refs, err := m.cfg.Refs.RefsOfPartition(ctx, t.P.TopicID(), t.P.Index())
	if err != nil || len(refs) == 0 {
		return err
	}
	settle := m.cfg.RefSettle
	if settle <= 0 {
		settle = DefaultRefSettle
	}
	var errs []error
	for _, a := range FoldPartitionRefs(refs, logStart, logEnd, m.cfg.Now(), settle) {
		if a.Close {
			err = m.cfg.Refs.CloseRef(ctx, a.Ref, a.Upto)
		} else {
			err = m.cfg.Refs.DropRef(ctx, a.Ref)
		}
		switch {
		case errors.Is(err, meta.ErrConflict): // a claim came meanwhile: next pass
		case err != nil:
			errs = append(errs, fmt.Errorf("tier: large ref %s of partition %d: %w", a.Ref.Ref, a.Ref.Partition, err))
		case a.Drop:
			m.stats.refsDropped.Add(1)
		}
	}
	return errors.Join(errs...)
}
