package mem

// multipart.go owns the memory store's multipart uploads: each part kept as
// its own buffer, assembled into one object at Complete.
//
// Invariant: an upload's parts are never visible as objects; Complete
// checks the parts as S3 would (objstore.CheckParts) and removes the upload.
// Uploads are guarded by Store.mu, as objects.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"

	"github.com/sluice-mq/sluice/tier/objstore"
)

var _ objstore.Multipart = (*Store)(nil)

type upload struct {
	key   string
	parts map[int32]memPart
}

type memPart struct {
	body []byte
	etag string
}

func (s *Store) upload(key, id string) (*upload, error) {
	u, ok := s.uploads[id]
	if !ok || u.key != key {
		return nil, fmt.Errorf("mem: upload %q of %q: %w", id, key, objstore.ErrNoUpload)
	}
	return u, nil
}

// CreateMultipart implements objstore.Multipart.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := check(ctx, "create multipart", key); err != nil {
		return "", err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uploads == nil {
		s.uploads = make(map[string]*upload)
	}
	s.uploads[id] = &upload{key: key, parts: make(map[int32]memPart)}
	return id, nil
}

// UploadPart implements objstore.Multipart.
func (s *Store) UploadPart(ctx context.Context, key, id string, number int32, body io.Reader, size int64) (string, error) {
	if err := check(ctx, "upload part", key); err != nil {
		return "", err
	}
	if number < 1 || number > objstore.MaxParts || size < 0 || size > objstore.MaxPartSize {
		return "", fmt.Errorf("mem: upload part %d of %q (%d bytes): %w", number, key, size, objstore.ErrInvalidPart)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(body, b); err != nil {
		return "", fmt.Errorf("mem: upload part %d of %q: read body: %w", number, key, err)
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.upload(key, id)
	if err != nil {
		return "", err
	}
	u.parts[number] = memPart{body: b, etag: etag}
	return etag, nil
}

// ListParts implements objstore.Multipart.
func (s *Store) ListParts(ctx context.Context, key, id string) ([]objstore.Part, error) {
	if err := check(ctx, "list parts", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.upload(key, id)
	if err != nil {
		return nil, err
	}
	return listed(u), nil
}

func listed(u *upload) []objstore.Part {
	out := make([]objstore.Part, 0, len(u.parts))
	for n, p := range u.parts {
		out = append(out, objstore.Part{Number: n, ETag: p.etag, Size: int64(len(p.body))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// CompleteMultipart implements objstore.Multipart.
func (s *Store) CompleteMultipart(ctx context.Context, key, id string, parts []objstore.Part) error {
	if err := check(ctx, "complete multipart", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.upload(key, id)
	if err != nil {
		return err
	}
	have := make(map[int32]objstore.Part)
	for _, p := range listed(u) {
		have[p.Number] = p
	}
	if err := objstore.CheckParts(parts, have); err != nil {
		return fmt.Errorf("mem: complete %q: %w", key, err)
	}
	var body []byte
	for _, p := range parts {
		body = append(body, u.parts[p.Number].body...)
	}
	s.objects[key] = object{body: body, modified: s.now()}
	delete(s.uploads, id)
	return nil
}

// AbortMultipart implements objstore.Multipart.
func (s *Store) AbortMultipart(ctx context.Context, key, id string) error {
	if err := check(ctx, "abort multipart", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.uploads[id]; ok && u.key == key {
		delete(s.uploads, id)
	}
	return nil
}
