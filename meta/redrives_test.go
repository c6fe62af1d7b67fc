package meta

import (
	"errors"
	"testing"
)

func TestRedriveRecords(t *testing.T) {
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
	job := Redrive{ID: "j1", Tenant: "acme", DLQ: "acme.jobs.dlq", Target: "acme.jobs", Rate: 10,
		Scope:  RedriveScope{HasKey: true, Key: []byte("k"), Class: "transient"},
		Starts: map[int32]int64{0: 0, 1: 3}, Ends: map[int32]int64{0: 5, 1: 9}, TargetStarts: map[int32]int64{0: 7},
		State: RedriveRunning, CreatedMs: 1}
	created, err := s.CreateRedrive(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRedrive(ctx, job); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	// One runner at a time: node 1 claims, node 2 is refused.
	c1, err := s.ClaimRedrive(ctx, "j1", 1, r1.Info().Lease)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimRedrive(ctx, "j1", 2, r2.Info().Lease); !errors.Is(err, ErrConflict) {
		t.Fatalf("second claim: %v, want ErrConflict", err)
	}
	if n, ok, err := s.RedriveHolder(ctx, "j1"); err != nil || !ok || n != 1 {
		t.Fatalf("holder %d %v %v", n, ok, err)
	}
	p := RedriveProgress{Partition: 1, Cursor: 6, Marks: map[int32]int64{0: 9}, Redriven: 2, Skipped: 1}
	if err := s.PutRedriveProgress(ctx, c1, p); err != nil {
		t.Fatal(err)
	}
	got, prog, err := s.GetRedrive(ctx, "j1")
	if err != nil || got.Revision != created.Revision || got.Ends[1] != 9 || string(got.Scope.Key) != "k" ||
		prog[1].Cursor != 6 || prog[1].Marks[0] != 9 || prog[1].Redriven != 2 {
		t.Fatalf("GetRedrive = %+v %+v %v", got, prog, err)
	}
	// Cancel at the read revision wins; the runner's stale write loses.
	cancelled := got
	cancelled.State = RedriveCancelled
	if _, err := s.UpdateRedrive(ctx, cancelled, nil); err != nil {
		t.Fatal(err)
	}
	done := got
	done.State = RedriveDone
	if _, err := s.UpdateRedrive(ctx, done, &c1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	// Released, node 2 takes it, and node 1's progress write is fenced.
	if err := s.ReleaseRedrive(ctx, c1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimRedrive(ctx, "j1", 2, r2.Info().Lease); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRedriveProgress(ctx, c1, p); !errors.Is(err, ErrConflict) {
		t.Fatalf("progress under a lost claim: %v, want ErrConflict", err)
	}
	list, err := s.ListRedrives(ctx)
	if err != nil || len(list) != 1 || list[0].State != RedriveCancelled {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, _, err := s.GetRedrive(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}
