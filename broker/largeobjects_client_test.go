package broker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
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

// hostCounter is an http.RoundTripper that counts PUTs by host and may
// fail the ones to one host after reading failAfter bytes of their body.
type hostCounter struct {
	mu        sync.Mutex
	puts      map[string]int
	failHost  string
	failAfter int64
}

func (h *hostCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut {
		h.mu.Lock()
		h.puts[req.URL.Host]++
		h.mu.Unlock()
		if req.URL.Host == h.failHost {
			if req.Body != nil {
				_, _ = io.CopyN(io.Discard, req.Body, h.failAfter)
				_ = req.Body.Close()
			}
			return nil, errors.New("test: the object store is unreachable from this client")
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (h *hostCounter) count(host string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.puts[host]
}

// TestLargePayloadClientTransfer: the Go client PUTs the parts to the
// presigned URLs versitygw's store offers (none through the broker), or
// through the broker when forced; when the bucket cannot be reached it
// falls back to the broker (rewinding a body it had begun to read), unless
// forced to presign, which then fails.
func TestLargePayloadClientTransfer(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 40 MiB through a broker and an S3 server")
	}
	b, base := startLargeObjectBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	brokerHost := strings.TrimPrefix(base, "http://")
	const size = int64(10<<20 + 77) // two parts
	sum := genSHA(21, size)
	payloadBytes := genSlice(21, 0, size)

	// The bucket's host, from a session's presigned URLs.
	u := beginUpload(t, base, size, sum)
	if len(u.PresignedParts) != 2 {
		t.Fatalf("%d presigned parts, want 2", len(u.PresignedParts))
	}
	pu, err := url.Parse(u.PresignedParts[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	s3Host := pu.Host

	upload := func(t *testing.T, mode payload.Transfer, failS3 bool, body io.Reader) (*hostCounter, []error, error) {
		hc := &hostCounter{puts: map[string]int{}, failAfter: 1 << 20}
		if failS3 {
			hc.failHost = s3Host
		}
		var fallbacks []error
		pc := &payload.Client{Base: base, Options: payload.Options{SHA256: sum, Transfer: mode,
			HTTPClient: &http.Client{Transport: hc}, OnFallback: func(err error) { fallbacks = append(fallbacks, err) }}}
		r, err := pc.Upload(ctx, "big", body, size)
		if err == nil {
			info, herr := b.Objects.Head(ctx, objectKeyOf(ctx, t, b, r.ID))
			if herr != nil || info.Size != size || r.SHA256 != sum {
				t.Fatalf("uploaded %+v: object %+v, %v", r, info, herr)
			}
		}
		return hc, fallbacks, err
	}

	t.Run("auto-presigned", func(t *testing.T) {
		hc, fb, err := upload(t, payload.TransferAuto, false, newGen(21, size))
		if err != nil || len(fb) != 0 {
			t.Fatalf("upload: %v, fallbacks %v", err, fb)
		}
		if hc.count(s3Host) != 2 || hc.count(brokerHost) != 0 {
			t.Fatalf("PUTs: %d to the bucket, %d to the broker; want 2 and 0", hc.count(s3Host), hc.count(brokerHost))
		}
	})
	t.Run("forced-broker", func(t *testing.T) {
		hc, _, err := upload(t, payload.TransferBroker, false, newGen(21, size))
		if err != nil {
			t.Fatal(err)
		}
		if hc.count(s3Host) != 0 || hc.count(brokerHost) != 2 {
			t.Fatalf("PUTs: %d to the bucket, %d to the broker; want 0 and 2", hc.count(s3Host), hc.count(brokerHost))
		}
	})
	t.Run("auto-fallback-rewinds", func(t *testing.T) {
		hc, fb, err := upload(t, payload.TransferAuto, true, bytes.NewReader(payloadBytes))
		if err != nil || len(fb) != 1 {
			t.Fatalf("upload: %v, fallbacks %v", err, fb)
		}
		if hc.count(s3Host) != 1 || hc.count(brokerHost) != 2 {
			t.Fatalf("PUTs: %d to the bucket, %d to the broker; want 1 and 2", hc.count(s3Host), hc.count(brokerHost))
		}
	})
	t.Run("auto-fallback-unseekable-fails", func(t *testing.T) {
		_, fb, err := upload(t, payload.TransferAuto, true, newGen(21, size))
		if err == nil || !strings.Contains(err.Error(), "cannot fall back") || len(fb) != 0 {
			t.Fatalf("upload of a half-read unseekable body: %v, fallbacks %v", err, fb)
		}
	})
	t.Run("forced-presigned-fails", func(t *testing.T) {
		hc, _, err := upload(t, payload.TransferPresigned, true, bytes.NewReader(payloadBytes))
		if err == nil || hc.count(brokerHost) != 0 {
			t.Fatalf("forced presigned upload to an unreachable bucket: %v, %d broker PUTs", err, hc.count(brokerHost))
		}
	})
}

// objectKeyOf is the key of object id, under the tenant the test broker
// gives anonymous callers.
func objectKeyOf(ctx context.Context, t *testing.T, b *Broker, id string) string {
	t.Helper()
	for _, tenant := range []string{"", "default"} {
		if _, err := b.Objects.Head(ctx, largeobj.ObjectKey(tenant, id)); err == nil {
			return largeobj.ObjectKey(tenant, id)
		}
	}
	t.Fatalf("no object for %s", id)
	return ""
}
