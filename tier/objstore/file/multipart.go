package file

// multipart.go owns the directory store's multipart uploads: each upload a
// directory .multipart/<upload id>/ holding the key it will complete to
// (file "key") and one file per part ("part-<n>", written to a temporary
// file and renamed, as objects are); Complete concatenates the parts into a
// temporary file and renames it over the object.
//
// Invariant: nothing under .multipart is an object: List skips it, and no
// key may name it. A part's ETag is the first 16 bytes of its SHA-256, in hex.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// multipartDir is the directory under root that holds uploads in progress.
const multipartDir = ".multipart"

var _ objstore.Multipart = (*Store)(nil)

// uploadDir returns the directory of upload id for key, checking both.
func (s *Store) uploadDir(ctx context.Context, op, key, id string) (string, error) {
	if _, err := s.path(ctx, op, key); err != nil {
		return "", err
	}
	if _, err := hex.DecodeString(id); err != nil || len(id) != 24 {
		return "", fmt.Errorf("file: %s %q: upload %q: %w", op, key, id, objstore.ErrNoUpload)
	}
	dir := filepath.Join(s.root, multipartDir, id)
	b, err := os.ReadFile(filepath.Join(dir, "key"))
	if err != nil || string(b) != key {
		return "", fmt.Errorf("file: %s %q: upload %q: %w", op, key, id, objstore.ErrNoUpload)
	}
	return dir, nil
}

// CreateMultipart implements objstore.Multipart.
func (s *Store) CreateMultipart(ctx context.Context, key string) (string, error) {
	if _, err := s.path(ctx, "create multipart", key); err != nil {
		return "", err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	dir := filepath.Join(s.root, multipartDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("file: create multipart %q: %w", key, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte(key), 0o644); err != nil {
		return "", fmt.Errorf("file: create multipart %q: %w", key, err)
	}
	return id, nil
}

// UploadPart implements objstore.Multipart.
func (s *Store) UploadPart(ctx context.Context, key, id string, number int32, body io.Reader, size int64) (string, error) {
	dir, err := s.uploadDir(ctx, "upload part", key, id)
	if err != nil {
		return "", err
	}
	if number < 1 || number > objstore.MaxParts || size < 0 || size > objstore.MaxPartSize {
		return "", fmt.Errorf("file: upload part %d of %q (%d bytes): %w", number, key, size, objstore.ErrInvalidPart)
	}
	f, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return "", fmt.Errorf("file: upload part %d of %q: %w", number, key, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, size))
	if err == nil && n != size {
		err = fmt.Errorf("body ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, "part-"+strconv.Itoa(int(number))))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("file: upload part %d of %q: %w", number, key, err)
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`, nil
}

// ListParts implements objstore.Multipart. Each ETag is computed again
// from the part's bytes.
func (s *Store) ListParts(ctx context.Context, key, id string) ([]objstore.Part, error) {
	dir, err := s.uploadDir(ctx, "list parts", key, id)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("file: list parts of %q: %w", key, err)
	}
	var out []objstore.Part
	for _, de := range des {
		n, ok := strings.CutPrefix(de.Name(), "part-")
		if !ok {
			continue
		}
		num, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join(dir, de.Name()))
		if err != nil {
			return nil, fmt.Errorf("file: list parts of %q: %w", key, err)
		}
		h := sha256.New()
		size, err := io.Copy(h, f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("file: list parts of %q: %w", key, err)
		}
		out = append(out, objstore.Part{Number: int32(num), ETag: `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`, Size: size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// CompleteMultipart implements objstore.Multipart.
func (s *Store) CompleteMultipart(ctx context.Context, key, id string, parts []objstore.Part) error {
	listed, err := s.ListParts(ctx, key, id)
	if err != nil {
		return err
	}
	dir, _ := s.uploadDir(ctx, "complete multipart", key, id)
	have := make(map[int32]objstore.Part, len(listed))
	for _, p := range listed {
		have[p.Number] = p
	}
	if err := objstore.CheckParts(parts, have); err != nil {
		return fmt.Errorf("file: complete %q: %w", key, err)
	}
	path, _ := s.path(ctx, "complete multipart", key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.mkdirAll(filepath.Dir(path)); err != nil {
		return fmt.Errorf("file: complete %q: %w", key, err)
	}
	f, err := os.CreateTemp(filepath.Join(s.root, tmpDir), "complete-*")
	if err != nil {
		return fmt.Errorf("file: complete %q: %w", key, err)
	}
	for _, p := range parts {
		if err == nil {
			err = appendFile(f, filepath.Join(dir, "part-"+strconv.Itoa(int(p.Number))))
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("file: complete %q: %w", key, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("file: complete %q: %w", key, err)
	}
	_ = os.RemoveAll(dir)
	return nil
}

func appendFile(dst *os.File, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(dst, f)
	return err
}

// AbortMultipart implements objstore.Multipart.
func (s *Store) AbortMultipart(ctx context.Context, key, id string) error {
	dir, err := s.uploadDir(ctx, "abort multipart", key, id)
	if errors.Is(err, objstore.ErrNoUpload) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("file: abort multipart %q: %w", key, err)
	}
	return nil
}
