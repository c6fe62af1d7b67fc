package fault

// multipart.go passes objstore.Multipart and objstore.Presigner through the
// wrapper, with the faults of their own operations (OpCreateMultipart …
// OpAbortMultipart; presigning is local and never faulted). A lost
// response applies to UploadPart and CompleteMultipart: the part or object
// is stored, the call fails.
//
// Invariant: an inner store without multipart (or presigning) makes these
// calls fail with objstore.ErrUnsupported, never panic.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
)

var (
	_ objstore.Multipart = (*Store)(nil)
	_ objstore.Presigner = (*Store)(nil)
)

func (s *Store) multipart(op Op, key string) (objstore.Multipart, error) {
	m, ok := objstore.AsMultipart(s.inner)
	if !ok {
		return nil, fmt.Errorf("fault: %s %q: %w", op, key, objstore.ErrUnsupported)
	}
	return m, nil
}

// decideLost is decide, with a lost response possible for op too.
func (s *Store) decideLost(op Op) plan {
	p := s.decide(op)
	if !p.down {
		s.mu.Lock()
		p.lost = s.roll(s.faults[op].LostResponseRate)
		s.mu.Unlock()
	}
	return p
}

// CreateMultipart implements objstore.Multipart.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	m, err := s.multipart(OpCreateMultipart, key)
	if err != nil {
		return "", err
	}
	if err := s.before(ctx, OpCreateMultipart, key, s.decide(OpCreateMultipart)); err != nil {
		return "", err
	}
	return m.CreateMultipart(ctx, key)
}

// UploadPart implements objstore.Multipart.
func (s *Store) UploadPart(ctx context.Context, key, id string, number int32, body io.Reader, size int64) (string, error) {
	m, err := s.multipart(OpUploadPart, key)
	if err != nil {
		return "", err
	}
	p := s.decideLost(OpUploadPart)
	if err := s.before(ctx, OpUploadPart, key, p); err != nil {
		return "", err
	}
	etag, err := m.UploadPart(ctx, key, id, number, body, size)
	if err == nil && p.lost {
		return "", s.inject(&Error{Kind: KindLostResponse, Op: OpUploadPart, Key: key})
	}
	return etag, err
}

// ListParts implements objstore.Multipart.
func (s *Store) ListParts(ctx context.Context, key, id string) ([]objstore.Part, error) {
	m, err := s.multipart(OpListParts, key)
	if err != nil {
		return nil, err
	}
	if err := s.before(ctx, OpListParts, key, s.decide(OpListParts)); err != nil {
		return nil, err
	}
	return m.ListParts(ctx, key, id)
}

// CompleteMultipart implements objstore.Multipart.
func (s *Store) CompleteMultipart(ctx context.Context, key, id string, parts []objstore.Part) error {
	m, err := s.multipart(OpCompleteMultipart, key)
	if err != nil {
		return err
	}
	p := s.decideLost(OpCompleteMultipart)
	if err := s.before(ctx, OpCompleteMultipart, key, p); err != nil {
		return err
	}
	if err := m.CompleteMultipart(ctx, key, id, parts); err != nil {
		return err
	}
	if p.lost {
		return s.inject(&Error{Kind: KindLostResponse, Op: OpCompleteMultipart, Key: key})
	}
	return nil
}

// AbortMultipart implements objstore.Multipart.
func (s *Store) AbortMultipart(ctx context.Context, key, id string) error {
	m, err := s.multipart(OpAbortMultipart, key)
	if err != nil {
		return err
	}
	if err := s.before(ctx, OpAbortMultipart, key, s.decide(OpAbortMultipart)); err != nil {
		return err
	}
	return m.AbortMultipart(ctx, key, id)
}

// PresignUploadPart implements objstore.Presigner when the inner store does.
func (s *Store) PresignUploadPart(ctx context.Context, key, id string, number int32, size int64, expires time.Duration) (string, error) {
	ps, ok := s.inner.(objstore.Presigner)
	if !ok {
		return "", fmt.Errorf("fault: presign part of %q: %w", key, objstore.ErrUnsupported)
	}
	return ps.PresignUploadPart(ctx, key, id, number, size, expires)
}
