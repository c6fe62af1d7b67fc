package tier

// The retention machine (machine.go) carrying out the grace period: objects
// below a moved log start stay until it has run.

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

// Objects below a log start that retention or DeleteRecords moved stay for
// the grace period (a reader may be streaming one), however many passes
// run, and go once it has run.
func TestObjectsBelowAMovedStartOutliveTheGrace(t *testing.T) {
	const grace = time.Hour
	keep := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited, LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited, Grace: grace}
	for _, how := range []string{"retention", "DeleteRecords"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, mem.New())
			for range 3 {
				f.append(t, 6)
				f.pass(t, keep)
			}
			before, err := f.store.RemoteHead(t.Context(), f.p.id, 0)
			if err != nil || len(before.Objects) < 2 {
				t.Fatalf("head after uploads: %+v, %v", before, err)
			}
			policy := keep
			switch how {
			case "retention":
				policy.RetentionMs = 0 // every closed byte is past retention
			case "DeleteRecords":
				if err := f.m.AdvanceLogStart(t.Context(), f.fence, wal.Offset(before.RemoteEnd)); err != nil {
					t.Fatal(err)
				}
			}
			exist := func() int {
				n := 0
				for _, o := range before.Objects {
					if _, err := f.obj.Head(t.Context(), o.Key); err == nil {
						n++
					} else if !errors.Is(err, objstore.ErrNotFound) {
						t.Fatal(err)
					}
				}
				return n
			}
			if how == "retention" {
				f.clock.Advance(time.Millisecond) // the newest record is now past retention.ms=0 too
			}
			f.pass(t, policy)
			h, _ := f.store.RemoteHead(t.Context(), f.p.id, 0)
			if h.LogStart != before.RemoteEnd || h.PendingClean != before.RemoteEnd || h.PendingCleanMs != f.clock.Now().Add(grace).UnixMilli() {
				t.Fatalf("head after the log start moved: log start %d, pending clean %d due %d; want both %d, due in %v",
					h.LogStart, h.PendingClean, h.PendingCleanMs, before.RemoteEnd, grace)
			}
			due := time.UnixMilli(h.PendingCleanMs)
			for i := range 4 {
				f.clock.Advance(due.Sub(f.clock.Now()) / 2)
				if i == 3 {
					f.clock.Advance(due.Sub(f.clock.Now()) - time.Millisecond)
				}
				f.pass(t, policy)
				if n := exist(); n != len(before.Objects) {
					t.Fatalf("pass at %v before the grace ends: %d of %d objects left", due.Sub(f.clock.Now()), n, len(before.Objects))
				}
			}
			f.clock.Advance(time.Millisecond)
			f.pass(t, policy)
			if n := exist(); n != 0 {
				t.Fatalf("after the grace: %d of %d objects left", n, len(before.Objects))
			}
		})
	}
}
