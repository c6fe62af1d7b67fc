package vfs

// Mem owns an in-memory namespace and, separately, the part of it that would
// survive a crash. Directories are modelled as inodes: each holds the table
// of entries a crash would keep, so a renamed directory takes its durable
// contents with it.
//
// Invariant: memDir.durable is the set of entries a crash keeps in that
// directory; it changes only in SyncDir of that directory.
// Invariant: inode.synced is the content a crash would keep; it changes only
// in File.Sync, and is never mutated in place (copy on write).
// Invariant: the roots "/" and "." are durable and never removed.
// All state is guarded by Mem.mu.

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory FS that can simulate a crash; see the package doc.
type Mem struct {
	mu    sync.Mutex
	files map[string]*memInode // guarded by mu: live files by path
	dirs  map[string]*memDir   // guarded by mu: live directories by path
	locks map[string]bool      // guarded by mu: held locks (Lock)
}

// memLock is a held Mem lock; Close releases it.
type memLock struct {
	m    *Mem
	path string
}

func (l *memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.locks, l.path)
	return nil
}

// Lock implements Locker: one holder per path among the users of m (a crash
// clone starts with none held, as a restarted machine would).
func (m *Mem) Lock(path string) (io.Closer, error) {
	path = clean(path)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[path] {
		return nil, pathErr("lock", path, ErrLocked)
	}
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	m.locks[path] = true
	return &memLock{m: m, path: path}, nil
}

type memInode struct {
	data   []byte // guarded by Mem.mu
	synced []byte // guarded by Mem.mu; shares data's backing array until copied
}

// memDir is a directory inode.
type memDir struct {
	durable map[string]memEntry // guarded by Mem.mu: what a crash keeps, by name
}

// memEntry is a durable directory entry: a file or a directory.
type memEntry struct {
	file *memInode
	dir  *memDir
}

func newMemDir() *memDir { return &memDir{durable: map[string]memEntry{}} }

var memRoots = [...]string{"/", "."}

// NewMem returns an empty in-memory FS with the root directories "/" and ".".
func NewMem() *Mem {
	m := &Mem{files: map[string]*memInode{}, dirs: map[string]*memDir{}}
	for _, r := range memRoots {
		m.dirs[r] = newMemDir()
	}
	return m
}

// CrashClone returns a new FS holding only the durable state of m: the names
// made durable by SyncDir of their directory (recursively from the roots, so
// a directory whose own name is not durable is lost with everything in it)
// and, for each file, the contents made durable by Sync.
func (m *Mem) CrashClone() *Mem { return m.crashClone(nil) }

// CrashCloneTorn is CrashClone, except that each file with unsynced writes
// keeps them up to a random point, as a disk that wrote some pages in order
// before the crash would: an append keeps a random prefix (possibly empty,
// possibly all) of its unsynced bytes, and a file overwritten in place is
// new up to the point and synced content after it.
func (m *Mem) CrashCloneTorn(rng *rand.Rand) *Mem { return m.crashClone(rng) }

func (m *Mem) crashClone(rng *rand.Rand) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	type durableFile struct {
		path string
		ino  *memInode
		in   *memDir // the clone's directory holding it
	}
	var files []durableFile
	var walk func(path string, src, dst *memDir)
	walk = func(path string, src, dst *memDir) {
		for name, e := range src.durable {
			p := filepath.Join(path, name)
			if e.dir != nil {
				nd := newMemDir()
				c.dirs[p] = nd
				dst.durable[name] = memEntry{dir: nd}
				walk(p, e.dir, nd)
				continue
			}
			files = append(files, durableFile{path: p, ino: e.file, in: dst})
		}
	}
	for _, r := range memRoots {
		walk(r, m.dirs[r], c.dirs[r])
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path }) // deterministic use of rng
	for _, f := range files {
		ino := f.ino
		data := slices.Clone(ino.synced)
		if rng != nil && len(ino.data) >= len(ino.synced) && !slices.Equal(ino.data, ino.synced) {
			// The disk wrote the file's pages in order up to a random
			// point: new bytes before it, the synced ones after it (an
			// append keeps a prefix of its new bytes; an overwrite in
			// place is torn between old and new content).
			var cut int
			if slices.Equal(ino.data[:len(ino.synced)], ino.synced) {
				cut = len(ino.synced) + rng.IntN(len(ino.data)-len(ino.synced)+1)
			} else {
				cut = rng.IntN(len(ino.data) + 1)
			}
			data = append(slices.Clone(ino.data[:cut]), ino.synced[min(cut, len(ino.synced)):]...)
		}
		n := &memInode{data: data, synced: data}
		c.files[f.path] = n
		f.in.durable[filepath.Base(f.path)] = memEntry{file: n}
	}
	return c
}

func clean(name string) string { return filepath.Clean(name) }

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// OpenFile implements FS.
func (m *Mem) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] != nil {
		return nil, pathErr("open", name, fmt.Errorf("is a directory"))
	}
	if m.dirs[filepath.Dir(name)] == nil {
		return nil, pathErr("open", name, os.ErrNotExist)
	}
	ino, ok := m.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, os.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, os.ErrNotExist)
	case !ok:
		ino = &memInode{}
		m.files[name] = ino
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if flag&os.O_TRUNC != 0 && writable {
		ino.data = nil
	}
	return &memFile{fs: m, ino: ino, name: name, writable: writable, appendOnly: flag&os.O_APPEND != 0}, nil
}

// Create implements FS.
func (m *Mem) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

