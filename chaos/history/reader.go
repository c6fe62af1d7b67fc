package history

// This file owns reading a history: the header line, then one event per
// line, with the line number in every error.
//
// Invariant: a Reader returns events in file order and stops at the first
// malformed line; it never skips one.
// A Reader is not safe for concurrent use.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxLineBytes bounds one line. Replica logs are the long lines; a runner
// with more entries than fit splits them over several ReplicaLog events.
const MaxLineBytes = 64 << 20

// Reader decodes a history.
type Reader struct {
	br     *bufio.Reader
	header Header
	line   int // number of the last line read
}

// NewReader reads and checks the header. An empty input, or a first line
// that is not a header of this Version, is an error (ErrMalformed or
// ErrVersion, inside a *LineError).
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 1<<16)}
	line, err := rd.readLine()
	if errors.Is(err, io.EOF) {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: empty history, no header", ErrMalformed)}
	}
	if err != nil {
		return nil, err
	}
	h, err := UnmarshalHeader(line)
	if err != nil {
		return nil, &LineError{Line: rd.line, Err: err}
	}
	rd.header = h
	return rd, nil
}

// Header is the history's header.
func (r *Reader) Header() Header { return r.header }

// Line is the number of the last line read (the header is line 1).
func (r *Reader) Line() int { return r.line }

// Next returns the next event, or io.EOF after the last one. A decoding
// error is a *LineError wrapping ErrMalformed.
func (r *Reader) Next() (Event, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	ev, err := UnmarshalEvent(line)
	if err != nil {
		return nil, &LineError{Line: r.line, Err: err}
	}
	return ev, nil
}

// readLine returns the next line without its newline. The last line may
// lack a newline. An empty line is malformed.
func (r *Reader) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes+1 {
			r.line++
			return nil, &LineError{Line: r.line, Err: fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLineBytes)}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(buf) == 0 {
				return nil, io.EOF
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("history: read line %d: %w", r.line+1, err)
		}
		break
	}
	r.line++
	buf = bytes.TrimSuffix(buf, []byte("\n"))
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	if len(bytes.TrimSpace(buf)) == 0 {
		return nil, &LineError{Line: r.line, Err: fmt.Errorf("%w: empty line", ErrMalformed)}
	}
	return buf, nil
}

// ReadAll decodes a whole history.
func ReadAll(r io.Reader) (Header, []Event, error) {
	rd, err := NewReader(r)
	if err != nil {
		return Header{}, nil, err
	}
	var evs []Event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd.Header(), evs, nil
		}
		if err != nil {
			return rd.Header(), evs, err
		}
		evs = append(evs, ev)
	}
}

// ReadFile decodes the history in a file.
func ReadFile(path string) (Header, []Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, nil, fmt.Errorf("history: %w", err)
	}
	h, evs, err := ReadAll(f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("history: close: %w", cerr)
	}
	if err != nil {
		return h, evs, fmt.Errorf("%s: %w", path, err)
	}
	return h, evs, nil
}
