package broker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker/largeobj"
	"github.com/sluice-mq/sluice/payload"
	"github.com/sluice-mq/sluice/payload/ref"
)

// TestLargePayloadClientRoundTrip: the Go client of large payloads against
// a real broker on versitygw with its real object service (no test
// claimer): payload.Put uploads and publishes with franz-go, a consumer
// reads the envelope and payload.Open streams the object verified; a
// corrupted byte in the bucket is a checksum error; a reference that no
// session completed is refused at produce with INVALID_RECORD.
func TestLargePayloadClientRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 24 MiB through a broker and an S3 server")
	}
	b, base := startLargeObjectBroker(t)
	if b.LargeObjects() == nil || b.Cfg.Refs == nil {
		t.Fatal("a broker with an object store has no large-object service wired to its produce path")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cl := testClient(t, b)
	pc := &payload.Client{Base: base}

	const size = int64(24<<20 + 12345) // three parts and a short one
	pc.SHA256 = genSHA(7, size)
	r, err := pc.Put(ctx, cl, "big", []byte("k"), newGen(7, size), size)
	if err != nil {
		t.Fatalf("payload.Put: %v", err)
	}
	if r.Size != size || r.SHA256 != pc.SHA256 {
		t.Fatalf("reference %+v, want size %d sha256 %s", r, size, pc.SHA256)
	}

	consumer := testClient(t, b, kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var rec *kgo.Record
	for rec == nil {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(x *kgo.Record) { rec = x })
	}
	if len(rec.Value) > 1024 {
		t.Fatalf("the envelope carries %d bytes of value; the payload must not travel in the log", len(rec.Value))
	}
	open := func() ([]byte, error) {
		rc, err := pc.Open(ctx, rec)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	got, err := open()
	if err != nil {
		t.Fatalf("payload.Open: %v", err)
	}
	if int64(len(got)) != size || !bytes.Equal(got[:4096], genSlice(7, 0, 4096)) || !bytes.Equal(got[size-4096:], genSlice(7, size-4096, 4096)) {
		t.Fatalf("read %d bytes, not the payload", len(got))
	}

	// One byte changed in the bucket, the size kept: Open's reader fails.
	key := largeobj.ObjectKey("", r.ID)
	if _, err := b.Objects.Head(ctx, key); err != nil {
		key = largeobj.ObjectKey("default", r.ID)
	}
	got[size/2] ^= 0xff
	if err := b.Objects.Put(ctx, key, got); err != nil {
		t.Fatalf("corrupt the object %s: %v", key, err)
	}
	if _, err := open(); !errors.Is(err, payload.ErrChecksum) {
		t.Fatalf("reading a corrupted object: %v, want ErrChecksum", err)
	}
	got[size/2] ^= 0xff // restored, it reads again
	if err := b.Objects.Put(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if _, err := open(); err != nil {
		t.Fatalf("reading the restored object: %v", err)
	}

	// A reference no session completed: INVALID_RECORD, nothing appended.
	forged := ref.Ref{ID: "neverUploaded", Size: 10, SHA256: genSHA(8, 10)}
	fr := &kgo.Record{Topic: "big", Value: nil}
	for _, h := range forged.Headers() {
		fr.Headers = append(fr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := cl.ProduceSync(ctx, fr).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("producing a forged reference: %v, want INVALID_RECORD", err)
	}
	// The real reference with another size: a mismatch, refused too.
	wrong := r
	wrong.Size--
	wr := &kgo.Record{Topic: "big"}
	for _, h := range wrong.Headers() {
		wr.Headers = append(wr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if err := cl.ProduceSync(ctx, wr).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("producing a reference with a wrong size: %v, want INVALID_RECORD", err)
	}
}
