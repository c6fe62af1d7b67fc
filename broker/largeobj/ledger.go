package largeobj

// ledger.go owns Release, the reference ledger's side of Sweep: whether a
// published object may go. The decision is tier.PlanRelease's (the one
// retention state machine); the partitions' leaders fold the entries
// against their log starts (tier/largerefs.go), so what is left here is an
// object's entries of live topics.
//
// Invariant: an object is condemned (claims refused from then on) only by
// a transaction conditioned on no entry of it having changed since they
// were listed and none of a live topic being left, and Release answers true
// only for a condemned object whose grace has run; a published session not
// claimed through the ledger is never released.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier"
)

// Release decides whether published session u's object may be deleted now
// (Config.Release's default): it drops the entries of deleted topics,
// condemns an object no entry is left of, and answers true once a
// condemned object's grace has run.
func (s *Service) Release(ctx context.Context, u meta.Upload) (bool, error) {
	refs, rev, err := s.cfg.Sessions.RefsOfObject(ctx, u.ID)
	if err != nil {
		return false, err
	}
	live := 0
	if len(refs) > 0 {
		// The topics are read after the entries: a topic an entry names
		// existed when it was claimed, so one missing now was deleted.
		topics, err := s.cfg.Sessions.Topics(ctx)
		if err != nil {
			return false, err
		}
		ids := make(map[[16]byte]bool, len(topics))
		for _, t := range topics {
			ids[t.ID] = true
		}
		for _, r := range refs {
			if ids[r.TopicID] {
				live++
				continue
			}
			if err := s.cfg.Sessions.DropRef(ctx, r); err != nil && !errors.Is(err, meta.ErrConflict) {
				return false, err
			}
			live++ // dropped now; the next sweep condemns on a fresh listing
		}
	}
	now := s.cfg.Now()
	step, due := tier.PlanRelease(u.Ledger, live, u.ReleaseDueMs, now, s.cfg.Grace)
	switch step {
	case tier.ReleaseCondemn:
		next := u
		next.ReleaseDueMs = due
		if _, err := s.cfg.Sessions.CondemnUpload(ctx, next, rev); err != nil {
			if errors.Is(err, meta.ErrConflict) {
				return false, nil // a claim came meanwhile
			}
			return false, fmt.Errorf("largeobj: condemn %q: %w", u.ID, err)
		}
		s.log.Info().Str("session", u.ID).Str("tenant", u.Tenant).Time("due", time.UnixMilli(due)).
			Msg("no live record references the large object; it goes after the grace period")
		return false, nil
	case tier.ReleaseDelete:
		return true, nil
	}
	return false, nil
}
