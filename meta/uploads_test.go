package meta

import (
	"errors"
	"testing"
)

func testUpload(id string) Upload {
	return Upload{ID: id, Tenant: "acme", Topic: "acme.orders", Size: 100, PartSize: 8 << 20,
		SHA256: "ab", State: UploadOpen, CreatedMs: 1, ExpiresMs: 2, ObjectKey: "large/acme/" + id, UploadID: "u1"}
}

func TestUploadRecords(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	u, err := s.CreateUpload(ctx, testUpload("a1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUpload(ctx, testUpload("a1")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v; want ErrExists", err)
	}
	got, err := s.GetUpload(ctx, "a1")
	if err != nil || got.Revision != u.Revision || got.Tenant != "acme" || got.State != UploadOpen {
		t.Fatalf("GetUpload = %+v, %v", got, err)
	}
	// Two brokers read the same revision; one takes the part, the other loses.
	a, b := got, got
	a.Received, a.HashState, a.Parts = 50, []byte{1, 2, 3}, []UploadPart{{Number: 1, ETag: `"x"`, Size: 50}}
	a2, err := s.UpdateUpload(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	b.Received = 50
	if _, err := s.UpdateUpload(ctx, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("update at a stale revision: %v; want ErrConflict", err)
	}
	got, err = s.GetUpload(ctx, "a1")
	if err != nil || got.Received != 50 || string(got.HashState) != "\x01\x02\x03" || len(got.Parts) != 1 || got.Revision != a2.Revision {
		t.Fatalf("after the update: %+v, %v", got, err)
	}
	bad := got
	bad.Received = 200
	if _, err := s.UpdateUpload(ctx, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("received beyond size: %v; want ErrCorrupt", err)
	}
	if _, err := s.CreateUpload(ctx, testUpload("b2")); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := s.ListUploads(ctx, func(u Upload) error { ids = append(ids, u.ID); return nil }); err != nil || len(ids) != 2 || ids[0] != "a1" {
		t.Fatalf("ListUploads = %v, %v", ids, err)
	}
	if err := s.DeleteUpload(ctx, a); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete at a stale revision: %v", err)
	}
	if err := s.DeleteUpload(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUpload(ctx, "a1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := s.UpdateUpload(ctx, got); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a deleted record: %v; want ErrNotFound", err)
	}
	if err := s.DeleteUpload(ctx, got); err != nil {
		t.Fatalf("delete of a deleted record: %v", err)
	}
}
