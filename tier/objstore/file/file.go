package file

// file.go owns the directory Store: the mapping from keys to paths, atomic
// Put, ranged Get, Head, Delete with pruning of empty directories, and List in
// lexical key order.
//
// Invariant: a file under root (outside .tmp) is a complete object: it
// appears only by a rename of a synced temporary file and is never written
// in place.
// Invariant: List yields keys in lexical byte order: entries of a directory
// are visited sorted by their name, with '/' appended to a directory's, which
// is the order of the keys beneath them.
// Store.mu: Put and file removal hold it shared, directory pruning exclusively.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/tier/objstore"
)

// tmpDir is the directory under root that holds Put's temporary files.
const tmpDir = ".tmp"

// Store is an objstore.Store in a directory; see the package doc.
type Store struct {
	root string
	mu   sync.RWMutex // see the file comment
}

var _ objstore.Store = (*Store)(nil)

// staleTemp is the age past which a temporary file is a crash's leftover:
// several processes may share one directory (the brokers of a cluster on
// one machine), so a fresh one may be another process's Put in progress.
const staleTemp = time.Hour

// New opens the store in dir, creating it if needed, and removes temporary
// files a crash left behind (those older than staleTemp).
func New(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file: open %s: %w", dir, err)
	}
	tmp := filepath.Join(root, tmpDir)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("file: open %s: %w", root, err)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, fmt.Errorf("file: open %s: list %s: %w", root, tmpDir, err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && time.Since(info.ModTime()) > staleTemp {
			if err := os.Remove(filepath.Join(tmp, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("file: open %s: clear %s: %w", root, tmpDir, err)
			}
		}
	}
	if err := syncDir(root); err != nil {
		return nil, fmt.Errorf("file: open %s: %w", root, err)
	}
	return &Store{root: root}, nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.root }

// path returns the file of key after checking ctx and the key.
func (s *Store) path(ctx context.Context, op, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("file: %s %q: %w", op, key, err)
	}
	if err := objstore.ValidKey(key); err != nil {
		return "", fmt.Errorf("file: %s: %w", op, err)
	}
	for _, reserved := range []string{tmpDir, multipartDir} {
		if key == reserved || strings.HasPrefix(key, reserved+"/") {
			return "", fmt.Errorf("file: %s: %w %q: %s is reserved", op, objstore.ErrInvalidKey, key, reserved)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	path, err := s.path(ctx, "put", key)
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	dir := filepath.Dir(path)
	if err := s.mkdirAll(dir); err != nil {
		return fmt.Errorf("file: put %q: %w", key, err)
	}
	tmp, err := writeTemp(filepath.Join(s.root, tmpDir), body)
	if err != nil {
		return fmt.Errorf("file: put %q: %w", key, err)
	}
	err = os.Rename(tmp, path)
	if errors.Is(err, os.ErrNotExist) {
		// Another process sharing the directory removed the (then empty)
		// directory meanwhile: make it again, once.
		if err = s.mkdirAll(dir); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("file: put %q: %w", key, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("file: put %q: %w", key, err)
	}
	return nil
}

// writeTemp writes body to a new synced file in dir and returns its path.
func writeTemp(dir string, body []byte) (string, error) {
	f, err := os.CreateTemp(dir, "put-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// mkdirAll creates dir and its missing parents under root, fsyncing the
// parent of each one it creates.
func (s *Store) mkdirAll(dir string) error {
	if dir == s.root {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is an object, not a directory: %w", dir, syscall.ENOTDIR)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirAll(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	path, err := s.path(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("file: get %q: %w", key, notFound(err))
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file: get %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("file: get %q: %w", key, objstore.ErrNotFound)
	}
	start, end, err := objstore.ResolveRange(fi.Size(), off, n)
	if err != nil {
		return nil, fmt.Errorf("file: get %q: %w", key, err)
	}
	buf := make([]byte, end-start)
	if len(buf) == 0 {
		return buf, nil
	}
	// The file is never written in place, so a short read is an I/O error.
	if _, err := f.ReadAt(buf, start); err != nil {
		return nil, fmt.Errorf("file: get %q: read [%d, %d): %w", key, start, end, err)
	}
	return buf, nil
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	path, err := s.path(ctx, "head", key)
	if err != nil {
		return objstore.Info{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return objstore.Info{}, fmt.Errorf("file: head %q: %w", key, notFound(err))
	}
	if !fi.Mode().IsRegular() {
		return objstore.Info{}, fmt.Errorf("file: head %q: %w", key, objstore.ErrNotFound)
	}
	return objstore.Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	path, err := s.path(ctx, "delete", key)
	if err != nil {
		return err
	}
	removed, err := s.remove(path)
	if err != nil {
		return fmt.Errorf("file: delete %q: %w", key, err)
	}
	if removed {
		s.prune(filepath.Dir(path))
	}
	return nil
}

// remove deletes the object file at path and fsyncs its directory; it
// reports whether there was one.
func (s *Store) remove(path string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fi, err := os.Lstat(path)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, nil // a directory of other keys, not an object
	}
	if err := os.Remove(path); err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, syncDir(filepath.Dir(path))
}

// prune removes dir and its parents up to root while they are empty. A
// directory left behind costs nothing but a little space, so failures are
// ignored: the next Delete in it tries again.
func (s *Store) prune(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Info) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("file: list %q: %w", prefix, err)
	}
	return s.walk(ctx, s.root, "", prefix, fn)
}

// entry is a directory entry with the name it sorts by.
type entry struct {
	sortName string // the name, with '/' appended for a directory
	de       fs.DirEntry
}

// walk lists the keys under dir, whose keys all start with keyPrefix.
func (s *Store) walk(ctx context.Context, dir, keyPrefix, prefix string, fn func(objstore.Info) error) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		if isNotFound(err) {
			return nil // pruned while we listed its parent
		}
		return fmt.Errorf("file: list %q: %w", prefix, err)
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		if keyPrefix == "" && (de.Name() == tmpDir || de.Name() == multipartDir) {
			continue
		}
		name := de.Name()
		if de.IsDir() {
			name += "/"
		}
		entries = append(entries, entry{sortName: name, de: de})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].sortName < entries[j].sortName })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("file: list %q: %w", prefix, err)
		}
		key := keyPrefix + e.sortName
		switch {
		case e.de.IsDir():
			if strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key) {
				if err := s.walk(ctx, filepath.Join(dir, e.de.Name()), key, prefix, fn); err != nil {
					return err
				}
			}
		case e.de.Type().IsRegular() && strings.HasPrefix(key, prefix) && objstore.ValidKey(key) == nil:
			fi, err := e.de.Info()
			if err != nil {
				if isNotFound(err) {
					continue // deleted while we listed
				}
				return fmt.Errorf("file: list %q: %w", prefix, err)
			}
			if err := fn(objstore.Info{Key: key, Size: fi.Size(), Modified: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// isNotFound reports whether err means that a path does not exist, including
// a path through an object (ENOTDIR).
func isNotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// notFound maps a missing path to objstore.ErrNotFound, keeping err.
func notFound(err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %w", objstore.ErrNotFound, err)
	}
	return err
}

// syncDir fsyncs a directory, making the names in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
