package meta

import (
	"errors"
	"testing"
	"time"
)

// TestCommitOffsetsFencedRetry: a fenced commit tried again with the same
// revision and token (its first try's outcome unknown to the writer) is
// recognised and not written twice, also when only its first transaction
// had applied; a try of an older commit can never land after a newer one;
// a released claim fences the commit; a group delete takes the commit key.
func TestCommitOffsetsFencedRetry(t *testing.T) {
	cfg := embeddedConfig(t)
	cfg.MaxTxnOps = 3 // two offsets and the commit key per transaction
	s := openStore(t, cfg)
	ctx := testContext(t)
	r1, err := s.Register(ctx, testBroker(1), shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	claim, err := s.ClaimGroup(ctx, DefaultTenant, "g", 1, r1.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	topic := newKafkaUUID()
	offsets := func(off int64, n int) []CommittedOffset {
		var out []CommittedOffset
		for p := range n {
			out = append(out, CommittedOffset{OffsetKey: OffsetKey{TopicID: topic, Partition: int32(p)}, Topic: "t",
				Offset: off, LeaderEpoch: -1, Generation: 1, CommitTime: time.UnixMilli(1_767_000_000_000)})
		}
		return out
	}
	committed := func() []int64 {
		t.Helper()
		got, err := s.GroupOffsets(ctx, DefaultTenant, "g")
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, o := range got {
			out = append(out, o.Offset)
		}
		return out
	}
	commitRev := func() int64 {
		t.Helper()
		rev, err := s.GroupCommitRevision(ctx, DefaultTenant, "g")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}

	if rev := commitRev(); rev != 0 {
		t.Fatalf("commit revision of a group never committed: %d", rev)
	}
	// A commit of three offsets is two transactions.
	rev1, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(10, 3), 0, "a", claim.If())
	if err != nil || rev1 == 0 || rev1 != commitRev() {
		t.Fatalf("first commit: revision %d (key at %d), %v", rev1, commitRev(), err)
	}
	// Its retry (as after a lost answer) writes nothing and answers the same revision.
	again, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(10, 3), 0, "a", claim.If())
	if err != nil || again != rev1 || commitRev() != rev1 {
		t.Fatalf("retry of an applied commit: revision %d (key at %d), %v; want %d untouched", again, commitRev(), err, rev1)
	}

	// Only the first transaction of a commit applied (the same first two
	// offsets under the same token): its retry writes the rest.
	if _, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(20, 2), rev1, "b", claim.If()); err != nil {
		t.Fatal(err)
	}
	rev2, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(20, 3), rev1, "b", claim.If())
	if err != nil || rev2 <= rev1 {
		t.Fatalf("retry after the first transaction: revision %d, %v", rev2, err)
	}
	if got := committed(); len(got) != 3 || got[0] != 20 || got[1] != 20 || got[2] != 20 {
		t.Fatalf("offsets after the retried commit: %v, want 20 each", got)
	}

	// A try of the older commit "a" (still on its way) cannot land now, nor
	// can a commit under another token from an old revision.
	if _, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(10, 3), 0, "a-late", claim.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("late try of an older commit: %v, want ErrFenced", err)
	}
	if _, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(15, 1), rev1, "c", claim.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit from a superseded revision: %v, want ErrFenced", err)
	}
	if got := committed(); got[0] != 20 {
		t.Fatalf("offsets after refused tries: %v, want 20 each", got)
	}

	// A released claim fences the commit even at the right revision.
	if err := s.ReleaseGroup(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(30, 1), rev2, "d", claim.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit with a released claim: %v, want ErrFenced", err)
	}
	if _, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(30, 1), rev2, "bad/token", claim.If()); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("token with a slash: %v, want ErrInvalidConfig", err)
	}

	// A generation under the same fence: its retry is recognised, and a
	// try from a superseded revision is refused.
	claim2, err := s.ClaimGroup(ctx, DefaultTenant, "g", 1, r1.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	rev3, err := s.CommitOffsetsFenced(ctx, DefaultTenant, "g", offsets(25, 1), rev2, "e", claim2.If())
	if err != nil {
		t.Fatal(err)
	}
	rev4, err := s.SaveGroupGenerationFenced(ctx, claim2, 7, rev3, "f")
	if err != nil || rev4 <= rev3 {
		t.Fatalf("save generation: revision %d, %v", rev4, err)
	}
	if again, err := s.SaveGroupGenerationFenced(ctx, claim2, 7, rev3, "f"); err != nil || again != rev4 || commitRev() != rev4 {
		t.Fatalf("retry of a stored generation: revision %d (key at %d), %v; want %d", again, commitRev(), err, rev4)
	}
	if _, err := s.SaveGroupGenerationFenced(ctx, claim2, 5, rev3, "late"); !errors.Is(err, ErrFenced) {
		t.Fatalf("generation from a superseded revision: %v, want ErrFenced", err)
	}
	if gen, err := s.GroupGeneration(ctx, DefaultTenant, "g"); err != nil || gen != 7 {
		t.Fatalf("stored generation %d, %v; want 7", gen, err)
	}

	// Deleting the group's offsets takes its commit key.
	if err := s.DeleteGroupOffsetsIf(ctx, DefaultTenant, "g", claim2.If()); err != nil {
		t.Fatal(err)
	}
	if rev := commitRev(); rev != 0 || len(committed()) != 0 {
		t.Fatalf("after the group's delete: commit revision %d, offsets %v", rev, committed())
	}
}
