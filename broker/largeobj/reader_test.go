package largeobj

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/mem"
)

// getOnly hides a store's GetInto: the reader then allocates every chunk.
type getOnly struct{ objstore.Store }

func readerStore(t testing.TB, size int) (*mem.Store, []byte) {
	t.Helper()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	s := mem.New()
	if err := s.Put(context.Background(), "large/t/x", body); err != nil {
		t.Fatal(err)
	}
	return s, body
}

// TestObjectReaderReadsExactly: by Read and by WriteTo, with and without
// GetInto, a range of the object is read exactly, a read after Close fails,
// and a missing object is an error, not a short body.
func TestObjectReaderReadsExactly(t *testing.T) {
	s, body := readerStore(t, 3*readChunk+123)
	ctx := context.Background()
	for _, st := range []objstore.Store{s, getOnly{s}} {
		for _, byWriteTo := range []bool{false, true} {
			r := newObjectReader(ctx, st, "large/t/x", 5, int64(len(body))-7, readChunk)
			var got []byte
			var err error
			if byWriteTo {
				var buf bytes.Buffer
				_, err = r.WriteTo(&buf)
				got = buf.Bytes()
			} else {
				got, err = io.ReadAll(struct{ io.Reader }{r})
			}
			if err != nil || !bytes.Equal(got, body[5:len(body)-7]) {
				t.Fatalf("%T, WriteTo %v: %d bytes, %v", st, byWriteTo, len(got), err)
			}
			r.Close()
			if _, err := r.Read(make([]byte, 1)); err == nil {
				t.Fatalf("%T: a read after Close succeeded", st)
			}
		}
		r := newObjectReader(ctx, st, "large/t/missing", 0, 10, readChunk)
		if _, err := io.ReadAll(r); err == nil {
			t.Fatalf("%T: reading a missing object succeeded", st)
		}
	}
}

// BenchmarkObjectReader streams a 100 MiB object as a download does
// (io.Copy of the reader): "get" allocates each 4 MiB chunk (the store's
// Get), "getinto" reads every chunk into one pooled buffer.
func BenchmarkObjectReader(b *testing.B) {
	const size = 100 << 20
	s, _ := readerStore(b, size)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		store objstore.Store
	}{{"get", getOnly{s}}, {"getinto", s}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				r := newObjectReader(ctx, c.store, "large/t/x", 0, size, readChunk)
				if n, err := io.Copy(io.Discard, r); err != nil || n != size {
					b.Fatalf("%d bytes, %v", n, err)
				}
				r.Close()
			}
		})
	}
}