// Open implements FS.
func (m *Mem) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// Remove implements FS.
func (m *Mem) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] == nil {
		return pathErr("remove", name, os.ErrNotExist)
	}
	if slices.Contains(memRoots[:], name) {
		return pathErr("remove", name, os.ErrPermission)
	}
	if len(m.childrenLocked(name)) > 0 {
		return pathErr("remove", name, fmt.Errorf("directory not empty"))
	}
	delete(m.dirs, name)
	return nil
}

// Rename implements FS. A file replaces a file at newname; a directory
// moves with everything in it, and newname must not exist.
func (m *Mem) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	linkErr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	ino, isFile := m.files[oldname]
	if !isFile && m.dirs[oldname] == nil {
		return linkErr(os.ErrNotExist)
	}
	if m.dirs[filepath.Dir(newname)] == nil || m.dirs[newname] != nil {
		return linkErr(os.ErrInvalid)
	}
	if isFile {
		delete(m.files, oldname)
		m.files[newname] = ino
		return nil
	}
	if _, ok := m.files[newname]; ok || slices.Contains(memRoots[:], oldname) || isUnder(newname, oldname) {
		return linkErr(os.ErrInvalid)
	}
	for p, d := range m.dirs {
		if p == oldname || isUnder(p, oldname) {
			delete(m.dirs, p)
			m.dirs[newname+p[len(oldname):]] = d
		}
	}
	for p, ino := range m.files {
		if isUnder(p, oldname) {
			delete(m.files, p)
			m.files[newname+p[len(oldname):]] = ino
		}
	}
	return nil
}

// isUnder reports whether the clean path p lies strictly inside dir.
func isUnder(p, dir string) bool {
	if dir == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// MkdirAll implements FS.
func (m *Mem) MkdirAll(dir string, perm os.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for d := dir; m.dirs[d] == nil; d = filepath.Dir(d) {
		if _, ok := m.files[d]; ok {
			return pathErr("mkdir", d, fmt.Errorf("not a directory"))
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d { // a path under no root, such as "C:"
			return pathErr("mkdir", d, os.ErrNotExist)
		}
	}
	for _, d := range missing {
		m.dirs[d] = newMemDir()
	}
	return nil
}

// childrenLocked lists the base names directly inside dir. m.mu must be held.
func (m *Mem) childrenLocked(dir string) []string {
	var names []string
	for p := range m.files {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	for p := range m.dirs {
		if p != dir && filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names
}

// ReadDir implements FS.
func (m *Mem) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[dir] == nil {
		return nil, pathErr("readdir", dir, os.ErrNotExist)
	}
	return m.childrenLocked(dir), nil
}

// Stat implements FS.
func (m *Mem) Stat(name string) (os.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] != nil {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	if ino, ok := m.files[name]; ok {
		return memInfo{name: filepath.Base(name), size: int64(len(ino.data))}, nil
	}
	return nil, pathErr("stat", name, os.ErrNotExist)
}

// SyncDir implements FS: the entries of dir (files and directories) become
// durable as they are now.
func (m *Mem) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[dir]
	if d == nil {
		return pathErr("syncdir", dir, os.ErrNotExist)
	}
	d.durable = map[string]memEntry{}
	for p, ino := range m.files {
		if filepath.Dir(p) == dir {
			d.durable[filepath.Base(p)] = memEntry{file: ino}
		}
	}
	for p, sub := range m.dirs {
		if p != dir && filepath.Dir(p) == dir {
			d.durable[filepath.Base(p)] = memEntry{dir: sub}
		}
	}
	return nil
}

// Files returns the current names of all files, sorted (for tests and tools).
func (m *Mem) Files() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for p := range m.files {
		names = append(names, p)
	}
	sort.Strings(names)
	return names
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs         *Mem
	ino        *memInode
	name       string
	writable   bool
	appendOnly bool
	pos        int64 // guarded by fs.mu
	closed     bool  // guarded by fs.mu
}

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if write && !f.writable {
		return pathErr(op, f.name, os.ErrPermission)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, os.ErrInvalid)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.appendOnly {
		f.pos = int64(len(f.ino.data))
	}
	f.writeLocked(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

// WriteAt writes p at off, as pwrite does; like os.File, it refuses files
// opened with O_APPEND.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.appendOnly || off < 0 {
		return 0, pathErr("write", f.name, os.ErrInvalid)
	}
	f.writeLocked(p, off)
	return len(p), nil
}

// writeLocked writes p at pos, zero-filling a gap. The caller holds fs.mu.
func (f *memFile) writeLocked(p []byte, pos int64) {
	ino := f.ino
	if pos < int64(len(ino.synced)) {
		ino.synced = slices.Clone(ino.synced) // copy on write
	}
	if gap := pos - int64(len(ino.data)); gap > 0 {
		ino.data = append(ino.data, make([]byte, gap)...)
	}
	end := pos + int64(len(p))
	if end > int64(len(ino.data)) {
		ino.data = append(ino.data[:pos], p...)
	} else {
		copy(ino.data[pos:], p)
	}
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.ino.synced = f.ino.data[:len(f.ino.data):len(f.ino.data)]
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, os.ErrInvalid)
	}
	ino := f.ino
	if size < int64(len(ino.synced)) {
		ino.synced = slices.Clone(ino.synced) // later writes reuse the backing array
	}
	if size <= int64(len(ino.data)) {
		ino.data = ino.data[:size]
	} else {
		ino.data = append(ino.data, make([]byte, size-int64(len(ino.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("size", false); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

var _ FS = (*Mem)(nil)

// String describes the FS for test failure messages.
func (m *Mem) String() string {
	return "vfs.Mem[" + strings.Join(m.Files(), " ") + "]"
}
