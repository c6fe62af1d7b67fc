package largeobj

// reader.go owns objectReader: an object streamed by ranged GETs of at most
// one chunk each, so a 100 MB object is never held whole.
//
// Invariant: the reader yields exactly [pos, end) or an error: a GET that
// returns nothing before end is io.ErrUnexpectedEOF.

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-mq/sluice/tier/objstore"
)

type objectReader struct {
	ctx      context.Context
	store    objstore.Store
	key      string
	pos, end int64
	chunk    int64
	buf      []byte
}

func newObjectReader(ctx context.Context, store objstore.Store, key string, start, end int64, chunk int64) *objectReader {
	return &objectReader{ctx: ctx, store: store, key: key, pos: start, end: end, chunk: chunk}
}

func (r *objectReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.pos >= r.end {
			return 0, io.EOF
		}
		b, err := r.store.Get(r.ctx, r.key, r.pos, min(r.chunk, r.end-r.pos))
		if err != nil {
			return 0, fmt.Errorf("largeobj: read %s at %d: %w", r.key, r.pos, err)
		}
		if len(b) == 0 {
			return 0, fmt.Errorf("largeobj: read %s at %d of %d: %w", r.key, r.pos, r.end, io.ErrUnexpectedEOF)
		}
		r.pos += int64(len(b))
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *objectReader) Close() error { r.buf = nil; return nil }
