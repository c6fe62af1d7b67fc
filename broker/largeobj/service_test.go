package largeobj

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/internal/freeport"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/fault"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

const part = objstore.MinPartSize

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	st    *meta.Store
	store *fault.Store
	inner *mem.Store
	clk   *clock
	svc   *Service
}

func openMeta(t *testing.T) *meta.Store {
	t.Helper()
	st, err := meta.Open(t.Context(), meta.Config{DataDir: t.TempDir(), Name: "1",
		ListenClient: freeport.Must(t), ListenPeer: freeport.Must(t), StartTimeout: 30 * time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatalf("meta.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.CreateTopic(t.Context(), meta.Topic{ID: site.TopicID, Name: site.Topic, Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create the claims' topic: %v", err)
	}
	return st
}

// site is where the tests' claims put their records: a topic that exists,
// so the ledger keeps their objects.
var site = node.RefSite{TopicID: [16]byte{0x5e, 0x1e, 0xc7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, Topic: "acme.orders"}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{st: openMeta(t), clk: &clock{now: time.UnixMilli(1_800_000_000_000)}}
	f.inner = mem.NewWithClock(f.clk.Now)
	f.store = fault.New(f.inner, fault.Config{Seed: 7})
	f.svc = f.service(t)
	return f
}

// service is another broker's Service on the same etcd and bucket.
func (f *fixture) service(t *testing.T) *Service {
	t.Helper()
	svc, err := New(Config{Store: f.store, Sessions: f.st, Now: f.clk.Now, TTL: time.Hour, PartSize: part,
		MaxObjectBytes: 64 << 20, Retain: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func payload(seed uint64, n int) ([]byte, string) {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// onlyReader hides Seek and Len, as an HTTP body does.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func (f *fixture) begin(t *testing.T, tenant string, body []byte, sum string) Session {
	t.Helper()
	s, err := f.svc.Begin(t.Context(), BeginRequest{Tenant: tenant, Topic: "orders", Size: int64(len(body)), SHA256: sum, ContentType: "application/pdf"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) put(t *testing.T, svc *Service, tenant, id string, body []byte, off, n int64) (int64, error) {
	t.Helper()
	return svc.PutPart(t.Context(), tenant, id, off, onlyReader{bytes.NewReader(body[off : off+n])}, n)
}

func mustPut(t *testing.T, f *fixture, svc *Service, id string, body []byte, off, n int64) {
	t.Helper()
	got, err := f.put(t, svc, "acme", id, body, off, n)
	if err != nil || got != off+n {
		t.Fatalf("PutPart [%d, +%d) = %d, %v", off, n, got, err)
	}
}

func (f *fixture) state(t *testing.T, id string) meta.Upload {
	t.Helper()
	u, err := f.st.GetUpload(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func readAll(t *testing.T, svc *Service, tenant, id string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, _, err := svc.Open(t.Context(), tenant, id, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}

// TestStreamedUploadAcrossBrokers: parts of one session go to two
// services (two brokers) in turn; the running hash carries over in etcd,
// Complete reads nothing back, and the object, Claim and Open behave.
func TestStreamedUploadAcrossBrokers(t *testing.T) {
	f := newFixture(t)
	other := f.service(t)
	body, sum := payload(1, 3*part+1234)
	s := f.begin(t, "acme", body, sum)
	if s.PartSize != part || len(s.Presigned) != 0 {
		t.Fatalf("session %+v", s)
	}
	// Refusals: not a multiple of the part size, out of order, beyond the size.
	if _, err := f.put(t, f.svc, "acme", s.ID, body, 0, part+1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a range of part+1 bytes: %v; want ErrInvalid", err)
	}
	if _, err := f.put(t, f.svc, "acme", s.ID, body, part, part); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("a range after a gap: %v; want ErrOutOfOrder", err)
	}
	if _, err := f.put(t, f.svc, "other", s.ID, body, 0, part); !errors.Is(err, ref.ErrUnknown) {
		t.Fatalf("another tenant's PUT: %v; want ErrUnknown", err)
	}
	mustPut(t, f, f.svc, s.ID, body, 0, 2*part) // two parts in one request
	if _, err := f.put(t, other, "acme", s.ID, body, 0, part); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("a part sent twice: %v; want ErrOutOfOrder", err)
	}
	mustPut(t, f, other, s.ID, body, 2*part, part+1234) // the rest, on the other broker
	if err := f.svc.Claim(t.Context(), "acme", ref.Ref{ID: s.ID, Size: int64(len(body)), SHA256: sum}, site); !errors.Is(err, ref.ErrUnknown) {
		t.Fatalf("Claim of an open session: %v; want ErrUnknown", err)
	}
	f.store.Set(fault.OpGet, fault.Faults{ServerErrorRate: 1}) // a streamed Complete reads nothing back
	c, err := other.Complete(t.Context(), "acme", s.ID)
	f.store.Set(fault.OpGet, fault.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Ref{ID: s.ID, Size: int64(len(body)), SHA256: sum, ContentType: "application/pdf"}
	if c.Ref != want || !c.ExpiresIfUnpublished.Equal(f.clk.Now().Add(time.Hour)) {
		t.Fatalf("Complete = %+v; want %+v expiring in an hour", c, want)
	}
	if again, err := f.svc.Complete(t.Context(), "acme", s.ID); err != nil || again != c {
		t.Fatalf("second Complete = %+v, %v", again, err)
	}
	got, err := readAll(t, f.svc, "acme", s.ID, 0, -1)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("download: %d bytes, %v", len(got), err)
	}
	got, err = readAll(t, f.svc, "acme", s.ID, part-10, 20)
	if err != nil || !bytes.Equal(got, body[part-10:part+10]) {
		t.Fatalf("ranged download: %d bytes, %v", len(got), err)
	}
	if _, err := readAll(t, f.svc, "other", s.ID, 0, -1); !errors.Is(err, ref.ErrUnknown) {
		t.Fatalf("another tenant's download: %v; want ErrUnknown", err)
	}
	// Claim: another tenant's is unknown, a mismatch is refused, then it publishes, idempotently.
	if err := f.svc.Claim(t.Context(), "other", want, site); !errors.Is(err, ref.ErrUnknown) {
		t.Fatalf("Claim by another tenant: %v", err)
	}
	bad := want
	bad.SHA256 = hex.EncodeToString(make([]byte, 32))
	if err := f.svc.Claim(t.Context(), "acme", bad, site); !errors.Is(err, ref.ErrMismatch) {
		t.Fatalf("Claim with another sha256: %v", err)
	}
	for range 2 {
		if err := other.Claim(t.Context(), "acme", want, site); err != nil {
			t.Fatal(err)
		}
	}
	if u := f.state(t, s.ID); u.State != meta.UploadPublished || u.PublishedMs != f.clk.Now().UnixMilli() {
		t.Fatalf("after Claim: %+v", u)
	}
	if err := f.svc.Abort(t.Context(), "acme", s.ID); !errors.Is(err, ErrState) {
		t.Fatalf("Abort of a published session: %v; want ErrState", err)
	}
}

// TestChecksumMismatchDeletesBytes: a declared sha256 the bytes do not have
// fails Complete with ErrChecksum and leaves nothing in the store, both
// when streamed and when read back.
func TestChecksumMismatchDeletesBytes(t *testing.T) {
	f := newFixture(t)
	body, _ := payload(2, part+10)
	wrong := hex.EncodeToString(make([]byte, 32))
	s := f.begin(t, "acme", body, wrong)
	mustPut(t, f, f.svc, s.ID, body, 0, int64(len(body)))
	if _, err := f.svc.Complete(t.Context(), "acme", s.ID); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Complete: %v; want ErrChecksum", err)
	}
	u := f.state(t, s.ID)
	if u.State != meta.UploadAborted || u.Reason == "" {
		t.Fatalf("session after the mismatch: %+v", u)
	}
	if _, err := f.inner.Head(t.Context(), u.ObjectKey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("object after the mismatch: %v", err)
	}
	if _, err := f.inner.ListParts(t.Context(), u.ObjectKey, u.UploadID); !errors.Is(err, objstore.ErrNoUpload) {
		t.Fatalf("multipart upload after the mismatch: %v", err)
	}
	if _, err := f.svc.Complete(t.Context(), "acme", s.ID); !errors.Is(err, ErrState) {
		t.Fatalf("Complete again: %v; want ErrState", err)
	}

	// Parts straight to the store (as by presigned URLs): read back.
	s2 := f.begin(t, "acme", body, wrong)
	u2 := f.state(t, s2.ID)
	directParts(t, f, u2, body)
	if _, err := f.svc.Complete(t.Context(), "acme", s2.ID); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Complete of direct parts: %v; want ErrChecksum", err)
	}
	if _, err := f.inner.Head(t.Context(), u2.ObjectKey); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("object after the read-back mismatch: %v", err)
	}
}

// directParts uploads body's parts to the store without the service.
func directParts(t *testing.T, f *fixture, u meta.Upload, body []byte) {
	t.Helper()
	for off := int64(0); off < int64(len(body)); off += u.PartSize {
		n := min(u.PartSize, int64(len(body))-off)
		if _, err := f.inner.UploadPart(t.Context(), u.ObjectKey, u.UploadID, int32(off/u.PartSize)+1, bytes.NewReader(body[off:off+n]), n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirectPartsReadBack: parts uploaded past the broker complete by
// reading the object back; a first part through the broker and the rest
// direct does too; Complete before all bytes are there is ErrState.
func TestDirectPartsReadBack(t *testing.T) {
	f := newFixture(t)
	body, sum := payload(3, 2*part+7)
	s := f.begin(t, "acme", body, sum)
	u := f.state(t, s.ID)
	mustPut(t, f, f.svc, s.ID, body, 0, part)
	if _, err := f.svc.Complete(t.Context(), "acme", s.ID); !errors.Is(err, ErrState) {
		t.Fatalf("Complete with bytes missing: %v; want ErrState", err)
	}
	if _, err := f.inner.UploadPart(t.Context(), u.ObjectKey, u.UploadID, 2, bytes.NewReader(body[part:2*part]), part); err != nil {
		t.Fatal(err)
	}
	if _, err := f.inner.UploadPart(t.Context(), u.ObjectKey, u.UploadID, 3, bytes.NewReader(body[2*part:]), 7); err != nil {
		t.Fatal(err)
	}
	c, err := f.svc.Complete(t.Context(), "acme", s.ID)
	if err != nil || c.Ref.SHA256 != sum {
		t.Fatalf("Complete = %+v, %v", c, err)
	}
	if got, err := readAll(t, f.svc, "acme", s.ID, 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("download: %v", err)
	}
}

// TestBeginRefusals: sizes and checksums the service does not accept.
func TestBeginRefusals(t *testing.T) {
	f := newFixture(t)
	_, sum := payload(4, 1)
	for _, tc := range []struct {
		req  BeginRequest
		want error
	}{
		{BeginRequest{Tenant: "acme", Topic: "t", Size: 65 << 20, SHA256: sum}, ErrTooLarge},
		{BeginRequest{Tenant: "acme", Topic: "t", Size: 0, SHA256: sum}, ErrInvalid},
		{BeginRequest{Tenant: "acme", Topic: "t", Size: 10, SHA256: "ABC"}, ErrInvalid},
		{BeginRequest{Tenant: "acme", Topic: "", Size: 10, SHA256: sum}, ErrInvalid},
		{BeginRequest{Tenant: "acme", Topic: "t", Size: 10, SHA256: sum, ContentType: "a\nb"}, ErrInvalid},
	} {
		if _, err := f.svc.Begin(t.Context(), tc.req); !errors.Is(err, tc.want) {
			t.Errorf("Begin(%+v) = %v; want %v", tc.req, err, tc.want)
		}
	}
}

// TestStoreErrorsDuringSession: a part the store failed is not recorded
// and is sent again; a failed Complete can be retried.
func TestStoreErrorsDuringSession(t *testing.T) {
	f := newFixture(t)
	body, sum := payload(5, part+3)
	s := f.begin(t, "acme", body, sum)
	f.store.Set(fault.OpUploadPart, fault.Faults{ServerErrorRate: 1})
	if _, err := f.put(t, f.svc, "acme", s.ID, body, 0, int64(len(body))); err == nil {
		t.Fatal("PutPart through a failing store succeeded")
	}
	if u := f.state(t, s.ID); u.Received != 0 || len(u.Parts) != 0 {
		t.Fatalf("a failed part was recorded: %+v", u)
	}
	// A lost response: the store has the part, the record does not; sent again.
	f.store.Set(fault.OpUploadPart, fault.Faults{LostResponseRate: 1})
	if _, err := f.put(t, f.svc, "acme", s.ID, body, 0, part); err == nil {
		t.Fatal("lost response succeeded")
	}
	f.store.Set(fault.OpUploadPart, fault.Faults{})
	mustPut(t, f, f.svc, s.ID, body, 0, int64(len(body)))
	f.store.Set(fault.OpCompleteMultipart, fault.Faults{ServerErrorRate: 1})
	if _, err := f.svc.Complete(t.Context(), "acme", s.ID); err == nil || errors.Is(err, ErrChecksum) {
		t.Fatalf("Complete through a failing store: %v", err)
	}
	f.store.Set(fault.OpCompleteMultipart, fault.Faults{})
	if _, err := f.svc.Complete(t.Context(), "acme", s.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSweepTTL: with the injected clock, a completed session never
// published expires (object deleted, Claim refused), an open one is
// aborted, a published one is kept, and records are purged after Retain.
func TestSweepTTL(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	body, sum := payload(6, 100)
	orphan := f.begin(t, "acme", body, sum)
	mustPut(t, f, f.svc, orphan.ID, body, 0, 100)
	if _, err := f.svc.Complete(ctx, "acme", orphan.ID); err != nil {
		t.Fatal(err)
	}
	kept := f.begin(t, "acme", body, sum)
	mustPut(t, f, f.svc, kept.ID, body, 0, 100)
	if _, err := f.svc.Complete(ctx, "acme", kept.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Claim(ctx, "acme", ref.Ref{ID: kept.ID, Size: 100, SHA256: sum}, site); err != nil {
		t.Fatal(err)
	}
	stale := f.begin(t, "acme", body, sum)
	staleU := f.state(t, stale.ID)

	f.clk.Advance(59 * time.Minute)
	if st, err := f.svc.Sweep(ctx, f.clk.Now()); err != nil || st != (SweepStats{}) {
		t.Fatalf("sweep before the TTL: %+v, %v", st, err)
	}
	f.clk.Advance(time.Minute)
	// Past the TTL, before any sweep: Claim already refuses.
	orphanRef := ref.Ref{ID: orphan.ID, Size: 100, SHA256: sum}
	if err := f.svc.Claim(ctx, "acme", orphanRef, site); !errors.Is(err, ref.ErrExpired) {
		t.Fatalf("Claim past the TTL: %v; want ErrExpired", err)
	}
	if _, err := f.put(t, f.svc, "acme", stale.ID, body, 0, 100); !errors.Is(err, ref.ErrExpired) {
		t.Fatalf("PutPart past the TTL: %v; want ErrExpired", err)
	}
	st, err := f.svc.Sweep(ctx, f.clk.Now())
	if err != nil || st.Expired != 1 || st.Aborted != 1 || st.Purged != 0 {
		t.Fatalf("sweep at the TTL: %+v, %v", st, err)
	}
	if _, err := f.inner.Head(ctx, ObjectKey("acme", orphan.ID)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the orphan's object after the sweep: %v", err)
	}
	if _, err := f.inner.ListParts(ctx, staleU.ObjectKey, staleU.UploadID); !errors.Is(err, objstore.ErrNoUpload) {
		t.Fatalf("the stale session's multipart after the sweep: %v", err)
	}
	if err := f.svc.Claim(ctx, "acme", orphanRef, site); !errors.Is(err, ref.ErrExpired) {
		t.Fatalf("Claim after the sweep: %v; want ErrExpired", err)
	}
	if _, err := readAll(t, f.svc, "acme", orphan.ID, 0, -1); !errors.Is(err, ref.ErrExpired) {
		t.Fatalf("download of an expired object: %v", err)
	}
	// A published object survives every sweep (no ledger yet).
	f.clk.Advance(40 * 24 * time.Hour)
	st, err = f.svc.Sweep(ctx, f.clk.Now())
	if err != nil || st.Purged != 2 {
		t.Fatalf("sweep after the retention: %+v, %v", st, err)
	}
	if got, err := readAll(t, f.svc, "acme", kept.ID, 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the published object after 40 days: %v", err)
	}
	if err := f.svc.Claim(ctx, "acme", orphanRef, site); !errors.Is(err, ref.ErrUnknown) {
		t.Fatalf("Claim after the record was purged: %v; want ErrUnknown", err)
	}
}

// TestSweepReleaseSeam: the ledger's Release decides a published object's
// deletion.
func TestSweepReleaseSeam(t *testing.T) {
	f := newFixture(t)
	release := false
	svc, err := New(Config{Store: f.store, Sessions: f.st, Now: f.clk.Now, PartSize: part,
		Release: func(context.Context, meta.Upload) (bool, error) { return release, nil }})
	if err != nil {
		t.Fatal(err)
	}
	body, sum := payload(7, 10)
	s := f.begin(t, "acme", body, sum)
	mustPut(t, f, svc, s.ID, body, 0, 10)
	if _, err := svc.Complete(t.Context(), "acme", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Claim(t.Context(), "acme", ref.Ref{ID: s.ID, Size: 10, SHA256: sum}, site); err != nil {
		t.Fatal(err)
	}
	if st, _ := svc.Sweep(t.Context(), f.clk.Now().Add(48*time.Hour)); st.Released != 0 {
		t.Fatalf("released while the ledger holds it: %+v", st)
	}
	release = true
	if st, _ := svc.Sweep(t.Context(), f.clk.Now().Add(48*time.Hour)); st.Released != 1 {
		t.Fatalf("not released: %+v", st)
	}
	if _, err := f.inner.Head(t.Context(), ObjectKey("acme", s.ID)); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("released object: %v", err)
	}
}

// TestCompleteAfterLostResponse: the store assembled the object but its
// answer was lost; the retried Complete finds the upload gone and the
// object there, checks it and completes (it used to fail for ever).
func TestCompleteAfterLostResponse(t *testing.T) {
	f := newFixture(t)
	for _, direct := range []bool{false, true} {
		body, sum := payload(8, part+5)
		s := f.begin(t, "acme", body, sum)
		if direct {
			directParts(t, f, f.state(t, s.ID), body)
		} else {
			mustPut(t, f, f.svc, s.ID, body, 0, int64(len(body)))
		}
		f.store.Set(fault.OpCompleteMultipart, fault.Faults{LostResponseRate: 1})
		if _, err := f.svc.Complete(t.Context(), "acme", s.ID); err == nil {
			t.Fatal("a lost response succeeded")
		}
		f.store.Set(fault.OpCompleteMultipart, fault.Faults{})
		c, err := f.svc.Complete(t.Context(), "acme", s.ID)
		if err != nil || c.Ref.SHA256 != sum {
			t.Fatalf("direct %v: retried Complete = %+v, %v", direct, c, err)
		}
	}
}
