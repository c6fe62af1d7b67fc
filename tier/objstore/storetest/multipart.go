package storetest

// multipart.go owns the conformance suite of objstore.Multipart.

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// onlyReader hides every method of a reader but Read (no Seek, no Len), as
// an HTTP request body is.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// RunMultipart runs the multipart conformance suite; newStore's stores
// must implement objstore.Multipart.
func RunMultipart(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store, m objstore.Multipart)
	}{
		{"Complete", testMultipartComplete},
		{"SmallPartRefused", testMultipartSmallPart},
		{"Abort", testMultipartAbort},
		{"ShortBody", testMultipartShortBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			m, ok := objstore.AsMultipart(s)
			if !ok {
				t.Fatalf("%T does not implement objstore.Multipart", s)
			}
			tc.fn(t, s, m)
		})
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testMultipartComplete(t *testing.T, s objstore.Store, m objstore.Multipart) {
	key := "large/t/obj1"
	id, err := m.CreateMultipart(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	body := randomBytes(1, objstore.MinPartSize+12345)
	p2 := body[objstore.MinPartSize:]
	// Parts out of order: the numbers decide.
	e2, err := m.UploadPart(ctx(t), key, id, 2, onlyReader{bytes.NewReader(p2)}, int64(len(p2)))
	if err != nil {
		t.Fatal(err)
	}
	e1, err := m.UploadPart(ctx(t), key, id, 1, onlyReader{bytes.NewReader(body[:objstore.MinPartSize])}, objstore.MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx(t), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("an incomplete upload is visible: %v", err)
	}
	listed, err := m.ListParts(ctx(t), key, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[0].Number != 1 || listed[0].ETag != e1 || listed[1].ETag != e2 || listed[1].Size != int64(len(p2)) {
		t.Fatalf("ListParts = %+v; want parts 1 (%s) and 2 (%s, %d bytes)", listed, e1, e2, len(p2))
	}
	n := 0
	if err := s.List(ctx(t), "", func(objstore.Info) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("List sees %d objects (%v) of an incomplete upload", n, err)
	}
	if err := m.CompleteMultipart(ctx(t), key, id, listed); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, body) {
		t.Fatalf("completed object differs: %d bytes, want %d", len(got), len(body))
	}
	if got := mustGet(t, s, key, objstore.MinPartSize-3, 6); !bytes.Equal(got, body[objstore.MinPartSize-3:objstore.MinPartSize+3]) {
		t.Fatalf("range across the parts differs")
	}
	if err := m.AbortMultipart(ctx(t), key, id); err != nil {
		t.Fatalf("abort of a completed upload: %v", err)
	}
	if _, err := m.ListParts(ctx(t), key, id); !errors.Is(err, objstore.ErrNoUpload) {
		t.Fatalf("ListParts of a completed upload: %v; want ErrNoUpload", err)
	}
}

func testMultipartSmallPart(t *testing.T, _ objstore.Store, m objstore.Multipart) {
	key := "large/t/small"
	id, err := m.CreateMultipart(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	var parts []objstore.Part
	for i := int32(1); i <= 2; i++ {
		e, err := m.UploadPart(ctx(t), key, id, i, bytes.NewReader([]byte("tiny")), 4)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, objstore.Part{Number: i, ETag: e})
	}
	if err := m.CompleteMultipart(ctx(t), key, id, parts); !errors.Is(err, objstore.ErrInvalidPart) {
		t.Fatalf("complete with a small first part: %v; want ErrInvalidPart", err)
	}
	if err := m.AbortMultipart(ctx(t), key, id); err != nil {
		t.Fatal(err)
	}
}

func testMultipartAbort(t *testing.T, s objstore.Store, m objstore.Multipart) {
	key := "large/t/aborted"
	id, err := m.CreateMultipart(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.UploadPart(ctx(t), key, id, 1, bytes.NewReader([]byte("last and only")), 13)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AbortMultipart(ctx(t), key, id); err != nil {
		t.Fatal(err)
	}
	if err := m.CompleteMultipart(ctx(t), key, id, []objstore.Part{{Number: 1, ETag: e}}); err == nil {
		t.Fatal("complete after abort succeeded")
	}
	if _, err := s.Head(ctx(t), key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("an aborted upload is visible: %v", err)
	}
	if err := m.AbortMultipart(ctx(t), key, id); err != nil {
		t.Fatalf("second abort: %v", err)
	}
}

func testMultipartShortBody(t *testing.T, s objstore.Store, m objstore.Multipart) {
	key := "large/t/short"
	id, err := m.CreateMultipart(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UploadPart(ctx(t), key, id, 1, onlyReader{bytes.NewReader([]byte("short"))}, 10); err == nil {
		t.Fatal("a part whose body ended early was accepted")
	}
	_ = m.AbortMultipart(ctx(t), key, id)
}
