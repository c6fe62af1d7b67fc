package history

// This file owns the JSON-lines encoding of one event and of the header
// (the format is drawn in chaos/doc.go). It is pure: bytes in, values out.
//
// Invariant: a line is one JSON object whose "type" names its kind; the
// event's fields sit beside "type" in the same object, never nested.
// Invariant: decoding is strict: an unknown field, a missing type, trailing
// data or an event that fails Validate is ErrMalformed, never skipped.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the history format version this package writes and the only
// one it reads. A reader given another version fails with ErrVersion: a
// newer writer may have changed the meaning of a field, and a checker that
// guessed would report anomalies that are not there (or miss ones that are).
const Version = 1

// kindHeader is the "type" of the first line of a history.
const kindHeader = "header"

// Sentinel errors. Decoding errors wrap one of them inside a *LineError.
var (
	// ErrMalformed: a line is not a well-formed event of this version.
	ErrMalformed = errors.New("malformed history")
	// ErrVersion: the header names a format version this package does not read.
	ErrVersion = errors.New("unsupported history version")
)

// LineError is a decoding error at a line of a history (counted from 1,
// the header being line 1).
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("history: line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Header is the first line of a history.
type Header struct {
	Version       int    `json:"version"`         // Version; the Recorder writes it
	StartUnixNano int64  `json:"start_unix_nano"` // wall-clock time of Nanos 0
	Topic         string `json:"topic"`           // the one topic the history covers
	Seed          int64  `json:"seed"`            // the runner's fault and workload seed
}

// Per-kind line layouts: the event's fields flattened beside "type".
type (
	sendLine struct {
		Type Kind `json:"type"`
		Send
	}
	pollLine struct {
		Type Kind `json:"type"`
		Poll
	}
	commitLine struct {
		Type Kind `json:"type"`
		Commit
	}
	assignLine struct {
		Type Kind `json:"type"`
		Assign
	}
	revokeLine struct {
		Type Kind `json:"type"`
		Revoke
	}
	seekLine struct {
		Type Kind `json:"type"`
		Seek
	}
	replicaLogLine struct {
		Type Kind `json:"type"`
		ReplicaLog
	}
	tieredReadLine struct {
		Type Kind `json:"type"`
		TieredRead
	}
	faultStartLine struct {
		Type Kind `json:"type"`
		FaultStart
	}
	faultStopLine struct {
		Type Kind `json:"type"`
		FaultStop
	}
	finalLine struct {
		Type Kind `json:"type"`
		Final
	}
	headerLine struct {
		Type string `json:"type"`
		Header
	}
)

// MarshalEvent encodes one event as one JSON object, without a newline.
// It does not validate; the Recorder does.
func MarshalEvent(e Event) ([]byte, error) {
	var v any
	switch e := e.(type) {
	case Send:
		v = sendLine{KindSend, e}
	case Poll:
		v = pollLine{KindPoll, e}
	case Commit:
		v = commitLine{KindCommit, e}
	case Assign:
		v = assignLine{KindAssign, e}
	case Revoke:
		v = revokeLine{KindRevoke, e}
	case Seek:
		v = seekLine{KindSeek, e}
	case ReplicaLog:
		v = replicaLogLine{KindReplicaLog, e}
	case TieredRead:
		v = tieredReadLine{KindTieredRead, e}
	case FaultStart:
		v = faultStartLine{KindFaultStart, e}
	case FaultStop:
		v = faultStopLine{KindFaultStop, e}
	case Final:
		v = finalLine{KindFinal, e}
	default:
		return nil, fmt.Errorf("history: marshal: unknown event type %T", e)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("history: marshal %s: %w", e.Kind(), err)
	}
	return b, nil
}

// UnmarshalEvent decodes one line (without its newline) into an event and
// validates it. Errors wrap ErrMalformed.
func UnmarshalEvent(line []byte) (Event, error) {
	kind, err := probeType(line)
	if err != nil {
		return nil, err
	}
	var ev Event
	switch Kind(kind) {
	case KindSend:
		ev, err = decodeAs(line, func(l *sendLine) Event { return l.Send })
	case KindPoll:
		ev, err = decodeAs(line, func(l *pollLine) Event { return l.Poll })
	case KindCommit:
		ev, err = decodeAs(line, func(l *commitLine) Event { return l.Commit })
	case KindAssign:
		ev, err = decodeAs(line, func(l *assignLine) Event { return l.Assign })
	case KindRevoke:
		ev, err = decodeAs(line, func(l *revokeLine) Event { return l.Revoke })
	case KindSeek:
		ev, err = decodeAs(line, func(l *seekLine) Event { return l.Seek })
	case KindReplicaLog:
		ev, err = decodeAs(line, func(l *replicaLogLine) Event { return l.ReplicaLog })
	case KindTieredRead:
		ev, err = decodeAs(line, func(l *tieredReadLine) Event { return l.TieredRead })
	case KindFaultStart:
		ev, err = decodeAs(line, func(l *faultStartLine) Event { l.Params = nilIfEmpty(l.Params); return l.FaultStart })
	case KindFaultStop:
		ev, err = decodeAs(line, func(l *faultStopLine) Event { l.Params = nilIfEmpty(l.Params); return l.FaultStop })
	case KindFinal:
		ev, err = decodeAs(line, func(l *finalLine) Event { return l.Final })
	case kindHeader:
		return nil, fmt.Errorf("%w: a second header", ErrMalformed)
	default:
		return nil, fmt.Errorf("%w: unknown event type %q", ErrMalformed, kind)
	}
	if err != nil {
		return nil, err
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return ev, nil
}

// MarshalHeader encodes the header line, without a newline.
func MarshalHeader(h Header) ([]byte, error) {
	b, err := json.Marshal(headerLine{kindHeader, h})
	if err != nil {
		return nil, fmt.Errorf("history: marshal header: %w", err)
	}
	return b, nil
}

// UnmarshalHeader decodes a header line. A header of another version is
// ErrVersion; anything else wrong is ErrMalformed. The version is checked
// before the other fields, so a newer header with new fields still reports
// its version.
func UnmarshalHeader(line []byte) (Header, error) {
	kind, err := probeType(line)
	if err != nil {
		return Header{}, err
	}
	if kind != kindHeader {
		return Header{}, fmt.Errorf("%w: the first line is %q, not a header", ErrMalformed, kind)
	}
	var v struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return Header{}, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	if string(v.Version) != fmt.Sprint(Version) {
		return Header{}, fmt.Errorf("%w %s (this reader knows %d)", ErrVersion, orMissing(v.Version), Version)
	}
	var l headerLine
	if err := decodeStrict(line, &l); err != nil {
		return Header{}, err
	}
	return l.Header, nil
}

// nilIfEmpty makes "params":{} decode like an omitted params (the encoder
// omits an empty map), so a decoded event encodes and decodes again equal.
func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func orMissing(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(missing)"
	}
	return string(raw)
}

// probeType returns the "type" field of a line that is one JSON object.
func probeType(line []byte) (string, error) {
	var p struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(line, &p); err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if p.Type == nil {
		return "", fmt.Errorf("%w: no \"type\" field", ErrMalformed)
	}
	return *p.Type, nil
}

// decodeAs strictly decodes a line into its line layout L and returns the
// event inside it.
func decodeAs[L any](line []byte, event func(*L) Event) (Event, error) {
	var l L
	if err := decodeStrict(line, &l); err != nil {
		return nil, err
	}
	return event(&l), nil
}

// decodeStrict decodes exactly one JSON object, rejecting unknown fields and
// trailing data.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) != 0 {
		return fmt.Errorf("%w: data after the object", ErrMalformed)
	}
	return nil
}
