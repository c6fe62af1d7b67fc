package largeobj

// service.go owns the Service: its configuration, Begin, PutPart, Complete,
// Abort, Claim and Open; sweep.go owns Sweep.
//
// Invariant: a record is read, checked and written back by a transaction on
// the revision read (Sessions.UpdateUpload); a lost race is ErrConflict and
// nothing the loser did is recorded.
// Invariant: a session of another tenant is answered exactly as a session
// that does not exist (ref.ErrUnknown).
// Invariant: the saved hash state is always the SHA-256 state of exactly
// the first Received bytes, which are the parts listed in Parts.
// The Service holds no mutable state of its own: everything is in etcd.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/broker/node"
	"github.com/sluice-mq/sluice/meta"
	"github.com/sluice-mq/sluice/payload/ref"
	"github.com/sluice-mq/sluice/tier/objstore"
)

// Defaults of Config.
const (
	DefaultTTL            = time.Hour
	DefaultMaxObjectBytes = 100 << 20
	DefaultPartSize       = 8 << 20
	DefaultPresignExpiry  = 15 * time.Minute
	DefaultRetain         = 24 * time.Hour
	DefaultGrace          = time.Hour
	// readChunk is the size of one ranged GET when an object is read back
	// or streamed to a client.
	readChunk = 4 << 20
)

// Errors of the service, besides ref.ErrUnknown, ref.ErrExpired and
// ref.ErrMismatch. Each maps onto one HTTP status (broker/httpapi/objapi).
var (
	// ErrInvalid: a request the service cannot accept (a malformed sha256,
	// a range that does not fit the session, a bad part length). 400.
	ErrInvalid = errors.New("invalid upload request")
	// ErrTooLarge: a declared size above the broker's maximum. 413.
	ErrTooLarge = errors.New("payload too large")
	// ErrState: the session is not in a state that allows the call. 409.
	ErrState = errors.New("upload session in the wrong state")
	// ErrOutOfOrder: a part that does not start where the bytes received
	// end. 409.
	ErrOutOfOrder = errors.New("part out of order")
	// ErrChecksum: Complete found a size or SHA-256 other than declared;
	// the session is aborted and its bytes deleted. 422.
	ErrChecksum = errors.New("payload does not match its declared size and sha256")
	// ErrConflict: another broker changed the session meanwhile; retry. 409.
	ErrConflict = errors.New("upload session changed concurrently")
	// ErrUnsupported: the object store has no multipart uploads. 501.
	ErrUnsupported = errors.New("the object store does not support large payloads")
)

// Sessions is what the service needs of the metadata store; *meta.Store
// has it.
type Sessions interface {
	CreateUpload(ctx context.Context, u meta.Upload) (meta.Upload, error)
	GetUpload(ctx context.Context, id string) (meta.Upload, error)
	UpdateUpload(ctx context.Context, u meta.Upload) (meta.Upload, error)
	DeleteUpload(ctx context.Context, u meta.Upload) error
	ListUploads(ctx context.Context, fn func(meta.Upload) error) error
	// The tenants' byte counters (meta/upload_bytes.go; quota.go).
	ListUploadsAt(ctx context.Context, fn func(meta.Upload) error) (int64, error)
	UploadBytesOf(ctx context.Context, tenant string) (meta.UploadBytes, error)
	ListUploadBytes(ctx context.Context) (map[string]meta.UploadBytes, error)
	ReconcileUploadBytes(ctx context.Context, rev int64, uploads []meta.Upload) (int, error)
	// The reference ledger (meta/largerefs.go; ledger.go).
	ClaimRef(ctx context.Context, u meta.Upload, publish bool, at meta.LargeRef) error
	RefsOfObject(ctx context.Context, id string) ([]meta.LargeRef, int64, error)
	DropRef(ctx context.Context, r meta.LargeRef) error
	CondemnUpload(ctx context.Context, u meta.Upload, rev int64) (meta.Upload, error)
	Topics(ctx context.Context) ([]meta.Topic, error)
}

var _ Sessions = (*meta.Store)(nil)

