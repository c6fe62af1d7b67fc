package tier

// footprint_test.go measures what tiering costs etcd: the stored size of a
// partition's remote index head after many uploads through the manager
// (memory object store, embedded etcd). The head keeps at most
// MaxObjectsInHead objects and names older ones through manifests in the
// bucket, so its objects part is bounded; its list of manifest references
// grows by one reference per MaxObjectsInHead/2 uploads, which the bound
// below allows for.
//
//	go test -run TestHeadFootprint -v ./tier/                         # 1,000 uploads, ~3 s
//	go test -run TestHeadFootprint -v ./tier/ -args -uploads 5000     # ~15 s (make bench-tier)

import (
	"flag"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/cache"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

var flagUploads = flag.Int("uploads", 1000, "uploads of one partition in TestHeadFootprint")

// footprintObjectsInHead is the production default of MaxObjectsInHead.
const footprintObjectsInHead = 64

// Bounds on the stored JSON of a head, for keys of this package's shape: an
// object entry is about 210 bytes (a 110-byte key), a manifest reference
// about 190 (a 120-byte key). Generous, so that only a change of shape (a
// new field, a longer key) trips them.
const (
	headFixedBytes = 1 << 10
	objectRefBytes = 320
	manifestBytes  = 300
)

func TestHeadFootprint(t *testing.T) {
	uploads := *flagUploads
	f := newFixture(t, mem.New())
	c, err := cache.New(cache.Config{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The fixture's manager keeps 4 objects in a head; this one keeps the
	// production default.
	f.m, err = New(Config{Store: f.obj, Index: f.store, Cache: c, ChunkBytes: 1024,
		MaxObjectsInHead: footprintObjectsInHead, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{Tiered: true, RetentionMs: Unlimited, RetentionBytes: Unlimited,
		LocalRetentionMs: Unlimited, LocalRetentionBytes: Unlimited}
	fence := f.fence
	// UploadBytes 1: whatever waits is uploaded, one batch per object.
	target := Target{P: f.p, Policy: policy, UploadBytes: 1, UploadMaxDelay: time.Hour, Fence: &fence}
	start := time.Now()
	checkpoints := map[int]bool{uploads / 10: true, uploads / 2: true, uploads: true}
	for i := 1; i <= uploads; i++ {
		f.append(t, 1)
		// The upload step alone: a maintenance pass also runs retention,
		// whose cost is logged once at the end.
		if err := f.m.maybeUpload(t.Context(), target); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		if checkpoints[i] {
			checkHeadFootprint(t, f, i, time.Since(start))
		}
	}
	if st := f.m.Stats(); st.ObjectsUploaded != int64(uploads) {
		t.Fatalf("%d objects uploaded, want %d", st.ObjectsUploaded, uploads)
	}

	// What the manifests cost a reader and a maintenance pass: a read lists
	// the objects of every manifest from its offset on, a pass those of
	// all (logged, not asserted). One batch at offset 0 against one batch
	// at the end, which only the head names.
	last := f.p.log.EndOffset() - 1
	readOne := func(off wal.Offset) time.Duration {
		if _, err := f.m.Read(t.Context(), f.p.id, 0, off, 1); err != nil { // fills the cache
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := f.m.Read(t.Context(), f.p.id, 0, off, 1); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	first, end := readOne(0), readOne(last)
	t0 := time.Now()
	f.m.Maintain(t.Context(), []Target{target})
	f.m.Wait()
	pass := time.Since(t0)
	if err := f.m.parts[partKey{f.p.id, 0}].lastError; err != nil {
		t.Fatal(err)
	}
	t.Logf("cached reads of one batch: at offset 0 %v, at offset %d %v; a maintenance pass %v", first, last, end, pass)
}

// checkHeadFootprint checks and logs the stored head after n uploads.
func checkHeadFootprint(t *testing.T, f *fixture, n int, elapsed time.Duration) {
	t.Helper()
	heads, bytes, err := f.store.RemoteHeadBytes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.store.RemoteHead(t.Context(), f.p.id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if heads != 1 {
		t.Fatalf("%d heads stored, want 1", heads)
	}
	t.Logf("after %d uploads: head %d bytes in etcd (%d objects, %d manifest references), %.1f s",
		n, bytes, len(h.Objects), len(h.Manifests), elapsed.Seconds())
	if len(h.Objects) > footprintObjectsInHead || len(h.Intents) != 0 {
		t.Fatalf("head holds %d objects and %d intents, want at most %d and none", len(h.Objects), len(h.Intents), footprintObjectsInHead)
	}
	objs, err := ListObjects(t.Context(), f.obj, h) // through the manifest tree
	if err != nil {
		t.Fatal(err)
	}
	named := len(objs)
	for i := 1; i < len(objs); i++ {
		if objs[i].Base != objs[i-1].Next {
			t.Fatalf("objects out of order at %d after %d uploads", i, n)
		}
	}
	if named != n {
		t.Fatalf("head and manifests name %d objects, want %d", named, n)
	}
	if limit := int64(headFixedBytes + footprintObjectsInHead*objectRefBytes + len(h.Manifests)*manifestBytes); bytes > limit {
		t.Fatalf("head of %d bytes after %d uploads; the bound with %d manifest references is %d", bytes, n, len(h.Manifests), limit)
	}
}
