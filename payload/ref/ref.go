package ref

// Invariants:
//   - Parse accepts exactly the headers Headers writes for a valid Ref, and
//     Parse(r.Headers()) == r for every r with r.Validate() == nil.
//   - Parse never panics on any input (FuzzParse) and refuses, with an error
//     matching ErrMalformed, every envelope that is not well formed.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// The header names of an envelope record.
const (
	HeaderRef         = "sluice.ref"
	HeaderSize        = "sluice.size"
	HeaderSHA256      = "sluice.sha256"
	HeaderContentType = "sluice.content-type"
	HeaderKeyID       = "sluice.enc-key-id"
	HeaderAlgorithm   = "sluice.enc-alg"
)

// Limits on the parts of a reference.
const (
	MaxIDLen          = 64
	MaxContentTypeLen = 255
	MaxKeyIDLen       = 255
	MaxAlgorithmLen   = 64
	// MaxSize bounds a declared size (1 TiB); a broker's own limit on
	// uploads (100 MiB by default) is lower and checked where sessions open.
	MaxSize = int64(1) << 40
)

// Errors of references. The broker answers ErrMalformed, ErrUnknown,
// ErrForeign, ErrExpired and ErrMismatch to a producer as INVALID_RECORD
// (HTTP 400), with the error's text as the message.
var (
	// ErrMalformed: an envelope's headers do not follow the convention.
	ErrMalformed = errors.New("malformed object reference")
	// ErrUnknown: no completed upload session has this reference.
	ErrUnknown = errors.New("unknown object reference")
	// ErrForeign: the reference belongs to another tenant. A broker may
	// answer ErrUnknown instead, so as not to tell one tenant of another's
	// objects.
	ErrForeign = errors.New("object reference of another tenant")
	// ErrExpired: the session completed but was not published before its
	// time to live passed; its object is deleted.
	ErrExpired = errors.New("object reference expired unpublished")
	// ErrMismatch: the envelope's size or checksum differ from what the
	// completed session verified.
	ErrMismatch = errors.New("object reference does not match its object")
)

// Ref is one reference to a stored payload.
type Ref struct {
	ID          string // the reference, as the upload session's completion answered it
	Size        int64  // payload bytes
	SHA256      string // 64 lowercase hex digits
	ContentType string // optional media type
	KeyID       string // optional: the producer's encryption key id
	Algorithm   string // optional: the producer's encryption algorithm
}

// Header is one record header (the shape of kgo.RecordHeader and of the
// broker's own records, so either converts field by field).
type Header struct {
	Key   string
	Value []byte
}

// ValidID reports whether id is a well-formed reference: 1–64 bytes of
// ASCII letters, digits, '_' and '-'. It is safe as one path segment of an
// object key and of a URL.
func ValidID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %s must be 1 to %d characters, got %d", ErrMalformed, HeaderRef, MaxIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return fmt.Errorf("%w: %s may hold only letters, digits, '_' and '-', found %q at %d", ErrMalformed, HeaderRef, c, i)
		}
	}
	return nil
}

// ValidSHA256 reports whether s is 64 lowercase hex digits.
func ValidSHA256(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("%w: %s must be 64 lowercase hex digits, got %d characters", ErrMalformed, HeaderSHA256, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: %s must be lowercase hex, found %q at %d", ErrMalformed, HeaderSHA256, c, i)
		}
	}
	return nil
}

// Validate reports whether r is well formed.
func (r Ref) Validate() error {
	if err := ValidID(r.ID); err != nil {
		return err
	}
	if r.Size < 0 || r.Size > MaxSize {
		return fmt.Errorf("%w: %s %d is outside 0 to %d", ErrMalformed, HeaderSize, r.Size, MaxSize)
	}
	if err := ValidSHA256(r.SHA256); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{HeaderContentType, r.ContentType, MaxContentTypeLen}, {HeaderKeyID, r.KeyID, MaxKeyIDLen}, {HeaderAlgorithm, r.Algorithm, MaxAlgorithmLen}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrMalformed, f.name, len(f.v), f.max)
		}
		for i := 0; i < len(f.v); i++ {
			if c := f.v[i]; c < 0x20 || c == 0x7f {
				return fmt.Errorf("%w: %s holds a control character at %d", ErrMalformed, f.name, i)
			}
		}
	}
	return nil
}

// Headers are r's envelope headers, optional ones only when set.
func (r Ref) Headers() []Header {
	hs := []Header{
		{HeaderRef, []byte(r.ID)},
		{HeaderSize, []byte(strconv.FormatInt(r.Size, 10))},
		{HeaderSHA256, []byte(r.SHA256)},
	}
	for _, o := range []struct{ k, v string }{{HeaderContentType, r.ContentType}, {HeaderKeyID, r.KeyID}, {HeaderAlgorithm, r.Algorithm}} {
		if o.v != "" {
			hs = append(hs, Header{o.k, []byte(o.v)})
		}
	}
	return hs
}

// IsEnvelope reports whether headers name a reference at all: whether any
// header's key begins "sluice." and is one of the convention's. A record
// without one is an ordinary inline record.
func IsEnvelope(headers []Header) bool {
	for _, h := range headers {
		switch h.Key {
		case HeaderRef, HeaderSize, HeaderSHA256, HeaderContentType, HeaderKeyID, HeaderAlgorithm:
			return true
		}
	}
	return false
}

// Parse reads an envelope's reference from its headers. ok is false, with
// no error, when no header of the convention is present (an inline
// record). Any header of the convention makes the record an envelope, which
// must then be whole and well formed.
func Parse(headers []Header) (r Ref, ok bool, err error) {
	if !IsEnvelope(headers) {
		return Ref{}, false, nil
	}
	seen := map[string]bool{}
	var size string
	for _, h := range headers {
		var dst *string
		switch h.Key {
		case HeaderRef:
			dst = &r.ID
		case HeaderSize:
			dst = &size
		case HeaderSHA256:
			dst = &r.SHA256
		case HeaderContentType:
			dst = &r.ContentType
		case HeaderKeyID:
			dst = &r.KeyID
		case HeaderAlgorithm:
			dst = &r.Algorithm
		default:
			continue // the application's own headers travel untouched
		}
		if seen[h.Key] {
			return Ref{}, true, fmt.Errorf("%w: header %s appears twice", ErrMalformed, h.Key)
		}
		seen[h.Key] = true
		*dst = string(h.Value)
	}
	for _, k := range []string{HeaderRef, HeaderSize, HeaderSHA256} {
		if !seen[k] {
			return Ref{}, true, fmt.Errorf("%w: header %s is missing", ErrMalformed, k)
		}
	}
	n, perr := strconv.ParseInt(size, 10, 64)
	if perr != nil || (len(size) > 1 && size[0] == '0') || size[0] == '+' {
		return Ref{}, true, fmt.Errorf("%w: %s %q is not a decimal byte count", ErrMalformed, HeaderSize, truncate(size))
	}
	r.Size = n
	if err := r.Validate(); err != nil {
		return Ref{}, true, err
	}
	return r, true, nil
}

// SumHex is the lowercase hex form of a SHA-256 digest.
func SumHex(sum [32]byte) string { return hex.EncodeToString(sum[:]) }

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