// Config configures a Service.
type Config struct {
	Store    objstore.Store // must implement objstore.Multipart
	Sessions Sessions
	Now      func() time.Time // nil: time.Now
	Logger   zerolog.Logger
	// TTL is how long a session may stay open, and a completed one
	// unpublished (--upload-session-ttl; 0: DefaultTTL).
	TTL time.Duration
	// MaxObjectBytes bounds a declared size (--max-object-bytes; 0:
	// DefaultMaxObjectBytes).
	MaxObjectBytes int64
	// PartSize is the size of every part but the last (0: DefaultPartSize;
	// at least objstore.MinPartSize).
	PartSize int64
	// PresignExpiry is the life of a presigned part URL (0:
	// DefaultPresignExpiry), never beyond the session's TTL.
	PresignExpiry time.Duration
	// Retain is how long the records of aborted and expired sessions stay
	// (0: DefaultRetain), so that a late Claim hears ErrExpired.
	Retain time.Duration
	// Release is the reference ledger's seam: Sweep asks it of each
	// published session, and deletes the object and the record only when
	// it answers true (no live record references the object, and its
	// grace has passed). nil: the ledger's own (Service.Release, ledger.go).
	Release func(ctx context.Context, u meta.Upload) (bool, error)
	// Grace is how long a published object stays once no live record
	// references it, for readers still streaming it (0: DefaultGrace).
	Grace time.Duration
	// NewID makes session ids (nil: 32 random hex digits).
	NewID func() string
	// Quotas enforce object_storage_bytes and storage_bytes (quota.go;
	// the zero value: none).
	Quotas Quotas
}

// Service runs upload sessions. Safe for concurrent use.
type Service struct {
	cfg    Config
	multi  objstore.Multipart
	log    zerolog.Logger
	totals totals // sweep.go
}

