package largeobj

// reader.go owns objectReader: an object streamed by ranged GETs of at most
// one chunk each, so a 100 MB object is never held whole. Where the store
// reads into a given buffer (objstore.RangeReader) every chunk goes into
// one buffer taken from a pool at the first read and given back at Close,
// so streaming an object allocates no chunk per GET; WriteTo hands the
// chunks straight to the writer (io.Copy needs no buffer of its own).
//
// Invariant: the reader yields exactly [pos, end) or an error: a GET that
// returns nothing before end is io.ErrUnexpectedEOF.
// Invariant: a pooled buffer is given back only by Close, after which the
// reader reads nothing.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// chunkPool holds buffers of readChunk bytes.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

var errReaderClosed = errors.New("largeobj: object reader closed")

type objectReader struct {
	ctx      context.Context
	store    objstore.Store
	key      string
	pos, end int64
	chunk    int64
	buf      []byte  // the unread rest of the last chunk
	pooled   *[]byte // the pool's buffer, when the store reads into one
	owned    []byte  // a buffer of chunk bytes when chunk is not readChunk
	closed   bool
}

func newObjectReader(ctx context.Context, store objstore.Store, key string, start, end int64, chunk int64) *objectReader {
	return &objectReader{ctx: ctx, store: store, key: key, pos: start, end: end, chunk: chunk}
}

// fill reads the next chunk into r.buf.
func (r *objectReader) fill() error {
	if r.closed {
		return errReaderClosed
	}
	if r.pos >= r.end {
		return io.EOF
	}
	n := min(r.chunk, r.end-r.pos)
	var b []byte
	var err error
	if rr, ok := r.store.(objstore.RangeReader); ok {
		dst := r.buffer()[:n]
		var got int
		got, err = rr.GetInto(r.ctx, r.key, r.pos, dst)
		b = dst[:got]
	} else {
		b, err = r.store.Get(r.ctx, r.key, r.pos, n)
	}
	if err != nil {
		return fmt.Errorf("largeobj: read %s at %d: %w", r.key, r.pos, err)
	}
	if len(b) == 0 {
		return fmt.Errorf("largeobj: read %s at %d of %d: %w", r.key, r.pos, r.end, io.ErrUnexpectedEOF)
	}
	r.pos += int64(len(b))
	r.buf = b
	return nil
}

// buffer is the reader's chunk buffer: the pool's when chunk is the pool's
// size, else one of its own.
func (r *objectReader) buffer() []byte {
	if r.chunk == readChunk {
		if r.pooled == nil {
			r.pooled = chunkPool.Get().(*[]byte)
		}
		return *r.pooled
	}
	if r.owned == nil {
		r.owned = make([]byte, r.chunk)
	}
	return r.owned
}

func (r *objectReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// WriteTo writes the rest of the object to w, chunk by chunk.
func (r *objectReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if len(r.buf) == 0 {
			if err := r.fill(); errors.Is(err, io.EOF) {
				return total, nil
			} else if err != nil {
				return total, err
			}
		}
		n, err := w.Write(r.buf)
		total += int64(n)
		r.buf = r.buf[n:]
		if err != nil {
			return total, err
		}
	}
}

func (r *objectReader) Close() error {
	r.buf, r.closed = nil, true
	if r.pooled != nil {
		chunkPool.Put(r.pooled)
		r.pooled = nil
	}
	return nil
}
