package main

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
)

// TestObjectsAndVerifyReferences: `tierctl objects` lists a published
// large object with its reference and plan, an orphan and an open session;
// `tierctl verify` passes while the referenced object holds its size and
// sha256, and fails (exit 1, naming it) when its bytes differ or it is gone.
func TestObjectsAndVerifyReferences(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	body := []byte(strings.Repeat("large payload ", 100))
	sum := sha256.Sum256(body)
	now := time.Now()
	mk := func(id string, state meta.UploadState) meta.Upload {
		u, err := f.meta.CreateUpload(ctx, meta.Upload{ID: id, Tenant: "default", Topic: "orders", Size: int64(len(body)),
			SHA256: hex.EncodeToString(sum[:]), State: state, CreatedMs: now.UnixMilli(), ExpiresMs: now.Add(time.Hour).UnixMilli(),
			ObjectKey: "large/default/" + id, UploadID: "u-" + id, PartSize: 5 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	pub := mk("pub1", meta.UploadCompleted)
	mk("orphan1", meta.UploadCompleted)
	mk("open1", meta.UploadOpen)
	if err := f.store.Put(ctx, pub.ObjectKey, body); err != nil {
		t.Fatal(err)
	}
	next := pub
	next.State, next.PublishedMs, next.Ledger = meta.UploadPublished, now.UnixMilli(), true
	if err := f.meta.ClaimRef(ctx, next, true, meta.LargeRef{Tenant: "default", Topic: "orders", TopicID: f.topic.ID,
		Partition: 0, ClaimedMs: now.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	var objs []largeObject
	decodeJSON(t, f.mustRun(t, 0, "objects", "--json"), &objs)
	plans := map[string]largeObject{}
	for _, o := range objs {
		plans[o.Ref] = o
	}
	if o := plans["pub1"]; o.State != "published" || len(o.Refs) != 1 || o.Refs[0].Topic != "orders" || !o.Refs[0].Open ||
		!strings.HasPrefix(o.Plan, "keep: 1 live") {
		t.Fatalf("the published object: %+v", o)
	}
	if o := plans["orphan1"]; !strings.HasPrefix(o.Plan, "orphan: deleted at") || len(o.Refs) != 0 {
		t.Fatalf("the orphan: %+v", o)
	}
	if o := plans["open1"]; !strings.HasPrefix(o.Plan, "aborted at") {
		t.Fatalf("the open session: %+v", o)
	}
	if out := f.mustRun(t, 0, "objects"); !strings.Contains(out, "pub1") || !strings.Contains(out, "orders/0") {
		t.Fatalf("objects:\n%s", out)
	}
	if out := f.mustRun(t, 0, "verify"); !strings.Contains(out, "verified 1 large objects named by live references") {
		t.Fatalf("verify of a good reference:\n%s", out)
	}
	// Same size, other bytes: the sha256 differs.
	bad := []byte(strings.Repeat("LARGE payload ", 100))
	if err := f.store.Put(ctx, pub.ObjectKey, bad); err != nil {
		t.Fatal(err)
	}
	var res verifyResult
	decodeJSON(t, f.mustRun(t, 1, "verify", "--json"), &res)
	if len(res.Problems) != 1 || res.Problems[0].Where != pub.ObjectKey || !strings.Contains(res.Problems[0].Problem, "sha256") {
		t.Fatalf("verify of a changed object: %+v", res)
	}
	if err := f.store.Put(ctx, pub.ObjectKey, body[:10]); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, f.mustRun(t, 1, "verify", "--json"), &res)
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Problem, "holds 10 bytes") {
		t.Fatalf("verify of a short object: %+v", res)
	}
	if err := f.store.Delete(ctx, pub.ObjectKey); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, f.mustRun(t, 1, "verify", "--json"), &res)
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Problem, "object") {
		t.Fatalf("verify of a missing object: %+v", res)
	}
}
