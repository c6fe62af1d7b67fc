package history

// This file owns writing a history: the Recorder that the runner's clients
// share.
//
// Invariant: lines are written whole and in the order Record was called; a
// line is never interleaved with another.
// Invariant: the first write error is sticky: every later Record, Flush and
// Close returns it, so a history with a hole is never reported as complete.
// mu guards every field but start, which is immutable.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// ErrClosed is returned by Record and Flush after Close.
var ErrClosed = errors.New("history: recorder closed")

// Recorder appends events to a history. It is safe for concurrent use.
type Recorder struct {
	start time.Time // Nanos 0; immutable

	mu     sync.Mutex
	w      *bufio.Writer // guarded by mu
	closer io.Closer     // guarded by mu; nil when the caller owns the writer
	err    error         // guarded by mu; sticky
	closed bool          // guarded by mu
}

// NewRecorder writes the header to w and returns a Recorder appending to it.
// h.Version is set to Version; h.StartUnixNano, when zero, to now. The caller
// keeps owning w: Close flushes but does not close it.
func NewRecorder(w io.Writer, h Header) (*Recorder, error) {
	start := time.Now()
	if h.StartUnixNano == 0 {
		h.StartUnixNano = start.UnixNano()
	}
	h.Version = Version
	line, err := MarshalHeader(h)
	if err != nil {
		return nil, err
	}
	r := &Recorder{start: start, w: bufio.NewWriterSize(w, 1<<16)}
	if err := r.writeLine(line); err != nil {
		return nil, err
	}
	return r, nil
}

// Create creates (or truncates) the file at path and records into it; Close
// closes the file.
func Create(path string, h Header) (*Recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	r, err := NewRecorder(f, h)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	r.closer = f
	return r, nil
}

// Now is the time since the Recorder was created, for event timestamps.
func (r *Recorder) Now() Nanos { return Nanos(time.Since(r.start)) }

// Record validates e and appends it as one line. An invalid event is
// rejected (wrapping ErrMalformed) without being written and without
// poisoning the Recorder; a write error is sticky.
func (r *Recorder) Record(e Event) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("history: record: %w: %w", ErrMalformed, err)
	}
	line, err := MarshalEvent(e)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	return r.writeLine(line)
}

// writeLine writes one line. Callers hold mu (or own r exclusively).
func (r *Recorder) writeLine(line []byte) error {
	if r.err != nil {
		return r.err
	}
	if _, err := r.w.Write(line); err != nil {
		r.err = fmt.Errorf("history: write: %w", err)
		return r.err
	}
	if err := r.w.WriteByte('\n'); err != nil {
		r.err = fmt.Errorf("history: write: %w", err)
		return r.err
	}
	return nil
}

// Flush writes buffered lines to the underlying writer, so a runner that
// dies later leaves a history that decodes up to here.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	return r.flush()
}

func (r *Recorder) flush() error {
	if r.err != nil {
		return r.err
	}
	if err := r.w.Flush(); err != nil {
		r.err = fmt.Errorf("history: flush: %w", err)
	}
	return r.err
}

// Close flushes and, for a Recorder from Create, closes the file. A second
// Close returns nil.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.flush()
	if r.closer != nil {
		if cerr := r.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("history: close: %w", cerr)
		}
	}
	return err
}
