package meta

import (
	"errors"
	"testing"
)

// TestLargeRefLedger: a claim writes one entry under both keys (by object
// and by partition) and reopens it keeping its bound; close and drop are
// refused at a stale revision (a claim came meanwhile); a condemnation is
// refused when an entry changed after the listing, and a claim is refused
// once the session was condemned (its record changed).
func TestLargeRefLedger(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	u, err := s.CreateUpload(ctx, testUpload("obj1"))
	if err != nil {
		t.Fatal(err)
	}
	topic := [16]byte{1, 2, 3}
	pub := u
	pub.State, pub.Ledger = UploadPublished, true
	if err := s.ClaimRef(ctx, pub, true, LargeRef{Topic: "orders", TopicID: topic, Partition: 2, ClaimedMs: 100}); err != nil {
		t.Fatal(err)
	}
	// The same session record again: its revision moved with the publish.
	if err := s.ClaimRef(ctx, pub, false, LargeRef{TopicID: topic, Partition: 3, ClaimedMs: 100}); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim at a stale session revision: %v; want ErrConflict", err)
	}
	if u, err = s.GetUpload(ctx, "obj1"); err != nil || u.State != UploadPublished || !u.Ledger {
		t.Fatalf("after the claim: %+v, %v", u, err)
	}
	byObj, _, err := s.RefsOfObject(ctx, "obj1")
	if err != nil || len(byObj) != 1 || !byObj[0].Open || byObj[0].Partition != 2 || byObj[0].Ref != "obj1" {
		t.Fatalf("RefsOfObject = %+v, %v", byObj, err)
	}
	byPart, err := s.RefsOfPartition(ctx, topic, 2)
	if err != nil || len(byPart) != 1 || byPart[0] != byObj[0] {
		t.Fatalf("RefsOfPartition = %+v, %v", byPart, err)
	}
	if err := s.CloseRef(ctx, byPart[0], 50); err != nil {
		t.Fatal(err)
	}
	// A claim reopens it and keeps the bound; the fold's stale read loses.
	if err := s.ClaimRef(ctx, u, false, LargeRef{TopicID: topic, Partition: 2, ClaimedMs: 200}); err != nil {
		t.Fatal(err)
	}
	if err := s.DropRef(ctx, byPart[0]); !errors.Is(err, ErrConflict) {
		t.Fatalf("drop at a stale revision: %v; want ErrConflict", err)
	}
	byPart, _ = s.RefsOfPartition(ctx, topic, 2)
	if len(byPart) != 1 || !byPart[0].Open || byPart[0].Upto != 50 || byPart[0].ClaimedMs != 200 {
		t.Fatalf("after the reclaim: %+v", byPart)
	}
	if err := s.CloseRef(ctx, byPart[0], 40); err != nil { // never lowers the bound
		t.Fatal(err)
	}
	byPart, _ = s.RefsOfPartition(ctx, topic, 2)
	if byPart[0].Open || byPart[0].Upto != 50 {
		t.Fatalf("closed below its bound: %+v", byPart[0])
	}
	if err := s.DropRef(ctx, byPart[0]); err != nil {
		t.Fatal(err)
	}
	if all, err := s.AllRefs(ctx); err != nil || len(all) != 0 {
		t.Fatalf("after the drop: %+v, %v", all, err)
	}
	if byPart, _ = s.RefsOfPartition(ctx, topic, 2); len(byPart) != 0 {
		t.Fatalf("the partition's key outlived the drop: %+v", byPart)
	}
	// Listed empty at rev; a claim lands meanwhile: the condemnation loses.
	_, rev, _ := s.RefsOfObject(ctx, "obj1")
	if u, err = s.GetUpload(ctx, "obj1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimRef(ctx, u, false, LargeRef{TopicID: topic, Partition: 0, ClaimedMs: 300}); err != nil {
		t.Fatal(err)
	}
	condemned := u
	condemned.ReleaseDueMs = 999
	if _, err := s.CondemnUpload(ctx, condemned, rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("condemn after a claim: %v; want ErrConflict", err)
	}
	byPart, _ = s.RefsOfPartition(ctx, topic, 0)
	if err := s.DropRef(ctx, byPart[0]); err != nil {
		t.Fatal(err)
	}
	// Listed empty; the condemnation lands first: the claim loses.
	_, rev, _ = s.RefsOfObject(ctx, "obj1")
	if _, err := s.CondemnUpload(ctx, condemned, rev); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimRef(ctx, u, false, LargeRef{TopicID: topic, Partition: 0, ClaimedMs: 400}); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim after the condemnation: %v; want ErrConflict", err)
	}
	if all, _ := s.AllRefs(ctx); len(all) != 0 {
		t.Fatalf("a refused claim left an entry: %+v", all)
	}
}