// New checks cfg and returns the Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Sessions == nil {
		return nil, errors.New("largeobj: a Store and Sessions are required")
	}
	m, ok := objstore.AsMultipart(cfg.Store)
	if !ok {
		return nil, fmt.Errorf("largeobj: %T: %w", cfg.Store, ErrUnsupported)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxObjectBytes == 0 {
		cfg.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PresignExpiry == 0 {
		cfg.PresignExpiry = DefaultPresignExpiry
	}
	if cfg.Retain == 0 {
		cfg.Retain = DefaultRetain
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	switch {
	case cfg.TTL < 0 || cfg.MaxObjectBytes < 0 || cfg.Retain < 0 || cfg.PresignExpiry < 0 || cfg.Grace < 0:
		return nil, errors.New("largeobj: negative TTL, maximum, retention, presign expiry or grace")
	case cfg.PartSize < objstore.MinPartSize || cfg.PartSize > objstore.MaxPartSize:
		return nil, fmt.Errorf("largeobj: part size %d outside [%d, %d]", cfg.PartSize, objstore.MinPartSize, objstore.MaxPartSize)
	case cfg.MaxObjectBytes > cfg.PartSize*objstore.MaxParts || cfg.MaxObjectBytes > ref.MaxSize:
		return nil, fmt.Errorf("largeobj: maximum object size %d needs more than %d parts of %d bytes", cfg.MaxObjectBytes, objstore.MaxParts, cfg.PartSize)
	}
	s := &Service{cfg: cfg, multi: m, log: cfg.Logger.With().Str("component", "largeobj").Logger()}
	if s.cfg.Release == nil {
		s.cfg.Release = s.Release
	}
	return s, nil
}

// TTL is the sessions' time to live.
func (s *Service) TTL() time.Duration { return s.cfg.TTL }

// MaxObjectBytes is the largest payload a session accepts.
func (s *Service) MaxObjectBytes() int64 { return s.cfg.MaxObjectBytes }

// PartSize is the size of every part but the last.
func (s *Service) PartSize() int64 { return s.cfg.PartSize }

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ObjectKey is where the payload of session id of tenant is stored.
func ObjectKey(tenant, id string) string { return "large/" + url.PathEscape(tenant) + "/" + id }

// BeginRequest opens a session.
type BeginRequest struct {
	Tenant, Topic string // the HTTP layer checked the topic exists and the tenant may write it
	Size          int64
	SHA256        string
	ContentType   string
	KeyID         string
	Algorithm     string
}

// PresignedPart is one part a client may PUT straight to the store.
type PresignedPart struct {
	Number int32  `json:"part_number"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	URL    string `json:"url"`
}

// Session is an opened session, as Begin answers it.
type Session struct {
	ID        string
	ExpiresAt time.Time
	PartSize  int64
	Presigned []PresignedPart // empty when the store does not presign
}

// Begin validates req and opens a session: the multipart upload is created
// in the store and the record in etcd.
func (s *Service) Begin(ctx context.Context, req BeginRequest) (Session, error) {
	r := ref.Ref{ID: "x", Size: req.Size, SHA256: req.SHA256, ContentType: req.ContentType, KeyID: req.KeyID, Algorithm: req.Algorithm}
	if err := r.Validate(); err != nil {
		return Session{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if req.Tenant == "" || req.Topic == "" {
		return Session{}, fmt.Errorf("%w: a tenant and a topic are required", ErrInvalid)
	}
	if req.Size < 1 {
		return Session{}, fmt.Errorf("%w: size must be at least 1 byte", ErrInvalid)
	}
	if req.Size > s.cfg.MaxObjectBytes {
		return Session{}, fmt.Errorf("%w: %d bytes declared, at most %d", ErrTooLarge, req.Size, s.cfg.MaxObjectBytes)
	}
	if err := s.checkQuota(ctx, req.Tenant, "", req.Size, true); err != nil {
		return Session{}, err
	}
	id := s.cfg.NewID()
	if err := ref.ValidID(id); err != nil {
		return Session{}, fmt.Errorf("largeobj: new session id: %w", err)
	}
	key := ObjectKey(req.Tenant, id)
	uploadID, err := s.multi.CreateMultipart(ctx, key)
	if err != nil {
		return Session{}, fmt.Errorf("largeobj: create multipart upload of %s: %w", key, err)
	}
	now := s.cfg.Now()
	u := meta.Upload{ID: id, Tenant: req.Tenant, Topic: req.Topic, Size: req.Size, SHA256: req.SHA256,
		ContentType: req.ContentType, KeyID: req.KeyID, Algorithm: req.Algorithm, State: meta.UploadOpen,
		CreatedMs: now.UnixMilli(), ExpiresMs: now.Add(s.cfg.TTL).UnixMilli(), ObjectKey: key,
		UploadID: uploadID, PartSize: s.cfg.PartSize}
	if _, err := s.cfg.Sessions.CreateUpload(ctx, u); err != nil {
		_ = s.multi.AbortMultipart(context.WithoutCancel(ctx), key, uploadID)
		return Session{}, fmt.Errorf("largeobj: record session: %w", err)
	}
	out := Session{ID: id, ExpiresAt: time.UnixMilli(u.ExpiresMs), PartSize: u.PartSize}
	if ps, ok := s.cfg.Store.(objstore.Presigner); ok {
		out.Presigned, err = s.presign(ctx, ps, u)
		if err != nil && !errors.Is(err, objstore.ErrUnsupported) {
			s.log.Warn().Err(err).Str("session", id).Msg("presign parts; the session goes on without them")
		}
	}
	s.log.Debug().Str("session", id).Str("tenant", req.Tenant).Str("topic", req.Topic).Int64("size_bytes", req.Size).Msg("upload session opened")
	return out, nil
}

func (s *Service) presign(ctx context.Context, ps objstore.Presigner, u meta.Upload) ([]PresignedPart, error) {
	exp := min(s.cfg.PresignExpiry, s.cfg.TTL)
	var out []PresignedPart
	for off := int64(0); off < u.Size; off += u.PartSize {
		n := min(u.PartSize, u.Size-off)
		num := int32(off/u.PartSize) + 1
		url, err := ps.PresignUploadPart(ctx, u.ObjectKey, u.UploadID, num, n, exp)
		if err != nil {
			return nil, err
		}
		out = append(out, PresignedPart{Number: num, Offset: off, Length: n, URL: url})
	}
	return out, nil
}

// session reads tenant's session id; another tenant's is ErrUnknown.
func (s *Service) session(ctx context.Context, tenant, id string) (meta.Upload, error) {
	if err := ref.ValidID(id); err != nil {
		return meta.Upload{}, fmt.Errorf("%w: %q", ref.ErrUnknown, id)
	}
	u, err := s.cfg.Sessions.GetUpload(ctx, id)
	if errors.Is(err, meta.ErrNotFound) || err == nil && u.Tenant != tenant {
		return meta.Upload{}, fmt.Errorf("%w: %q", ref.ErrUnknown, id)
	}
	if err != nil {
		return meta.Upload{}, fmt.Errorf("largeobj: read session %q: %w", id, err)
	}
	return u, nil
}

// update writes u back; a lost race is ErrConflict.
func (s *Service) update(ctx context.Context, u meta.Upload) (meta.Upload, error) {
	nu, err := s.cfg.Sessions.UpdateUpload(ctx, u)
	if errors.Is(err, meta.ErrConflict) || errors.Is(err, meta.ErrNotFound) {
		return meta.Upload{}, fmt.Errorf("%w: session %q: %w", ErrConflict, u.ID, err)
	}
	return nu, err
}

func (s *Service) expired(u meta.Upload) bool {
	return !s.cfg.Now().Before(time.UnixMilli(u.ExpiresMs))
}

// restoreHash is the SHA-256 state of the first u.Received bytes.
func restoreHash(u meta.Upload) (hash.Hash, error) {
	h := sha256.New()
	if len(u.HashState) == 0 {
		if u.Received != 0 {
			return nil, fmt.Errorf("largeobj: session %q: %d bytes received and no hash state: %w", u.ID, u.Received, meta.ErrCorrupt)
		}
		return h, nil
	}
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(u.HashState); err != nil {
		return nil, fmt.Errorf("largeobj: session %q: hash state: %w: %w", u.ID, err, meta.ErrCorrupt)
	}
	return h, nil
}

// PutPart streams bytes [off, off+n) of session id's payload from body to
// the store, part by part, recording each part and the running hash. It
// returns the bytes received so far. See the package doc for the rules of
// ranges.
func (s *Service) PutPart(ctx context.Context, tenant, id string, off int64, body io.Reader, n int64) (int64, error) {
	u, err := s.session(ctx, tenant, id)
	if err != nil {
		return 0, err
	}
	switch {
	case u.State != meta.UploadOpen:
		return u.Received, fmt.Errorf("%w: session %q is %s, not open", ErrState, id, u.State)
	case s.expired(u):
		return u.Received, fmt.Errorf("%w: session %q passed its time to live", ref.ErrExpired, id)
	case n <= 0 || off < 0 || off+n > u.Size:
		return u.Received, fmt.Errorf("%w: range of %d bytes at %d does not fit a payload of %d", ErrInvalid, n, off, u.Size)
	case off != u.Received:
		return u.Received, fmt.Errorf("%w: the next part starts at offset %d, not %d", ErrOutOfOrder, u.Received, off)
	case off+n != u.Size && n%u.PartSize != 0:
		return u.Received, fmt.Errorf("%w: a range that does not end the payload must be a multiple of the part size %d bytes; got %d", ErrInvalid, u.PartSize, n)
	}
	h, err := restoreHash(u)
	if err != nil {
		return u.Received, err
	}
	for end := off + n; u.Received < end; {
		size := min(u.PartSize, u.Size-u.Received)
		num := int32(u.Received/u.PartSize) + 1
		etag, err := s.multi.UploadPart(ctx, u.ObjectKey, u.UploadID, num, io.TeeReader(io.LimitReader(body, size), h), size)
		if err != nil {
			return u.Received, fmt.Errorf("largeobj: session %q: part %d: %w", id, num, err)
		}
		state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return u.Received, fmt.Errorf("largeobj: session %q: marshal hash: %w", id, err)
		}
		next := u
		next.Parts = append(append([]meta.UploadPart{}, u.Parts...), meta.UploadPart{Number: num, ETag: etag, Size: size})
		next.Received += size
		next.HashState = state
		if u, err = s.update(ctx, next); err != nil {
			return next.Received - size, err
		}
	}
	return u.Received, nil
}

// Completed is what Complete answers.
type Completed struct {
	Ref ref.Ref
	// ExpiresIfUnpublished is when the object is deleted unless a record
	// publishing it was accepted before.
	ExpiresIfUnpublished time.Time
}

func completedOf(u meta.Upload) Completed {
	return Completed{Ref: refOf(u), ExpiresIfUnpublished: time.UnixMilli(u.ExpiresMs)}
}

func refOf(u meta.Upload) ref.Ref {
	return ref.Ref{ID: u.ID, Size: u.Size, SHA256: u.SHA256, ContentType: u.ContentType, KeyID: u.KeyID, Algorithm: u.Algorithm}
}

// Complete assembles session id's object and checks its size and SHA-256
// (see the package doc). A completed or published session answers again
// what its completion answered. On a mismatch the session is aborted, its
// bytes deleted, and the error matches ErrChecksum.
func (s *Service) Complete(ctx context.Context, tenant, id string) (Completed, error) {
	u, err := s.session(ctx, tenant, id)
	if err != nil {
		return Completed{}, err
	}
	switch {
	case u.State == meta.UploadCompleted || u.State == meta.UploadPublished:
		return completedOf(u), nil
	case u.State != meta.UploadOpen:
		return Completed{}, fmt.Errorf("%w: session %q is %s", ErrState, id, u.State)
	case s.expired(u):
		return Completed{}, fmt.Errorf("%w: session %q passed its time to live", ref.ErrExpired, id)
	}
	if err := s.checkQuota(ctx, tenant, u.ID, u.Size, false); err != nil {
		return Completed{}, err
	}
	streamed := u.Received == u.Size
	parts := make([]objstore.Part, 0, len(u.Parts))
	if streamed {
		h, err := restoreHash(u)
		if err != nil {
			return Completed{}, err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != u.SHA256 {
			return Completed{}, s.fail(ctx, u, false, fmt.Sprintf("sha256 of the %d bytes received is %s, declared %s", u.Size, got, u.SHA256))
		}
		for _, p := range u.Parts {
			parts = append(parts, objstore.Part{Number: p.Number, ETag: p.ETag, Size: p.Size})
		}
	}
	// An earlier Complete whose answer was lost (or another broker's)
	// may have assembled the object already: then the upload is gone, the
	// object is there, and it is checked below like any other.
	assembled := false
	if !streamed {
		// Some or all parts went straight to the store: what it holds decides.
		listed, err := s.multi.ListParts(ctx, u.ObjectKey, u.UploadID)
		switch {
		case errors.Is(err, objstore.ErrNoUpload) && s.objectThere(ctx, u):
			assembled = true
		case err != nil:
			return Completed{}, fmt.Errorf("largeobj: session %q: list parts: %w", id, err)
		default:
			var total int64
			for _, p := range listed {
				total += p.Size
			}
			if total != u.Size {
				return Completed{}, fmt.Errorf("%w: the store holds %d bytes in %d parts of session %q, declared %d; send the rest first",
					ErrState, total, len(listed), id, u.Size)
			}
			parts = listed
		}
	}
	if !assembled {
		cerr := s.multi.CompleteMultipart(ctx, u.ObjectKey, u.UploadID, parts)
		if errors.Is(cerr, objstore.ErrNoUpload) && s.objectThere(ctx, u) {
			cerr = nil
		}
		if err := s.completeErr(ctx, u, cerr); err != nil {
			return Completed{}, err
		}
	}
	if info, err := s.cfg.Store.Head(ctx, u.ObjectKey); err != nil {
		return Completed{}, fmt.Errorf("largeobj: session %q: head the object: %w", id, err)
	} else if info.Size != u.Size {
		return Completed{}, s.fail(ctx, u, true, fmt.Sprintf("object holds %d bytes, declared %d", info.Size, u.Size))
	}
	if !streamed {
		got, err := s.hashObject(ctx, u.ObjectKey, u.Size)
		if err != nil {
			return Completed{}, fmt.Errorf("largeobj: session %q: read the object back: %w", id, err)
		}
		if got != u.SHA256 {
			return Completed{}, s.fail(ctx, u, true, fmt.Sprintf("sha256 of the object is %s, declared %s", got, u.SHA256))
		}
	}
	now := s.cfg.Now()
	next := u
	next.State, next.CompletedMs, next.ExpiresMs = meta.UploadCompleted, now.UnixMilli(), now.Add(s.cfg.TTL).UnixMilli()
	next.HashState = nil
	nu, err := s.update(ctx, next)
	if err != nil {
		return Completed{}, err
	}
	s.log.Debug().Str("session", id).Bool("streamed", streamed).Msg("upload session completed")
	return completedOf(nu), nil
}

// objectThere reports whether u's object exists.
func (s *Service) objectThere(ctx context.Context, u meta.Upload) bool {
	_, err := s.cfg.Store.Head(ctx, u.ObjectKey)
	return err == nil
}

// completeErr is what a failed CompleteMultipart means for session u: the
// parts refused fail the session (ErrChecksum), anything else is retriable.
func (s *Service) completeErr(ctx context.Context, u meta.Upload, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objstore.ErrInvalidPart):
		return s.fail(ctx, u, false, "the store refused the parts: "+err.Error())
	}
	return fmt.Errorf("largeobj: session %q: complete: %w", u.ID, err)
}

// hashObject reads key back and returns its SHA-256 in hex.
func (s *Service) hashObject(ctx context.Context, key string, size int64) (string, error) {
	h := sha256.New()
	r := newObjectReader(ctx, s.cfg.Store, key, 0, size, 2*readChunk)
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fail aborts session u after a failed check, deleting its bytes (the
// object when assembled, else the multipart upload), and returns the
// ErrChecksum that says why.
func (s *Service) fail(ctx context.Context, u meta.Upload, assembled bool, why string) error {
	ctx = context.WithoutCancel(ctx)
	next := u
	next.State, next.Reason, next.HashState = meta.UploadAborted, "checksum: "+why, nil
	if _, err := s.update(ctx, next); err != nil {
		s.log.Warn().Err(err).Str("session", u.ID).Msg("record a failed check")
	}
	s.cleanup(ctx, next, assembled)
	s.log.Info().Str("session", u.ID).Str("tenant", u.Tenant).Str("reason", why).Msg("upload session failed its check; bytes deleted")
	return fmt.Errorf("%w: session %q: %s; the session is aborted and its bytes deleted", ErrChecksum, u.ID, why)
}

// cleanup deletes what the store holds of u: the object and the multipart
// upload (both idempotent). Failures are logged; Sweep tries again before
// it forgets the record.
func (s *Service) cleanup(ctx context.Context, u meta.Upload, object bool) bool {
	ok := true
	if err := s.multi.AbortMultipart(ctx, u.ObjectKey, u.UploadID); err != nil {
		s.log.Warn().Err(err).Str("session", u.ID).Msg("abort multipart upload")
		ok = false
	}
	if object {
		if err := s.cfg.Store.Delete(ctx, u.ObjectKey); err != nil {
			s.log.Warn().Err(err).Str("session", u.ID).Msg("delete object")
			ok = false
		}
	}
	return ok
}

// Abort ends session id: an open session's parts are discarded, a
// completed (unpublished) session's object is deleted. Aborting an aborted
// or expired session is success; a published one is ErrState (its object
// is the records' now).
func (s *Service) Abort(ctx context.Context, tenant, id string) error {
	u, err := s.session(ctx, tenant, id)
	if err != nil {
		return err
	}
	switch u.State {
	case meta.UploadAborted, meta.UploadExpired:
		return nil
	case meta.UploadPublished:
		return fmt.Errorf("%w: session %q is published; its object is deleted with the records that reference it", ErrState, id)
	}
	next := u
	next.State, next.Reason, next.HashState = meta.UploadAborted, "aborted by the client", nil
	nu, err := s.update(ctx, next)
	if err != nil {
		return err
	}
	s.cleanup(context.WithoutCancel(ctx), nu, u.State == meta.UploadCompleted)
	return nil
}

// Claim is the produce path's check of an envelope's reference r for
// tenant (HTTP publish with object_ref, and Kafka produce of records with
// sluice.ref headers, retry and dead-letter copies and redrives alike),
// about to be appended to partition at: nil if r names a completed or
// published session of tenant with r's size and sha256, not past its time
// to live and not condemned; the session is then published (idempotently)
// and the reference of at recorded in the ledger, in one transaction, so
// neither Sweep nor the ledger deletes the object while the record lives.
// Otherwise an error matching ref.ErrUnknown (no such session, or another
// tenant's, or one not completed), ref.ErrExpired (also: condemned) or
// ref.ErrMismatch, or another error when the metadata store fails
// (retriable).
func (s *Service) Claim(ctx context.Context, tenant string, r ref.Ref, at node.RefSite) error {
	for attempt := 0; ; attempt++ {
		u, err := s.session(ctx, tenant, r.ID)
		if err != nil {
			return err
		}
		switch u.State {
		case meta.UploadOpen, meta.UploadAborted:
			return fmt.Errorf("%w: %q is not a completed upload", ref.ErrUnknown, r.ID)
		case meta.UploadExpired:
			return fmt.Errorf("%w: %q", ref.ErrExpired, r.ID)
		}
		if r.Size != u.Size || r.SHA256 != u.SHA256 {
			return fmt.Errorf("%w: %q is %d bytes with sha256 %s; the record says %d bytes, %s",
				ref.ErrMismatch, r.ID, u.Size, u.SHA256, r.Size, r.SHA256)
		}
		if u.ReleaseDueMs > 0 {
			return fmt.Errorf("%w: %q: every record that referenced it is past retention; the object is being deleted", ref.ErrExpired, r.ID)
		}
		publish := u.State != meta.UploadPublished
		if publish && s.expired(u) {
			return fmt.Errorf("%w: %q was not published before %s", ref.ErrExpired, r.ID, time.UnixMilli(u.ExpiresMs).UTC().Format(time.RFC3339))
		}
		now := s.cfg.Now().UnixMilli()
		next := u
		if publish {
			next.State, next.PublishedMs, next.Ledger = meta.UploadPublished, now, true
		}
		err = s.cfg.Sessions.ClaimRef(ctx, next, publish, meta.LargeRef{Tenant: tenant, Topic: at.Topic,
			TopicID: at.TopicID, Partition: at.Partition, ClaimedMs: now})
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, meta.ErrConflict) || attempt >= 4:
			return err
		}
	}
}

// Open streams bytes [off, off+n) (to the end when n < 0) of tenant's
// completed or published object id, and returns the object's size. Any
// other session, and another tenant's, is ref.ErrUnknown.
func (s *Service) Open(ctx context.Context, tenant, id string, off, n int64) (io.ReadCloser, int64, error) {
	u, err := s.session(ctx, tenant, id)
	if err != nil {
		return nil, 0, err
	}
	if u.State != meta.UploadCompleted && u.State != meta.UploadPublished {
		if u.State == meta.UploadExpired {
			return nil, 0, fmt.Errorf("%w: %q", ref.ErrExpired, id)
		}
		return nil, 0, fmt.Errorf("%w: %q is not a completed upload", ref.ErrUnknown, id)
	}
	start, end, err := objstore.ResolveRange(u.Size, off, n)
	if err != nil {
		return nil, u.Size, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return newObjectReader(ctx, s.cfg.Store, u.ObjectKey, start, end, readChunk), u.Size, nil
}

// Describe is the reference of tenant's completed or published object id
// (ref.ErrUnknown for any other session, ref.ErrExpired for an expired one).
func (s *Service) Describe(ctx context.Context, tenant, id string) (ref.Ref, error) {
	u, err := s.session(ctx, tenant, id)
	if err != nil {
		return ref.Ref{}, err
	}
	switch u.State {
	case meta.UploadCompleted, meta.UploadPublished:
		return refOf(u), nil
	case meta.UploadExpired:
		return ref.Ref{}, fmt.Errorf("%w: %q", ref.ErrExpired, id)
	}
	return ref.Ref{}, fmt.Errorf("%w: %q is not a completed upload", ref.ErrUnknown, id)
}
