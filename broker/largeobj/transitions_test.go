package largeobj

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// allowed are the state changes a session may make (the package doc's
// diagram); "" is a record purged.
var allowed = map[meta.UploadState][]meta.UploadState{
	meta.UploadOpen:      {meta.UploadOpen, meta.UploadCompleted, meta.UploadAborted},
	meta.UploadCompleted: {meta.UploadCompleted, meta.UploadPublished, meta.UploadExpired, meta.UploadAborted},
	meta.UploadPublished: {meta.UploadPublished},
	meta.UploadAborted:   {meta.UploadAborted, ""},
	meta.UploadExpired:   {meta.UploadExpired, ""},
	"":                   {""},
}

// TestSeededTransitions drives sessions with seeded random operations
// (parts in and out of order, completes, aborts, claims right and wrong,
// sweeps, the clock moving on) through two services, and after each step
// checks the invariants: states change only along the diagram, a session
// whose declared sha256 is wrong never completes, completed and published
// objects are whole and right, aborted and expired ones are gone, a
// Claim that succeeded leaves the session published for good, and what
// StoredByTenant answers (the tenants' counters) is the sum over the
// session records.
func TestSeededTransitions(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { seededRun(t, seed) })
	}
}

type tracked struct {
	id, tenant string
	body       []byte
	declared   string // what Begin was told
	right      bool   // declared is body's sha256
	state      meta.UploadState
	sent       int64
}

func seededRun(t *testing.T, seed uint64) {
	f := newFixture(t)
	svcs := []*Service{f.svc, f.service(t)}
	rng := rand.New(rand.NewPCG(seed, 99))
	ctx := t.Context()
	var ss []*tracked
	begin := func(i int) *tracked {
		n := 1 + rng.IntN(300)
		if rng.IntN(5) == 0 {
			n = part + 17 // two parts
		}
		body, sum := payload(rng.Uint64(), n)
		s := &tracked{tenant: []string{"acme", "globex"}[i%2], body: body, declared: sum, right: true}
		if rng.IntN(4) == 0 {
			s.declared, s.right = hex.EncodeToString(make([]byte, 32)), false
		}
		sess, err := f.svc.Begin(ctx, BeginRequest{Tenant: s.tenant, Topic: "t", Size: int64(n), SHA256: s.declared})
		if err != nil {
			t.Fatal(err)
		}
		s.id, s.state = sess.ID, meta.UploadOpen
		return s
	}
	for i := range 5 {
		ss = append(ss, begin(i))
	}
	seen := map[meta.UploadState]bool{}
	defer func() {
		// The walk must have reached the states it checks.
		for _, st := range []meta.UploadState{meta.UploadCompleted, meta.UploadPublished, meta.UploadAborted} {
			if !seen[st] {
				t.Errorf("seed %d never reached %s: %v", seed, st, seen)
			}
		}
	}()
	for step := range 300 {
		i := rng.IntN(len(ss))
		if st := ss[i].state; (st == meta.UploadAborted || st == meta.UploadExpired || st == "") && rng.IntN(2) == 0 {
			ss[i] = begin(i) // a new session in the slot of a finished one
		}
		s := ss[i]
		svc := svcs[rng.IntN(2)]
		size := int64(len(s.body))
		var op string
		claimed := false
		// Weighted: next parts 5, a random part 1, complete 3, right claims
		// 3, a wrong claim 1, abort 1, the clock 1, sweeps 2.
		k := []int{0, 0, 0, 0, 0, 1, 2, 2, 2, 4, 4, 4, 5, 3, 6, 7, 7}[rng.IntN(17)]
		switch k {
		case 0, 1: // the next part, or a part out of order
			off := s.sent
			if k == 1 && size > 1 {
				off = rng.Int64N(size)
			}
			n := min(part, size-off)
			op = fmt.Sprintf("put [%d,+%d)", off, n)
			if got, err := svc.PutPart(ctx, s.tenant, s.id, off, bytes.NewReader(s.body[off:off+n]), n); err == nil {
				s.sent = got
			}
		case 2:
			op = "complete"
			_, _ = svc.Complete(ctx, s.tenant, s.id)
		case 3:
			op = "abort"
			_ = svc.Abort(ctx, s.tenant, s.id)
		case 4, 5:
			r := ref.Ref{ID: s.id, Size: size, SHA256: s.declared}
			if k == 5 {
				r.Size++
			}
			op = fmt.Sprintf("claim (right %v)", k == 4)
			err := svc.Claim(ctx, s.tenant, r, site)
			claimed = err == nil
			if claimed && k == 5 {
				t.Fatalf("step %d: a claim with the wrong size succeeded", step)
			}
			if other := map[string]string{"acme": "globex", "globex": "acme"}[s.tenant]; svc.Claim(ctx, other, ref.Ref{ID: s.id, Size: size, SHA256: s.declared}, site) == nil {
				t.Fatalf("step %d: another tenant claimed %s", step, s.id)
			}
		case 6:
			d := time.Duration(rng.IntN(20)) * time.Minute
			op = "advance " + d.String()
			f.clk.Advance(d)
		case 7, 8:
			op = "sweep"
			if _, err := svc.Sweep(ctx, f.clk.Now()); err != nil {
				t.Fatal(err)
			}
		}
		at := fmt.Sprintf("seed %d step %d (%s on %s)", seed, step, op, s.id[:6])
		for _, x := range ss {
			checkInvariants(t, f, x, at)
			seen[x.state] = true
		}
		checkStored(t, f, svc, at)
		if claimed && s.state != meta.UploadPublished {
			t.Fatalf("step %d: Claim succeeded, session %s", step, s.state)
		}
	}
}

func checkInvariants(t *testing.T, f *fixture, s *tracked, at string) {
	t.Helper()
	ctx := t.Context()
	u, err := f.st.GetUpload(ctx, s.id)
	state := u.State
	if errors.Is(err, meta.ErrNotFound) {
		state = ""
	} else if err != nil {
		t.Fatal(err)
	}
	ok := false
	for _, next := range allowed[s.state] {
		ok = ok || next == state
	}
	if !ok {
		t.Fatalf("%s: session %s went from %q to %q", at, s.id, s.state, state)
	}
	s.state = state
	key := ObjectKey(s.tenant, s.id)
	obj, err := f.inner.Get(ctx, key, 0, -1)
	switch state {
	case meta.UploadCompleted, meta.UploadPublished:
		sum := sha256.Sum256(obj)
		if !s.right || err != nil || hex.EncodeToString(sum[:]) != s.declared {
			t.Fatalf("%s: %s session %s (declared right: %v): object %d bytes, %v", at, state, s.id, s.right, len(obj), err)
		}
	case meta.UploadAborted, meta.UploadExpired, "":
		if !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s: %q session %s still has its object (%v)", at, state, s.id, err)
		}
	}
}

// checkStored fails unless StoredByTenant equals the sum over the session
// records of what each counts.
func checkStored(t *testing.T, f *fixture, svc *Service, at string) {
	t.Helper()
	want := map[string]int64{}
	if err := f.st.ListUploads(t.Context(), func(u meta.Upload) error {
		if n := charged(u, true); n > 0 {
			want[u.Tenant] += n
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := svc.StoredByTenant(t.Context())
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: StoredByTenant = %v, %v; the records sum to %v", at, got, err, want)
	}
}
