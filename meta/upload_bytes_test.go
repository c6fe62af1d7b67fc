package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// recount sums every upload record by tenant, as the counters should,
// and answers the revision it read them at.
func recount(t *testing.T, s *Store) (map[string][2]int64, int64) {
	t.Helper()
	out := map[string][2]int64{}
	rev, err := s.ListUploadsAt(testContext(t), func(u Upload) error {
		o, st := UploadCharge(u)
		d := out[u.Tenant]
		d[0], d[1] = d[0]+o, d[1]+st
		out[u.Tenant] = d
		return nil
	})
	if err != nil {
		t.Fatalf("ListUploadsAt: %v", err)
	}
	return out, rev
}

// checkCounters fails unless every tenant's counter equals the records'
// sum (an absent counter is zero), both read at one revision: a write cut
// off by its deadline may still land between two reads.
func checkCounters(t *testing.T, s *Store, at string) {
	t.Helper()
	ctx := testContext(t)
	want, rev := recount(t, s)
	resp, err := s.Client().Get(ctx, s.uploadBytesPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]UploadBytes{}
	for _, kv := range resp.Kvs {
		c, err := decodeUploadBytes(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		got[c.Tenant] = c
	}
	tenants := map[string]bool{}
	for tn := range want {
		tenants[tn] = true
	}
	for tn := range got {
		tenants[tn] = true
	}
	for tn := range tenants {
		if c := got[tn]; c.Open != want[tn][0] || c.Stored != want[tn][1] {
			t.Fatalf("%s: at revision %d tenant %s counts open %d, stored %d; its records sum to open %d, stored %d",
				at, rev, tn, c.Open, c.Stored, want[tn][0], want[tn][1])
		}
	}
	if _, err := s.ListUploadBytes(ctx); err != nil {
		t.Fatalf("%s: ListUploadBytes: %v", at, err)
	}
}

var allStates = []UploadState{UploadOpen, UploadCompleted, UploadPublished, UploadAborted, UploadExpired}

// TestUploadBytesFollowTransitions walks seeded random writes of upload
// records (creates, state changes of every kind, parts, publishing
// claims, condemnations, deletes), some from stale copies that lose with
// ErrConflict, some from copies whose Revision was set by hand (the
// counted charge is read again), and some under a deadline of a few
// hundred microseconds that may cut them off before or after etcd
// committed; after each step every tenant's counter equals the sum over
// its records.
func TestUploadBytesFollowTransitions(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	checkCounters(t, s, "a new layout")
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 20))
		var ids []string
		held := map[string]Upload{} // copies read earlier, possibly stale
		conflicts, cut := 0, 0
		for step := range 250 {
			at := fmt.Sprintf("seed %d step %d", seed, step)
			opCtx := ctx
			if rng.IntN(8) == 0 {
				c, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(400))*time.Microsecond)
				defer cancel()
				opCtx = c
			}
			pick := func() (Upload, bool) {
				if len(ids) == 0 {
					return Upload{}, false
				}
				id := ids[rng.IntN(len(ids))]
				if h, ok := held[id]; ok && rng.IntN(3) == 0 {
					return h, true // maybe stale
				}
				u, err := s.GetUpload(ctx, id)
				if err != nil {
					return Upload{}, false
				}
				if rng.IntN(4) == 0 {
					u.read = charge{} // as if the caller built it: read again
				}
				held[id] = u
				return u, true
			}
			var err error
			op := rng.IntN(10)
			switch {
			case op < 3 || len(ids) == 0:
				u := testUpload(fmt.Sprintf("s%d-%d", seed, step))
				u.Tenant = []string{"acme", "globex", "a/b c"}[rng.IntN(3)]
				u.Size = 1 + rng.Int64N(1000)
				u.State = allStates[rng.IntN(2)]
				var nu Upload
				if nu, err = s.CreateUpload(opCtx, u); err == nil {
					held[u.ID] = nu
				}
				ids = append(ids, u.ID)
			case op < 6:
				u, ok := pick()
				if !ok {
					continue
				}
				u.State = allStates[rng.IntN(len(allStates))]
				if rng.IntN(2) == 0 {
					u.Received = rng.Int64N(u.Size + 1) // a part, no change of state's count
				}
				_, err = s.UpdateUpload(opCtx, u)
			case op < 7:
				u, ok := pick()
				if !ok {
					continue
				}
				u.State = UploadPublished
				err = s.ClaimRef(opCtx, u, true, LargeRef{Tenant: u.Tenant, Topic: "t", TopicID: [16]byte{1}, ClaimedMs: 1})
			case op < 8:
				u, ok := pick()
				if !ok {
					continue
				}
				_, rev, lerr := s.RefsOfObject(ctx, u.ID)
				if lerr != nil {
					t.Fatal(lerr)
				}
				u.ReleaseDueMs = 5
				_, err = s.CondemnUpload(opCtx, u, rev)
			default:
				u, ok := pick()
				if !ok {
					continue
				}
				err = s.DeleteUpload(opCtx, u)
			}
			switch {
			case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
				conflicts++
			case err != nil && opCtx.Err() != nil:
				cut++ // committed or not: the counter went with the record either way
			case err != nil:
				t.Fatalf("%s: op %d: %v", at, op, err)
			}
			checkCounters(t, s, at)
		}
		if conflicts == 0 || cut == 0 {
			t.Fatalf("seed %d: %d writes lost to conflicts and %d cut off; the walk must reach both", seed, conflicts, cut)
		}
	}
}

