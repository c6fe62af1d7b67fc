package objstore

// multipart.go owns the optional Multipart and Presigner interfaces: an
// object written in numbered parts, each streamed from an io.Reader of a
// known size, then assembled by Complete (large payloads, broker/largeobj).
//
// Invariant: an object written by multipart is invisible under its key until
// CompleteMultipart succeeds, and is then whole; AbortMultipart of an upload
// that is gone (completed, aborted) is success.
// Invariant: every part but the last is at least MinPartSize bytes (S3's
// rule, which every implementation enforces at Complete so that tests on
// file and mem find what S3 would refuse).

import (
	"context"
	"errors"
	"io"
	"time"
)

// Limits of multipart uploads (S3's).
const (
	MinPartSize = 5 << 20 // every part but the last
	MaxPartSize = 5 << 30
	MaxParts    = 10_000
)

var (
	// ErrNoUpload: a multipart call names an upload that does not exist
	// (never created, completed or aborted).
	ErrNoUpload = errors.New("objstore: no such multipart upload")
	// ErrInvalidPart: Complete names a part that was not uploaded, with
	// another ETag, out of order, or smaller than MinPartSize before the last.
	ErrInvalidPart = errors.New("objstore: invalid part")
	// ErrUnsupported: the store cannot do what was asked (a wrapper around
	// a store without multipart, presigning on a store that has no URLs).
	ErrUnsupported = errors.New("objstore: operation not supported by this store")
)

// Part is one uploaded part.
type Part struct {
	Number int32  // 1 to MaxParts
	ETag   string // as UploadPart answered it
	Size   int64
}

// Multipart is an object store that can write an object in parts. The S3,
// file and memory stores implement it, and the fault wrapper passes it
// through.
type Multipart interface {
	// CreateMultipart starts an upload of key and returns its id.
	CreateMultipart(ctx context.Context, key string) (uploadID string, err error)
	// UploadPart streams exactly size bytes of body as part number of the
	// upload, replacing any earlier part of that number. It reads body
	// once and holds no more of it than a buffer; a body that ends early
	// fails the call. A failed call may have stored nothing or the part.
	UploadPart(ctx context.Context, key, uploadID string, number int32, body io.Reader, size int64) (etag string, err error)
	// ListParts lists the parts uploaded so far, by number.
	ListParts(ctx context.Context, key, uploadID string) ([]Part, error)
	// CompleteMultipart assembles parts (ascending numbers, ETags as
	// uploaded) into the object key.
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error
	// AbortMultipart discards the upload and its parts.
	AbortMultipart(ctx context.Context, key, uploadID string) error
}

// Presigner is a store whose parts a client can upload straight to it, by
// a URL that needs no other credential and stops working after expires.
type Presigner interface {
	PresignUploadPart(ctx context.Context, key, uploadID string, number int32, size int64, expires time.Duration) (url string, err error)
}

// AsMultipart returns s's multipart side, or false when it has none.
func AsMultipart(s Store) (Multipart, bool) {
	m, ok := s.(Multipart)
	return m, ok
}

// CheckParts applies Complete's rules to parts against what was uploaded
// (by number); implementations without a service to enforce them call it.
func CheckParts(parts []Part, uploaded map[int32]Part) error {
	if len(parts) == 0 {
		return errors.Join(ErrInvalidPart, errors.New("no parts"))
	}
	prev := int32(0)
	for i, p := range parts {
		u, ok := uploaded[p.Number]
		switch {
		case p.Number <= prev:
			return errors.Join(ErrInvalidPart, errors.New("part numbers not ascending"))
		case !ok || u.ETag != p.ETag:
			return errors.Join(ErrInvalidPart, errors.New("part not uploaded with that ETag"))
		case i < len(parts)-1 && u.Size < MinPartSize:
			return errors.Join(ErrInvalidPart, errors.New("part smaller than the minimum before the last"))
		}
		prev = p.Number
	}
	return nil
}
