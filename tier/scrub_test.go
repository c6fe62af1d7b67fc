package tier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
	"github.com/sluice-mq/sluice/wal"
)

// scrubFixture is a memory bucket on a settable clock holding a standard
// partition (three objects, two in a manifest), written an hour ago.
type scrubFixture struct {
	clk   *clock
	store *mem.Store
	p     *part
	head  meta.RemoteHead
	objs  []meta.RemoteObject
}

const grace = 10 * time.Minute

func newScrubFixture(t *testing.T) *scrubFixture {
	t.Helper()
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	store := mem.NewWithClock(clk.Now)
	p := newPart(store)
	objs := []meta.RemoteObject{p.put(t, 0, 10, 1, 200), p.put(t, 20, 10, 1, 200), p.put(t, 40, 10, 1, 200)}
	h := p.head(t, objs, 2)
	clk.Advance(time.Hour)
	return &scrubFixture{clk: clk, store: store, p: p, head: h, objs: objs}
}

func (f *scrubFixture) diff(t *testing.T, heads ...meta.RemoteHead) DiffReport {
	t.Helper()
	rep, err := Diff(t.Context(), f.store, fixedHeads(heads...), DiffConfig{Grace: grace, Now: f.clk.Now(), StoreNow: f.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// fixedHeads reads heads as they are.
func fixedHeads(heads ...meta.RemoteHead) HeadsFunc {
	return func(context.Context) ([]meta.RemoteHead, error) { return heads, nil }
}

// unlimited is a Limiter that never waits.
type unlimited struct{}

func (unlimited) Wait(ctx context.Context) error { return ctx.Err() }

func TestDiffCleanBucket(t *testing.T) {
	f := newScrubFixture(t)
	rep := f.diff(t, f.head)
	if rep.Listed != 4 || rep.Referenced != 4 || len(rep.Orphans)+len(rep.Missing)+len(rep.Foreign) != 0 {
		t.Fatalf("report of a clean bucket: %+v", rep)
	}
}

func TestDiffOrphansAndScrub(t *testing.T) {
	f := newScrubFixture(t)
	old := f.p.put(t, 60, 2, 2, 200) // a deposed leader's upload, an hour old by the diff
	f.clk.Advance(time.Hour)
	young := f.p.put(t, 60, 2, 3, 200) // an upload whose head write is under way
	if err := f.store.Put(t.Context(), "backups/readme.txt", []byte("not ours")); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Put(t.Context(), "0000/not-a-uuid/0/x.obj", []byte("not ours")); err != nil {
		t.Fatal(err)
	}
	rep := f.diff(t, f.head)
	if len(rep.Orphans) != 2 || len(rep.Foreign) != 2 || len(rep.Missing) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, o := range rep.Orphans {
		switch o.Key {
		case old.Key:
			if !o.Removable || o.Age != time.Hour || o.Base != 60 || o.Epoch != 2 {
				t.Fatalf("old orphan: %+v", o)
			}
		case young.Key:
			if o.Removable {
				t.Fatalf("an orphan younger than the grace is removable: %+v", o)
			}
		default:
			t.Fatalf("unexpected orphan %s", o.Key)
		}
	}
	n, err := Scrub(t.Context(), f.store, rep, unlimited{})
	if err != nil || n != 1 {
		t.Fatalf("Scrub = %d, %v; want 1", n, err)
	}
	if _, err := f.store.Head(t.Context(), old.Key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the old orphan is still there: %v", err)
	}
	for _, k := range []string{young.Key, "backups/readme.txt", "0000/not-a-uuid/0/x.obj", f.objs[0].Key, f.head.Manifests[0].Key} {
		if _, err := f.store.Head(t.Context(), k); err != nil {
			t.Fatalf("%s was deleted: %v", k, err)
		}
	}
	if rep := f.diff(t, f.head); len(rep.Orphans) != 1 || rep.Removable() != 0 {
		t.Fatalf("after the scrub: %+v", rep)
	}
}

func TestDiffIntentIsNotAnOrphan(t *testing.T) {
	f := newScrubFixture(t)
	o := f.p.put(t, 60, 2, 2, 200)
	f.clk.Advance(time.Hour)
	h := f.head
	h.Intents = []meta.RemoteIntent{{Key: o.Key, Base: 60, Epoch: 2}, {Key: objectKey(f.p.id, f.p.n, 60, 4), Base: 60, Epoch: 4}}
	rep := f.diff(t, h)
	if len(rep.Orphans) != 0 || len(rep.Missing) != 0 {
		t.Fatalf("an intent's object (or its absence) was reported: %+v", rep)
	}
}

func TestDiffMissing(t *testing.T) {
	f := newScrubFixture(t)
	if err := f.store.Delete(t.Context(), f.objs[2].Key); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(t.Context(), f.objs[1].Key); err != nil {
		t.Fatal(err)
	}
	rep := f.diff(t, f.head)
	if len(rep.Missing) != 2 {
		t.Fatalf("missing: %+v", rep.Missing)
	}
	for _, m := range rep.Missing {
		want := map[string]string{f.objs[1].Key: f.head.Manifests[0].Key, f.objs[2].Key: "head"}[m.Key]
		if m.NamedBy != want || m.TopicID != f.p.id || m.Partition != f.p.n {
			t.Fatalf("missing %+v, want named by %s", m, want)
		}
	}

	// Below the clean offset, or below a pending clean target whose grace
	// has run, the machine deletes objects: not missing.
	h := f.head
	h.Clean, h.LogStart, h.PendingClean, h.PendingCleanMs = 20, 40, 40, f.clk.Now().UnixMilli()
	if err := f.store.Delete(t.Context(), f.objs[0].Key); err != nil {
		t.Fatal(err)
	}
	rep = f.diff(t, h)
	if len(rep.Missing) != 1 || rep.Missing[0].Key != f.objs[2].Key {
		t.Fatalf("missing below the clean-up: %+v", rep.Missing)
	}
	h.PendingCleanMs = f.clk.Now().Add(time.Minute).UnixMilli()
	if rep = f.diff(t, h); len(rep.Missing) != 2 {
		t.Fatalf("missing inside the grace period: %+v", rep.Missing)
	}
}

func TestDiffMissingManifestHoldsOrphans(t *testing.T) {
	f := newScrubFixture(t)
	if err := f.store.Delete(t.Context(), f.head.Manifests[0].Key); err != nil {
		t.Fatal(err)
	}
	rep := f.diff(t, f.head)
	if len(rep.Missing) != 1 || !rep.Missing[0].Manifest {
		t.Fatalf("missing: %+v", rep.Missing)
	}
	// The manifest's objects look unnamed, but may not go.
	if len(rep.Orphans) != 2 || rep.Removable() != 0 || rep.Orphans[0].Held == "" {
		t.Fatalf("orphans: %+v", rep.Orphans)
	}
}

func TestDiffUnreadableManifestFails(t *testing.T) {
	f := newScrubFixture(t)
	if err := f.store.Put(t.Context(), f.head.Manifests[0].Key, []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, err := Diff(t.Context(), f.store, fixedHeads(f.head), DiffConfig{Grace: grace, Now: f.clk.Now()}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Diff over a corrupt manifest: %v, want ErrCorrupt", err)
	}
}

// fakeSleeper is the clock of a TokenBucket under test: sleeping advances it.
type fakeSleeper struct {
	clk   *clock
	slept time.Duration
	waits int
}

func (s *fakeSleeper) sleep(_ context.Context, d time.Duration) error {
	s.waits++
	s.slept += d
	s.clk.Advance(d)
	return nil
}

func TestScrubRateLimit(t *testing.T) {
	f := newScrubFixture(t)
	f.clk.Advance(-time.Hour)
	for i := range 10 {
		f.p.put(t, 60, 1, wal.Epoch(2+i), 200)
	}
	f.clk.Advance(2 * time.Hour)
	rep := f.diff(t, f.head)
	if rep.Removable() != 10 {
		t.Fatalf("removable: %d", rep.Removable())
	}
	s := &fakeSleeper{clk: f.clk}
	lim := newTokenBucket(2, 1, f.clk.Now, s.sleep)
	start := f.clk.Now()
	n, err := Scrub(t.Context(), f.store, rep, lim)
	if err != nil || n != 10 {
		t.Fatalf("Scrub = %d, %v", n, err)
	}
	// One free token, then one every half second.
	if s.waits != 9 || s.slept != 4500*time.Millisecond || f.clk.Now().Sub(start) != s.slept {
		t.Fatalf("waited %d times for %v, want 9 for 4.5s", s.waits, s.slept)
	}

	// A burst is spent at once; a refill after idle time is capped by it.
	s = &fakeSleeper{clk: f.clk}
	lim = newTokenBucket(1, 3, f.clk.Now, s.sleep)
	for range 3 {
		if err := lim.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if s.waits != 0 {
		t.Fatalf("the burst waited")
	}
	f.clk.Advance(time.Hour)
	for range 4 {
		if err := lim.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if s.waits != 1 || s.slept != time.Second {
		t.Fatalf("after idle: %d waits, %v", s.waits, s.slept)
	}
}

func TestScrubCancelled(t *testing.T) {
	f := newScrubFixture(t)
	f.p.put(t, 60, 1, 2, 200)
	f.clk.Advance(time.Hour)
	rep := f.diff(t, f.head)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := Scrub(ctx, f.store, rep, NewTokenBucket(1, 1)); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Scrub after cancel = %d, %v", n, err)
	}
	if _, err := Scrub(t.Context(), f.store, rep, nil); err == nil {
		t.Fatal("Scrub without a limiter succeeded")
	}
}

// The age of an orphan never compares the scrubber's clock with the
// store's: whatever the skew between them, a key just PUT is not removable
// on its first sighting, nor before the grace has run on the scrubber's own
// clock, and is once it has. (The old rule, scrubber time minus the store's
// LastModified, deleted a fresh PUT when the scrubber ran a grace ahead.)
func TestScrubAgeIgnoresSkewedClocks(t *testing.T) {
	for _, skew := range []time.Duration{0, 2 * grace, -2 * grace, 48 * time.Hour} {
		t.Run(fmt.Sprint("scrubber ahead by ", skew), func(t *testing.T) {
			f := newScrubFixture(t)
			scrubber := &clock{now: f.clk.Now().Add(skew)}
			seen := NewSightings(scrubber.Now)
			pass := func() DiffReport {
				t.Helper()
				rep, err := Diff(t.Context(), f.store, fixedHeads(f.head), DiffConfig{Grace: grace, Now: scrubber.Now(), Seen: seen})
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			young := f.p.put(t, 60, 2, 2, 200) // a manifest-like PUT whose head write is under way
			for i, step := range []time.Duration{0, grace / 2, grace/2 - time.Millisecond} {
				f.clk.Advance(step)
				scrubber.Advance(step)
				if rep := pass(); len(rep.Orphans) != 1 || rep.Orphans[0].Key != young.Key || rep.Removable() != 0 {
					t.Fatalf("pass %d after the PUT: %+v; want it kept", i, rep.Orphans)
				}
			}
			f.clk.Advance(time.Millisecond)
			scrubber.Advance(time.Millisecond)
			rep := pass()
			if rep.Removable() != 1 || rep.Orphans[0].SeenFor != grace {
				t.Fatalf("seen unnamed for the grace: %+v", rep.Orphans)
			}
			if n, err := Scrub(t.Context(), f.store, rep, unlimited{}); n != 1 || err != nil {
				t.Fatalf("Scrub = %d, %v", n, err)
			}
			if rep := pass(); len(rep.Orphans) != 0 || seen.Len() != 0 {
				t.Fatalf("after the scrub: %+v, %d remembered", rep.Orphans, seen.Len())
			}

			// One shot (tierctl diff): the age is the store's clock against
			// itself, whatever Now says.
			fresh := f.p.put(t, 60, 2, 3, 200)
			rep, err := Diff(t.Context(), f.store, fixedHeads(f.head), DiffConfig{Grace: grace, Now: scrubber.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Orphans) != 1 || rep.Orphans[0].Key != fresh.Key || rep.Removable() != 0 || rep.Orphans[0].Age != 0 {
				t.Fatalf("one shot, a fresh PUT: %+v", rep.Orphans)
			}
			f.clk.Advance(grace)
			f.p.put(t, 80, 2, 3, 200) // a later PUT moves the store's time on
			rep, err = Diff(t.Context(), f.store, fixedHeads(f.head), DiffConfig{Grace: grace, Now: scrubber.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Removable() != 1 || !rep.Orphans[0].Removable || rep.Orphans[0].Key != fresh.Key {
				t.Fatalf("one shot, a grace older than the newest PUT: %+v", rep.Orphans)
			}
		})
	}
}

// intentDuringList is a bucket in which an upload records its intent and
// PUTs its object while the scrub is about to list: after a scrub that read
// the heads first, before the listing.
type intentDuringList struct {
	objstore.Store
	upload func()
	once   sync.Once
}

func (s *intentDuringList) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	s.once.Do(s.upload)
	return s.Store.List(ctx, prefix, fn)
}

// An upload whose intent lands around the scrub's listing is named by the
// heads the scrub classifies with, so its object is never an orphan, even
// when every unnamed key is old enough (tierctl diff --now far ahead). Read
// in the other order the heads lack the intent, and the object, which the
// commit goes on to name, was deleted.
func TestDiffListsBeforeReadingHeads(t *testing.T) {
	f := newScrubFixture(t)
	var mu sync.Mutex
	head := f.head
	heads := func(context.Context) ([]meta.RemoteHead, error) {
		mu.Lock()
		defer mu.Unlock()
		return []meta.RemoteHead{head}, nil
	}
	key := objectKey(f.p.id, f.p.n, 60, 2)
	store := &intentDuringList{Store: f.store, upload: func() {
		mu.Lock()
		head.Intents = append(slices.Clone(head.Intents), meta.RemoteIntent{Key: key, Base: 60, Epoch: 2})
		mu.Unlock()
		if err := f.store.Put(context.Background(), key, []byte("an upload about to commit")); err != nil {
			t.Error(err)
		}
	}}
	rep, err := Diff(t.Context(), store, heads, DiffConfig{Grace: grace, Now: f.clk.Now(), StoreNow: f.clk.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Scrub(t.Context(), f.store, rep, unlimited{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Head(t.Context(), key); err != nil {
		t.Fatalf("the object of an upload whose intent landed before the listing was deleted: %v (orphans %+v)", err, rep.Orphans)
	}
	if len(rep.Orphans) != 0 || rep.Referenced != rep.Listed {
		t.Fatalf("report: %+v", rep)
	}
}

// A key committed after the listing but before the heads were read is
// named and not listed: it is looked up before being called missing.
func TestDiffCommittedAfterListingIsNotMissing(t *testing.T) {
	f := newScrubFixture(t)
	var mu sync.Mutex
	head := f.head
	heads := func(context.Context) ([]meta.RemoteHead, error) {
		mu.Lock()
		defer mu.Unlock()
		return []meta.RemoteHead{head}, nil
	}
	store := &afterList{Store: f.store, after: func() {
		o := f.p.put(t, 60, 2, 2, 200)
		mu.Lock()
		head.Objects = append(slices.Clone(head.Objects), o)
		mu.Unlock()
	}}
	rep, err := Diff(t.Context(), store, heads, DiffConfig{Grace: grace, Now: f.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing) != 0 || len(rep.Orphans) != 0 {
		t.Fatalf("report: %+v", rep)
	}
}

// afterList runs after once its first listing is done.
type afterList struct {
	objstore.Store
	after func()
	once  sync.Once
}

func (s *afterList) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	err := s.Store.List(ctx, prefix, fn)
	s.once.Do(s.after)
	return err
}

// TestScrubIgnoresLargeObjects: the large payloads of upload sessions
// (large/<tenant>/<ref>, broker/largeobj) are not tiering's: ParseKey
// refuses their keys, so the scrub reports them foreign and never deletes
// them, however old.
func TestScrubIgnoresLargeObjects(t *testing.T) {
	f := newScrubFixture(t)
	key := "large/acme/0123456789abcdef0123456789abcdef"
	if _, ok := ParseKey(key); ok {
		t.Fatalf("ParseKey accepts the large object key %s", key)
	}
	if err := f.store.Put(t.Context(), key, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(30 * 24 * time.Hour)
	rep := f.diff(t, f.head)
	if len(rep.Foreign) != 1 || rep.Foreign[0].Key != key || len(rep.Orphans) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	if _, err := Scrub(t.Context(), f.store, rep, unlimited{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Head(t.Context(), key); err != nil {
		t.Fatalf("the scrub deleted a large object: %v", err)
	}
}
