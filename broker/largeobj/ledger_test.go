package largeobj

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// TestReleaseThroughTheLedger: a published object is kept while its
// ledger entry is there, however long; once the entry is gone (the
// partition's leader dropped it) a sweep condemns it — a claim is then
// refused as expired — and the first sweep after the grace deletes it. An
// entry of a deleted topic is dropped by the sweep itself.
func TestReleaseThroughTheLedger(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	publish := func(seed uint64, at node.RefSite) (ref.Ref, []byte) {
		body, sum := payload(seed, 100)
		s := f.begin(t, "acme", body, sum)
		mustPut(t, f, f.svc, s.ID, body, 0, 100)
		if _, err := f.svc.Complete(ctx, "acme", s.ID); err != nil {
			t.Fatal(err)
		}
		r := ref.Ref{ID: s.ID, Size: 100, SHA256: sum}
		if err := f.svc.Claim(ctx, "acme", r, at); err != nil {
			t.Fatal(err)
		}
		return r, body
	}
	kept, body := publish(11, site)
	gone := node.RefSite{TopicID: [16]byte{0xde, 0xad}, Topic: "acme.deleted"} // no such topic (any more)
	orphaned, _ := publish(12, gone)

	f.clk.Advance(40 * 24 * time.Hour)
	if st, err := f.svc.Sweep(ctx, f.clk.Now()); err != nil || st.Released != 0 {
		t.Fatalf("sweep with entries: %+v, %v", st, err)
	}
	if got, err := readAll(t, f.svc, "acme", kept.ID, 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a referenced object after 40 days: %v", err)
	}
	if rs, _, _ := f.st.RefsOfObject(ctx, orphaned.ID); len(rs) != 0 {
		t.Fatalf("the deleted topic's entry outlived a sweep: %+v", rs)
	}
	// The leader's fold dropped the entry of the live topic.
	rs, _, err := f.st.RefsOfObject(ctx, kept.ID)
	if err != nil || len(rs) != 1 {
		t.Fatalf("entries: %+v, %v", rs, err)
	}
	if err := f.st.DropRef(ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	if st, err := f.svc.Sweep(ctx, f.clk.Now()); err != nil || st.Released != 0 {
		t.Fatalf("the condemning sweep: %+v, %v", st, err)
	}
	for _, r := range []ref.Ref{kept, orphaned} {
		if u, _ := f.st.GetUpload(ctx, r.ID); u.ReleaseDueMs != f.clk.Now().Add(DefaultGrace).UnixMilli() {
			t.Fatalf("%s: due %d, want now + the grace", r.ID, u.ReleaseDueMs)
		}
		if err := f.svc.Claim(ctx, "acme", r, site); !errors.Is(err, ref.ErrExpired) {
			t.Fatalf("claim of a condemned object: %v; want ErrExpired", err)
		}
	}
	// Within the grace, readers still get it.
	f.clk.Advance(DefaultGrace - time.Millisecond)
	if st, _ := f.svc.Sweep(ctx, f.clk.Now()); st.Released != 0 {
		t.Fatalf("released within the grace: %+v", st)
	}
	if got, err := readAll(t, f.svc, "acme", kept.ID, 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a condemned object within the grace: %v", err)
	}
	f.clk.Advance(time.Millisecond)
	if st, err := f.svc.Sweep(ctx, f.clk.Now()); err != nil || st.Released != 2 {
		t.Fatalf("the sweep after the grace: %+v, %v", st, err)
	}
	for _, r := range []ref.Ref{kept, orphaned} {
		if _, err := f.inner.Head(ctx, ObjectKey("acme", r.ID)); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s after its release: %v", r.ID, err)
		}
		if u, _ := f.st.GetUpload(ctx, r.ID); u.State != meta.UploadExpired {
			t.Fatalf("%s: state %s after its release", r.ID, u.State)
		}
	}
	if tot := f.svc.Totals(); tot.Released != 2 {
		t.Fatalf("totals: %+v", tot)
	}
}
