package objstore

// store.go owns the Store interface, the errors every implementation returns
// and the rules for keys and ranges that all of them apply the same way.
//
// Invariant: an implementation returns ErrNotFound (wrapped) for Get and Head
// of a missing key and nothing else for it; ErrInvalidKey and ErrInvalidRange
// before any I/O.
// Invariant: a Store is safe for concurrent use by many goroutines.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxKeyLen is the longest key in bytes (S3's limit, less room for a prefix).
const MaxKeyLen = 900

// Info describes one stored object.
type Info struct {
	Key      string    // the key as the caller gave it (without a store's prefix)
	Size     int64     // bytes
	Modified time.Time // when the object was last written, by the store's clock
}

// Store is what tiering needs from object storage. See the package doc for
// the contract each method keeps.
type Store interface {
	// Put stores body under key as one whole object, replacing any other.
	Put(ctx context.Context, key string, body []byte) error
	// Get reads bytes [off, off+n) of key, or [off, end) when n < 0.
	Get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Head describes key.
	Head(ctx context.Context, key string) (Info, error)
	// List calls fn for each key that starts with prefix, in lexical order.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Delete removes key; a missing key is success.
	Delete(ctx context.Context, key string) error
}

var (
	// ErrNotFound: Get or Head of a key that does not exist.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrInvalidKey: a key that ValidKey rejects.
	ErrInvalidKey = errors.New("objstore: invalid key")
	// ErrInvalidRange: a Get whose offset is negative or beyond the object's end.
	ErrInvalidRange = errors.New("objstore: range starts beyond the object")
)

// ValidKey returns nil if key is a valid object key, else an error matching
// ErrInvalidKey that says why.
func ValidKey(key string) error {
	why := ""
	switch {
	case key == "":
		why = "empty"
	case len(key) > MaxKeyLen:
		why = fmt.Sprintf("longer than %d bytes", MaxKeyLen)
	case !utf8.ValidString(key):
		why = "not UTF-8"
	case strings.ContainsRune(key, 0):
		why = "contains NUL"
	case strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/"):
		why = "starts or ends with '/'"
	default:
		for seg := range strings.SplitSeq(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				why = fmt.Sprintf("has segment %q", seg)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why)
}

// ResolveRange applies Get's range rules to an object of size bytes: it
// returns the half-open span [start, end) that Get(off, n) must return, or an
// error matching ErrInvalidRange.
func ResolveRange(size, off, n int64) (start, end int64, err error) {
	if off < 0 || off > size {
		return 0, 0, fmt.Errorf("%w: offset %d, size %d", ErrInvalidRange, off, size)
	}
	end = size
	if n >= 0 && n < size-off {
		end = off + n
	}
	return off, end, nil
}
