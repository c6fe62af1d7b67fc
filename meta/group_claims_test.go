package meta

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestGroupClaims(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	r1, err := s.Register(ctx, testBroker(1), shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Register(ctx, testBroker(2), shortTTL)
	if err != nil {
		t.Fatal(err)
	}
	topic := newKafkaUUID()
	offset := func(off int64) []CommittedOffset {
		return []CommittedOffset{{OffsetKey: OffsetKey{TopicID: topic, Partition: 0}, Topic: "t", Offset: off,
			LeaderEpoch: -1, Generation: 1, CommitTime: time.UnixMilli(1_767_000_000_000)}}
	}
	committed := func(group string) int64 {
		t.Helper()
		got, err := s.GroupOffsets(ctx, DefaultTenant, group)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			return -1
		}
		return got[0].Offset
	}

	// Node 1 claims; claiming again with its lease is idempotent; node 2 is refused.
	c1, err := s.ClaimGroup(ctx, DefaultTenant, "team/g", 1, r1.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ClaimGroup(ctx, DefaultTenant, "team/g", 1, r1.Info().Lease)
	if err != nil || again.Revision != c1.Revision {
		t.Fatalf("re-claim by the holder: %+v, %v; want revision %d", again, err, c1.Revision)
	}
	holder, err := s.ClaimGroup(ctx, DefaultTenant, "team/g", 2, r2.Info().Lease)
	if !errors.Is(err, ErrGroupClaimed) || holder.NodeID != 1 || holder.Revision != c1.Revision {
		t.Fatalf("claim of a held group: %+v, %v; want ErrGroupClaimed naming node 1", holder, err)
	}
	if _, err := s.ClaimGroup(ctx, DefaultTenant, "g", 1, 0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("claim without a lease: %v", err)
	}

	// The holder's fenced commit lands.
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "team/g", offset(10), c1.If()); err != nil {
		t.Fatal(err)
	}

	// Released: node 2 takes it, and node 1's commit with its old claim is
	// fenced and changes nothing, as are its fenced deletes.
	if err := s.ReleaseGroup(ctx, c1); err != nil {
		t.Fatal(err)
	}
	c2, err := s.ClaimGroup(ctx, DefaultTenant, "team/g", 2, r2.Info().Lease)
	if err != nil || c2.Revision <= c1.Revision {
		t.Fatalf("claim after release: %+v, %v", c2, err)
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "team/g", offset(5), c1.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit with a released claim: %v, want ErrFenced", err)
	}
	if err := s.DeleteOffsetsIf(ctx, DefaultTenant, "team/g", []OffsetKey{{TopicID: topic}}, c1.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("delete with a released claim: %v, want ErrFenced", err)
	}
	if err := s.DeleteGroupOffsetsIf(ctx, DefaultTenant, "team/g", c1.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("group delete with a released claim: %v, want ErrFenced", err)
	}
	if got := committed("team/g"); got != 10 {
		t.Fatalf("committed offset %d after fenced writes, want 10", got)
	}
	// Releasing the old tenure again does not touch node 2's claim.
	if err := s.ReleaseGroup(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := s.GroupClaimHolder(ctx, DefaultTenant, "team/g"); err != nil || !ok || h.NodeID != 2 || h.Revision != c2.Revision {
		t.Fatalf("holder after a stale release: %+v, %v, %v; want node 2", h, ok, err)
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "team/g", offset(20), c2.If()); err != nil {
		t.Fatal(err)
	}

	// The claim dies with its holder's registration.
	if err := r2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GroupClaimHolder(ctx, DefaultTenant, "team/g"); err != nil || ok {
		t.Fatalf("claim of a deregistered broker: present %v, %v", ok, err)
	}
	if err := s.CommitOffsetsIf(ctx, DefaultTenant, "team/g", offset(1), c2.If()); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit by a deregistered broker: %v, want ErrFenced", err)
	}
	if _, err := s.ClaimGroup(ctx, DefaultTenant, "team/g", 1, r1.Info().Lease); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.GroupClaims(ctx, DefaultTenant); err != nil || len(cs) != 1 || cs[0].Group != "team/g" || cs[0].NodeID != 1 {
		t.Fatalf("GroupClaims: %+v, %v; want node 1's claim on team/g", cs, err)
	} else if err := s.ReleaseGroup(ctx, cs[0]); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.GroupClaims(ctx, DefaultTenant); err != nil || len(cs) != 0 {
		t.Fatalf("GroupClaims after releasing a listed claim: %+v, %v", cs, err)
	}
	if got := committed("team/g"); got != 20 {
		t.Fatalf("committed offset %d, want 20", got)
	}

	// OffsetGroups lists the groups with offsets, unescaped.
	if err := s.CommitOffsets(ctx, DefaultTenant, "a", offset(1)); err != nil {
		t.Fatal(err)
	}
	groups, err := s.OffsetGroups(ctx, DefaultTenant)
	if err != nil || !slices.Equal(groups, []string{"a", "team/g"}) {
		t.Fatalf("OffsetGroups: %q, %v", groups, err)
	}
}
