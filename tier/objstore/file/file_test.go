package file_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
	"github.com/sluice-mq/sluice/tier/objstore/file"
	"github.com/sluice-mq/sluice/tier/objstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store {
		s, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func newStore(t *testing.T) (*file.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// TestKeyConflicts: a key cannot be both an object and a directory of others.
func TestKeyConflicts(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	if err := s.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "a/b/c"} {
		err := s.Put(ctx, key, []byte("y"))
		if err == nil || objstore.IsRetriable(err) {
			t.Errorf("Put(%q) beside a/b = %v, want a final error", key, err)
		}
	}
	if got, err := s.Get(ctx, "a/b", 0, -1); err != nil || string(got) != "x" {
		t.Fatalf("a/b after the refused Puts = %q, %v", got, err)
	}
}

func TestReservedKey(t *testing.T) {
	s, _ := newStore(t)
	for _, key := range []string{".tmp", ".tmp/x"} {
		if err := s.Put(t.Context(), key, nil); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if err := s.Put(t.Context(), "x/.tmp", nil); err != nil {
		t.Errorf("Put(x/.tmp) = %v: only the top-level .tmp is reserved", err)
	}
}

// TestLeftovers: temporary files of an interrupted Put are removed by New and
// never listed; files that cannot be keys are skipped.
func TestLeftovers(t *testing.T) {
	s, dir := newStore(t)
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// A crash's leftover (old) goes at the next open; a fresh temporary file
	// may be another process's Put in progress and stays.
	leftover := filepath.Join(dir, ".tmp", "put-123")
	if err := os.WriteFile(leftover, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	inProgress := filepath.Join(dir, ".tmp", "put-456")
	if err := os.WriteFile(inProgress, []byte("being written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "k"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad\xff"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := list(t, s); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List = %q, want [k]", got)
	}
	s2, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("New left %s: %v", leftover, err)
	}
	if _, err := os.Stat(inProgress); err != nil {
		t.Fatalf("New removed a fresh temporary file: %v", err)
	}
	if got, err := s2.Get(t.Context(), "k", 0, -1); err != nil || string(got) != "v" {
		t.Fatalf("Get after reopening = %q, %v", got, err)
	}
}

// TestPrune: deleting the last key of a directory removes the directories it
// leaves empty, and no more.
func TestPrune(t *testing.T) {
	s, dir := newStore(t)
	ctx := t.Context()
	for _, key := range []string{"a/b/c/1", "a/2"} {
		if err := s.Put(ctx, key, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "a/b/c/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a/b left after its last key was deleted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "2")); err != nil {
		t.Fatalf("a/2: %v", err)
	}
	if err := s.Delete(ctx, "a/2"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != ".tmp" {
		t.Fatalf("root after deleting everything: %v, %v; want only .tmp", entries, err)
	}
}

func TestNewFails(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(notDir); err == nil {
		t.Fatal("New on a regular file succeeded")
	}
	if _, err := file.New(filepath.Join(notDir, "below")); err == nil {
		t.Fatal("New below a regular file succeeded")
	}
}

// TestUnreadable: I/O errors other than a missing path are not ErrNotFound.
func TestUnreadable(t *testing.T) {
	s, dir := newStore(t)
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(t.Context(), "loop", 0, -1)
	if err == nil || errors.Is(err, objstore.ErrNotFound) || objstore.IsRetriable(err) {
		t.Fatalf("Get of a symlink loop = %v, want a final error other than ErrNotFound", err)
	}
	if _, err := s.Head(t.Context(), "loop"); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head of a symlink loop = %v, want an error other than ErrNotFound", err)
	}
}

func list(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var keys []string
	if err := s.List(t.Context(), "", func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestMultipartConformance(t *testing.T) {
	storetest.RunMultipart(t, func(t *testing.T) objstore.Store {
		s, _ := newStore(t)
		return s
	})
}
