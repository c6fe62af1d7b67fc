package largeobj

// sweep.go owns Sweep and Run: the time-to-live of sessions.
//
// Invariant: a session's state changes (by transaction) before its bytes are
// deleted, so a Claim racing a sweep either publishes first (and the sweep
// skips the session) or hears ref.ErrExpired.
// Invariant: Sweep deletes a published object only when Config.Release
// says so (by default the reference ledger's, ledger.go).
// Invariant: Sweep recounts the tenants' byte counters (quota.go) only
// from a complete listing of the records at one revision.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// SweepStats counts what one Sweep did.
type SweepStats struct {
	Aborted  int // open sessions past their TTL: multipart aborted
	Expired  int // completed sessions past their TTL unpublished: object deleted
	Released int // published objects the ledger released: deleted
	Purged   int // records of aborted and expired sessions forgotten
	// Recounted: tenants' byte counters the recount corrected (records
	// that predate the counters, or written by an earlier version).
	Recounted int
	Errors    int
}

// Sweep applies the TTL at now to every session.
func (s *Service) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	var all []meta.Upload
	rev, err := s.cfg.Sessions.ListUploadsAt(ctx, func(u meta.Upload) error { all = append(all, u); return nil })
	if err != nil {
		s.log.Warn().Err(err).Msg("list upload sessions")
		if len(all) == 0 {
			return st, err
		}
		st.Errors++
	} else if st.Recounted, err = s.recount(ctx, rev, all); err != nil {
		s.log.Warn().Err(err).Msg("recount stored bytes")
		st.Errors++
	}
	for _, u := range all {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		expires := time.UnixMilli(u.ExpiresMs)
		switch {
		case u.State == meta.UploadOpen && !now.Before(expires):
			next := u
			next.State, next.Reason, next.HashState = meta.UploadAborted, "never completed within its time to live", nil
			if s.transition(ctx, next, &st) {
				s.cleanup(ctx, next, false)
				st.Aborted++
			}
		case u.State == meta.UploadCompleted && !now.Before(expires):
			next := u
			next.State, next.Reason = meta.UploadExpired, "completed and not published within its time to live"
			if s.transition(ctx, next, &st) {
				s.cleanup(ctx, next, true)
				st.Expired++
			}
		case (u.State == meta.UploadAborted || u.State == meta.UploadExpired) && !now.Before(expires.Add(s.cfg.Retain)):
			// Delete again (it is idempotent) before the record, which is
			// the only memory of the bytes, goes.
			if !s.cleanup(ctx, u, true) {
				st.Errors++
				continue
			}
			if err := s.cfg.Sessions.DeleteUpload(ctx, u); err != nil && !errors.Is(err, meta.ErrConflict) {
				st.Errors++
				continue
			}
			st.Purged++
		case u.State == meta.UploadPublished && s.cfg.Release != nil:
			ok, err := s.cfg.Release(ctx, u)
			if err != nil || !ok {
				if err != nil {
					st.Errors++
				}
				continue
			}
			next := u
			next.State, next.Reason, next.ExpiresMs = meta.UploadExpired, "released by the reference ledger", now.UnixMilli()
			if s.transition(ctx, next, &st) {
				s.cleanup(ctx, next, true)
				st.Released++
			}
		}
	}
	orphans := 0
	for _, u := range all {
		if u.State == meta.UploadCompleted {
			orphans++ // completed, not published yet: deleted at its TTL unless claimed
		}
	}
	s.totals.add(st, orphans-st.Expired)
	if st.Aborted+st.Expired+st.Released+st.Purged+st.Errors > 0 {
		s.log.Info().Int("aborted", st.Aborted).Int("expired", st.Expired).Int("released", st.Released).
			Int("purged", st.Purged).Int("errors", st.Errors).Msg("upload sessions swept")
	}
	return st, nil
}

// transition writes next; false when another broker changed it meanwhile
// (a Claim, a Complete or another sweep: the next sweep sees its result).
func (s *Service) transition(ctx context.Context, next meta.Upload, st *SweepStats) bool {
	if _, err := s.update(ctx, next); err != nil {
		if !errors.Is(err, ErrConflict) {
			s.log.Warn().Err(err).Str("session", next.ID).Msg("sweep a session")
			st.Errors++
		}
		return false
	}
	return true
}

// Run sweeps every interval until ctx ends. First, when the byte counters
// were never counted (records that predate them), it recounts them, so the
// quota checks read them from then on.
func (s *Service) Run(ctx context.Context, every time.Duration) {
	if _, err := s.cfg.Sessions.ListUploadBytes(ctx); errors.Is(err, meta.ErrUncounted) {
		if _, err := s.recount(ctx, 0, nil); err != nil {
			s.log.Warn().Err(err).Msg("recount stored bytes at start; the sweeps try again")
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Sweep(ctx, s.cfg.Now())
		}
	}
}

// totals are the sweeps' counts since the Service started, for metrics.
type totals struct {
	aborted, expired, released atomic.Int64
	orphans                    atomic.Int64 // completed unpublished sessions at the last sweep
}

func (t *totals) add(st SweepStats, orphans int) {
	t.aborted.Add(int64(st.Aborted))
	t.expired.Add(int64(st.Expired))
	t.released.Add(int64(st.Released))
	t.orphans.Store(int64(orphans))
}

// Totals are the sweeps' counts since the Service started.
type Totals struct {
	Aborted  int64 // sessions never completed, aborted at their TTL
	Expired  int64 // orphans (completed, never published) deleted at their TTL
	Released int64 // published objects deleted once no live record referenced them
	Orphans  int64 // completed unpublished sessions at the last sweep
}

// Totals returns the sweeps' counts.
func (s *Service) Totals() Totals {
	return Totals{Aborted: s.totals.aborted.Load(), Expired: s.totals.expired.Load(),
		Released: s.totals.released.Load(), Orphans: s.totals.orphans.Load()}
}
