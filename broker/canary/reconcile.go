package canary

// This file owns the pure core: the reconciliation of the broker's,
// the group's and the business store's states of every id sent.
// Invariants (doc.go): each id counts as a mismatch at most once; an id
// whose publish failed never counts; an id is forgotten once settled
// (acknowledged, in the store, committed past) or LostAfter after it was
// sent.

import (
	"strconv"
	"sync"
	"time"
)

// Mismatch kinds (the kind label of sluice_canary_mismatches_total).
const (
	KindSkipped = "skipped" // a committed offset passed an acknowledged id without a result
	KindLost    = "lost"    // an acknowledged id has no result LostAfter after it was sent
	KindOffset  = "offset"  // the result names another partition or offset than the acknowledgement
)

// Kinds lists every mismatch kind.
var Kinds = []string{KindSkipped, KindLost, KindOffset}

// Mismatch is one id whose states disagree.
type Mismatch struct {
	Kind string
	ID   string
	// Partition and Offset are where the broker acknowledged the id.
	Partition int32
	Offset    int64
	Detail    string
}

// Result is the business store's record of an id.
type Result struct {
	Partition int32
	Offset    int64
}

// Lookup answers the business store's result of id.
type Lookup func(id string) (Result, bool)

// entry is one id sent by this canary.
type entry struct {
	sent    time.Time
	acked   bool
	failed  bool
	at      Result // where the broker acknowledged it
	applied bool   // the consumer wrote its result (seen by Applied)
	flagged bool   // counted as a mismatch already
}

// Reconciler tracks the ids one canary sent. It is safe for concurrent use.
type Reconciler struct {
	now       func() time.Time
	lostAfter time.Duration

	mu        sync.Mutex
	ids       map[string]*entry
	committed map[int32]int64 // the group's committed offset (next to consume) per partition
}

// NewReconciler returns a Reconciler that reads time from now and counts
// an acknowledged id with no result after lostAfter as lost.
func NewReconciler(now func() time.Time, lostAfter time.Duration) *Reconciler {
	return &Reconciler{now: now, lostAfter: lostAfter, ids: map[string]*entry{}, committed: map[int32]int64{}}
}

// Sent records that id is about to be published.
func (r *Reconciler) Sent(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = &entry{sent: r.now()}
}

// Acked records the broker's acknowledgement of id at partition p, offset o.
func (r *Reconciler) Acked(id string, p int32, o int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.ids[id]; e != nil {
		e.acked, e.at = true, Result{Partition: p, Offset: o}
	}
}

// Failed records that publishing id failed: its outcome is unknown.
func (r *Reconciler) Failed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.ids[id]; e != nil {
		e.failed = true
	}
}

// Applied records that the consumer wrote id's result; it returns the time
// since id was sent, and false for an id this canary does not track (sent
// by an earlier run, or forgotten) or whose result was already counted.
func (r *Reconciler) Applied(id string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.ids[id]
	if e == nil || e.applied {
		return 0, false
	}
	e.applied = true
	return r.now().Sub(e.sent), true
}

// Committed records the group's committed offset of partition p (the next
// offset to consume), as the coordinator answers it.
func (r *Reconciler) Committed(p int32, next int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.committed[p] = next
}

// Check compares every tracked id's acknowledgement with the store
// (lookup) and the committed offsets. It returns the new mismatches and
// forgets the ids that are settled or past LostAfter.
func (r *Reconciler) Check(lookup Lookup) []Mismatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []Mismatch
	for id, e := range r.ids {
		old := now.Sub(e.sent) > r.lostAfter
		if !e.acked {
			if old {
				delete(r.ids, id) // failed or never answered: nothing to hold it to
			}
			continue
		}
		res, stored := lookup(id)
		next, hasCommit := r.committed[e.at.Partition]
		passed := hasCommit && next > e.at.Offset
		flag := func(kind, detail string) {
			if !e.flagged {
				e.flagged = true
				out = append(out, Mismatch{Kind: kind, ID: id, Partition: e.at.Partition, Offset: e.at.Offset, Detail: detail})
			}
		}
		switch {
		case stored && res != e.at:
			flag(KindOffset, "result at partition "+itoa(int64(res.Partition))+" offset "+itoa(res.Offset))
		case !stored && passed:
			flag(KindSkipped, "committed offset "+itoa(next)+" without a result")
		case !stored && old:
			flag(KindLost, "no result after "+r.lostAfter.String())
		}
		if (stored && passed) || old || e.flagged {
			delete(r.ids, id)
		}
	}
	return out
}

// OldestUnapplied is the age of the oldest acknowledged id whose result the
// consumer has not written yet (0 when none).
func (r *Reconciler) OldestUnapplied() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var oldest time.Duration
	for _, e := range r.ids {
		if e.acked && !e.applied && !e.flagged {
			oldest = max(oldest, now.Sub(e.sent))
		}
	}
	return oldest
}

// Tracked is the number of ids held.
func (r *Reconciler) Tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
