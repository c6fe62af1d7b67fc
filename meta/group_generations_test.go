package meta

import (
	"errors"
	"testing"
)

// A group's generation survives its coordinator: it is saved under the
// claim, refused once the claim is gone, read by the next holder, and
// deleted with the group's offsets.
func TestGroupGenerations(t *testing.T) {
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
	if gen, err := s.GroupGeneration(ctx, DefaultTenant, "g/1"); err != nil || gen != 0 {
		t.Fatalf("generation of a group never saved: %d, %v; want 0", gen, err)
	}
	c1, err := s.ClaimGroup(ctx, DefaultTenant, "g/1", 1, r1.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []int32{1, 2, 7} {
		if err := s.SaveGroupGeneration(ctx, c1, gen); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReleaseGroup(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveGroupGeneration(ctx, c1, 8); !errors.Is(err, ErrFenced) {
		t.Fatalf("save by a released claim: %v; want ErrFenced", err)
	}
	c2, err := s.ClaimGroup(ctx, DefaultTenant, "g/1", 2, r2.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	if gen, err := s.GroupGeneration(ctx, DefaultTenant, "g/1"); err != nil || gen != 7 {
		t.Fatalf("the next coordinator reads %d, %v; want 7", gen, err)
	}
	if err := s.DeleteGroupOffsetsIf(ctx, DefaultTenant, "g/1", c2.If()); err != nil {
		t.Fatal(err)
	}
	if gen, err := s.GroupGeneration(ctx, DefaultTenant, "g/1"); err != nil || gen != 0 {
		t.Fatalf("generation after the group's deletion: %d, %v; want 0", gen, err)
	}
	if err := s.SaveGroupGeneration(ctx, c2, -1); err == nil {
		t.Fatal("a negative generation was saved")
	}
}