// TestUploadBytesConcurrentWriters: writers of different records of one
// tenant race for its counter, eight in each of two processes (two stores
// on one etcd); every write lands (a loss to another process's counter
// write is retried, writers of one process take turns) and the counter
// ends equal to the records' sum. When all sixteen raced, some lost 64
// times in a row under -race.
func TestUploadBytesConcurrentWriters(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	other := openStore(t, Config{Endpoints: s.Client().Endpoints(), StartTimeout: testTimeout})
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := s
			if w%2 == 1 {
				s = other
			}
			for i := range 10 {
				u := testUpload(fmt.Sprintf("w%d-%d", w, i))
				u.Size = int64(1 + w*10 + i)
				nu, err := s.CreateUpload(ctx, u)
				if err == nil {
					nu.State = UploadCompleted
					nu, err = s.UpdateUpload(ctx, nu)
				}
				if err == nil && i%3 == 0 {
					nu.State = UploadAborted
					_, err = s.UpdateUpload(ctx, nu)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkCounters(t, s, "after the race")
	if got, _ := recount(t, s); got["acme"][0] != 0 || got["acme"][1] == 0 {
		t.Fatalf("records sum to %v; want nothing open and something stored", got)
	}
}

// putRaw writes an upload record as a broker that knows no counters does.
func putRaw(t *testing.T, s *Store, u Upload) {
	t.Helper()
	u.V = 1
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(testContext(t), s.uploadKey(u.ID), string(b)); err != nil {
		t.Fatal(err)
	}
}

// TestUploadBytesRecount: records that predate the counters (a layout
// without the counted key) make the counters answer ErrUncounted; writes
// of this version meanwhile move them by their differences; a recount
// from a listing at revision R, with writes after R, leaves each counter
// equal to its records' sum and marks them counted; the same recount again
// corrects nothing twice; a write by a broker of an earlier version is
// repaired by the next recount.
func TestUploadBytesRecount(t *testing.T) {
	s := openStore(t, embeddedConfig(t))
	ctx := testContext(t)
	if _, err := s.Client().Delete(ctx, s.uploadBytesCountedKey()); err != nil {
		t.Fatal(err)
	}
	for i, st := range []UploadState{UploadOpen, UploadCompleted, UploadPublished, UploadAborted, UploadOpen} {
		u := testUpload(fmt.Sprintf("old%d", i))
		u.State, u.Size = st, int64(100*(i+1))
		putRaw(t, s, u)
	}
	if _, err := s.UploadBytesOf(ctx, "acme"); !errors.Is(err, ErrUncounted) {
		t.Fatalf("UploadBytesOf before any recount: %v; want ErrUncounted", err)
	}
	if _, err := s.ListUploadBytes(ctx); !errors.Is(err, ErrUncounted) {
		t.Fatalf("ListUploadBytes before any recount: %v; want ErrUncounted", err)
	}
	// This version aborts an old open session: the counter goes below zero
	// (it never counted it) until the recount.
	u, err := s.GetUpload(ctx, "old0")
	if err != nil {
		t.Fatal(err)
	}
	u.State = UploadAborted
	if _, err := s.UpdateUpload(ctx, u); err != nil {
		t.Fatal(err)
	}

	var all []Upload
	rev, err := s.ListUploadsAt(ctx, func(u Upload) error { all = append(all, u); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the listing's revision, before the recount.
	late := testUpload("new1")
	late.Size = 7
	if _, err := s.CreateUpload(ctx, late); err != nil {
		t.Fatal(err)
	}
	done, err := s.GetUpload(ctx, "old1")
	if err != nil {
		t.Fatal(err)
	}
	done.State = UploadExpired
	if _, err := s.UpdateUpload(ctx, done); err != nil {
		t.Fatal(err)
	}
	n, err := s.ReconcileUploadBytes(ctx, rev, all)
	if err != nil || n != 1 {
		t.Fatalf("recount: %d corrected, %v; want 1", n, err)
	}
	checkCounters(t, s, "after the recount")
	if got, _ := recount(t, s); got["acme"] != [2]int64{500 + 7, 300} {
		t.Fatalf("records sum to %v", got)
	}
	if c, err := s.UploadBytesOf(ctx, "acme"); err != nil || c.Open != 507 || c.Stored != 300 {
		t.Fatalf("UploadBytesOf after the recount: %+v, %v", c, err)
	}
	// Another broker's recount from the same listing finds the counter
	// repaired since and leaves it.
	if n, err := s.ReconcileUploadBytes(ctx, rev, all); err != nil || n != 0 {
		t.Fatalf("the same recount again: %d corrected, %v; want 0", n, err)
	}
	checkCounters(t, s, "after the second recount")

	// A broker of an earlier version completes a session: the counter is
	// short until the next recount repairs it.
	old := late
	old.State = UploadCompleted
	putRaw(t, s, old)
	c, err := s.UploadBytesOf(ctx, "acme")
	if err != nil || c.Open != 507 || c.Stored != 300 || c.Repairs != 1 {
		t.Fatalf("counter after an old broker's write: %+v, %v", c, err)
	}
	all = nil
	if rev, err = s.ListUploadsAt(ctx, func(u Upload) error { all = append(all, u); return nil }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReconcileUploadBytes(ctx, rev, all); err != nil || n != 1 {
		t.Fatalf("recount after an old broker's write: %d corrected, %v; want 1", n, err)
	}
	checkCounters(t, s, "after the repair")
}
