package vfs

// volatile.go owns Volatile: a layer over another FS that keeps every byte
// written to a file since its last Sync in process memory, so that killing
// the process loses exactly what was not fsynced, as a power cut would
// (SIGKILL alone keeps the kernel's page cache, so nothing is lost).
//
// Each file open or holding unsynced bytes has one volInode, shared by all
// its handles as a kernel inode is: the logical size, and the 4 KiB pages
// written since the last flush (dirty), laid over the inner file. A flush
// (Sync, DataSync, Flush) writes the pages to the inner file and syncs it.
//
// Invariant: the inner file changes only by a flush, by Truncate and by
// O_TRUNC, so a new Volatile over the same inner FS (a crash) sees each file
// as its last flush, truncation or O_TRUNC left it.
// Invariant: the inner file is never longer than the logical size; a byte
// below the logical size that no page holds reads from the inner file, or as
// zero past its end.
// Invariant: no held page starts at or beyond the logical size, and a page's
// bytes past the logical size are zero.
// Invariant: the pages in flushing are never changed; a write to one copies
// it into dirty first.
//
// Locks, taken in this order: Volatile.mu (the path table, handle counts);
// volInode.syncMu (one flush or truncation of the inner file at a time);
// volInode.mu (sizes, pages, handle state; reads take it shared). A flush
// writes and syncs the inner file holding syncMu only, so reads and writes
// go on during an fsync.

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

const (
	volPage     = 4096 // bytes per held page
	volFlushRun = 256  // pages a flush writes to the inner file per call, at most
)

// Volatile is an FS whose unsynced file contents live in process memory; see
// NewVolatile.
type Volatile struct {
	inner    FS
	unsynced atomic.Int64 // bytes in held pages (dirty or flushing) of every inode

	mu     sync.Mutex
	inodes map[string]*volInode // guarded by mu: by clean path, while open or holding pages
}

// NewVolatile returns an FS that passes everything to inner except the
// contents written to files: those stay in memory until the file's Sync or
// DataSync (or Flush), so a process killed before that loses them. Size
// changes by Truncate and O_TRUNC reach inner at once, and so do directory
// operations (creation, Remove, Rename, MkdirAll, SyncDir): this layer
// models the loss of unsynced contents, not of directory entries. Files are
// known by their path after filepath.Clean; a handle keeps working after its
// file is renamed or removed, as on Linux.
func NewVolatile(inner FS) *Volatile {
	return &Volatile{inner: inner, inodes: map[string]*volInode{}}
}

type volInode struct {
	path    string // guarded by Volatile.mu; in Volatile.inodes under it unless removed or replaced
	handles int    // guarded by Volatile.mu: open handles
	closed  bool   // written under both Volatile.mu and mu: file is closed, the inode dead

	syncMu    sync.Mutex
	innerSize int64 // guarded by syncMu: the inner file's size

	mu       sync.RWMutex
	file     File             // guarded by mu: the inner file, read-write once a handle writes
	writable bool             // guarded by mu: file is read-write
	size     int64            // guarded by mu: the logical size
	dirty    map[int64][]byte // guarded by mu: pages written since the last flush began, by index
	flushing map[int64][]byte // guarded by mu: pages a flush is writing out; nil when none
}

// OpenFile implements FS. The inner file is opened read-write for any
// writable handle (held pages are filled from it) and never with O_APPEND.
func (v *Volatile) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	innerFlag := flag &^ (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC)
	if writable {
		innerFlag |= os.O_RDWR
	}
	trunc := writable && flag&os.O_TRUNC != 0
	key := clean(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	ino := v.inodes[key]
	if ino == nil && trunc {
		innerFlag |= os.O_TRUNC // nothing is held for it yet
	}
	f, err := v.inner.OpenFile(name, innerFlag, perm)
	if err != nil {
		return nil, err
	}
	if ino == nil {
		size, err := f.Size()
		if err != nil {
			_ = f.Close() // the size error is the one to report
			return nil, err
		}
		ino = &volInode{path: key, file: f, writable: writable, size: size, innerSize: size}
		v.inodes[key] = ino
	} else {
		ino.mu.Lock()
		if writable && !ino.writable {
			ino.file, ino.writable, f = f, true, ino.file
		}
		ino.mu.Unlock()
		if err := f.Close(); err != nil {
			return nil, err
		}
		if trunc {
			if err := ino.truncate(0, &v.unsynced); err != nil {
				return nil, err
			}
		}
	}
	ino.handles++
	return &volFile{v: v, ino: ino, name: name, writable: writable, appendOnly: flag&os.O_APPEND != 0}, nil
}

// Create implements FS.
func (v *Volatile) Create(name string) (File, error) {
	return v.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

// Open implements FS.
func (v *Volatile) Open(name string) (File, error) { return v.OpenFile(name, os.O_RDONLY, 0) }

// Remove implements FS. The removed file's held pages are dropped once its
// last handle closes.
func (v *Volatile) Remove(name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.inner.Remove(name); err != nil {
		return err
	}
	v.unlinkLocked(clean(name))
	return nil
}

// Rename implements FS: the inodes of oldname (and, for a directory, of
// the files under it) move to the new path; a file replaced at newname is
// unlinked.
func (v *Volatile) Rename(oldname, newname string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.inner.Rename(oldname, newname); err != nil {
		return err
	}
	from, to := clean(oldname), clean(newname)
	if from == to {
		return nil
	}
	moved := map[string]*volInode{}
	for p, ino := range v.inodes {
		if p == from || isUnder(p, from) {
			moved[to+p[len(from):]] = ino
			delete(v.inodes, p)
		}
	}
	v.unlinkLocked(to)
	for p, ino := range moved {
		ino.path = p
		v.inodes[p] = ino
	}
	return nil
}

// unlinkLocked forgets the inode at key, if any: no name reaches it any
// more, and its handles keep working. v.mu is held.
func (v *Volatile) unlinkLocked(key string) {
	if ino := v.inodes[key]; ino != nil {
		delete(v.inodes, key)
		// The name is gone: closing our handle of its file cannot lose
		// anything reachable, so a close error has no one to tell.
		_ = v.releaseLocked(ino)
	}
}

// MkdirAll implements FS.
func (v *Volatile) MkdirAll(dir string, perm os.FileMode) error { return v.inner.MkdirAll(dir, perm) }

// ReadDir implements FS.
func (v *Volatile) ReadDir(dir string) ([]string, error) { return v.inner.ReadDir(dir) }

// SyncDir implements FS.
func (v *Volatile) SyncDir(dir string) error { return v.inner.SyncDir(dir) }

// Stat implements FS; a file's size is its logical size.
func (v *Volatile) Stat(name string) (os.FileInfo, error) {
	fi, err := v.inner.Stat(name)
	if err != nil || fi.IsDir() {
		return fi, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ino := v.inodes[clean(name)]; ino != nil {
		ino.mu.RLock()
		defer ino.mu.RUnlock()
		return volInfo{FileInfo: fi, size: ino.size}, nil
	}
	return fi, nil
}

type volInfo struct {
	os.FileInfo
	size int64
}

func (i volInfo) Size() int64 { return i.size }

// Lock implements Locker by forwarding to the inner FS.
func (v *Volatile) Lock(path string) (io.Closer, error) { return Lock(v.inner, path) }

// Flush writes out and syncs every file holding unsynced bytes, as a
// graceful shutdown would; a killed process loses nothing flushed.
func (v *Volatile) Flush() error {
	v.mu.Lock()
	var held []*volInode
	for _, ino := range v.inodes {
		ino.mu.RLock()
		if len(ino.dirty) > 0 {
			held = append(held, ino)
		}
		ino.mu.RUnlock()
	}
	v.mu.Unlock()
	var errs []error
	for _, ino := range held {
		if err := v.sync(ino, false); err != nil {
			errs = append(errs, fmt.Errorf("vfs: flush: %w", err))
		}
	}
	return errors.Join(errs...)
}

// UnsyncedBytes returns the bytes held in memory, in whole pages, that a
// kill would lose (or that a flush is writing out).
func (v *Volatile) UnsyncedBytes() int64 { return v.unsynced.Load() }

// sync flushes ino (fdatasync if data is set) and closes it if no handle
// or name needs it any more.
func (v *Volatile) sync(ino *volInode, data bool) error {
	err := ino.flush(&v.unsynced, data)
	v.mu.Lock()
	defer v.mu.Unlock()
	if rerr := v.releaseLocked(ino); err == nil {
		err = rerr
	}
	return err
}

// releaseLocked closes ino's inner file once nothing needs it: no handle is
// open, no flush runs, and it holds no pages or no name reaches them. v.mu
// is held.
func (v *Volatile) releaseLocked(ino *volInode) error {
	ino.mu.Lock()
	defer ino.mu.Unlock()
	linked := v.inodes[ino.path] == ino
	if ino.closed || ino.handles > 0 || ino.flushing != nil || linked && len(ino.dirty) > 0 {
		return nil
	}
	if linked {
		delete(v.inodes, ino.path)
	}
	v.unsynced.Add(-int64(len(ino.dirty)) * volPage)
	ino.dirty, ino.closed = nil, true
	return ino.file.Close()
}

// flush writes ino's dirty pages to the inner file, sets its size and
// syncs it. On failure the pages stay held, for a later flush.
func (ino *volInode) flush(unsynced *atomic.Int64, data bool) error {
	ino.syncMu.Lock()
	defer ino.syncMu.Unlock()
	ino.mu.Lock()
	if ino.closed {
		ino.mu.Unlock()
		return nil
	}
	pages, size, f := ino.dirty, ino.size, ino.file
	if pages == nil {
		pages = map[int64][]byte{} // a flush runs while flushing is set
	}
	ino.dirty, ino.flushing = nil, pages
	ino.mu.Unlock()

	end, err := writePages(f, pages, size)
	ino.innerSize = max(ino.innerSize, end)
	if err == nil && ino.innerSize != size {
		if err = f.Truncate(size); err == nil {
			ino.innerSize = size
		}
	}
	if err == nil {
		if data {
			err = DataSync(f)
		} else {
			err = f.Sync()
		}
	}

	ino.mu.Lock()
	defer ino.mu.Unlock()
	ino.flushing = nil
	freed := len(pages)
	if err != nil { // hold the pages again, under any newer copies
		for i, p := range pages {
			if _, ok := ino.dirty[i]; !ok {
				ino.setDirty(i, p)
				freed--
			}
		}
	}
	unsynced.Add(-int64(freed) * volPage)
	return err
}

// writePages writes pages to f, clipped to size, joining adjacent pages
// into one write, and returns the end of the furthest write.
func writePages(f File, pages map[int64][]byte, size int64) (end int64, err error) {
	var run []byte
	var at int64
	put := func() error {
		if len(run) == 0 {
			return nil
		}
		_, err := f.WriteAt(run, at)
		end, run = max(end, at+int64(len(run))), run[:0]
		return err
	}
	for _, i := range slices.Sorted(maps.Keys(pages)) {
		off := i * volPage
		if off != at+int64(len(run)) || len(run) >= volFlushRun*volPage {
			if err := put(); err != nil {
				return end, err
			}
			at = off
		}
		run = append(run, pages[i][:min(volPage, size-off)]...)
	}
	return end, put()
}

// truncate sets the size of the inner file and the logical size, dropping
// or clearing held bytes beyond it.
func (ino *volInode) truncate(size int64, unsynced *atomic.Int64) error {
	ino.syncMu.Lock()
	defer ino.syncMu.Unlock()
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if err := ino.file.Truncate(size); err != nil {
		return err
	}
	ino.innerSize, ino.size = size, size
	for i, p := range ino.dirty {
		switch off := i * volPage; {
		case off >= size:
			delete(ino.dirty, i)
			unsynced.Add(-volPage)
		case off+volPage > size:
			clear(p[size-off:])
		}
	}
	return nil
}

// held returns the held page i, or nil. ino.mu is held.
func (ino *volInode) held(i int64) []byte {
	if p := ino.dirty[i]; p != nil {
		return p
	}
	return ino.flushing[i]
}

func (ino *volInode) setDirty(i int64, p []byte) {
	if ino.dirty == nil {
		ino.dirty = map[int64][]byte{}
	}
	ino.dirty[i] = p
}

// dirtyPage returns page i to write into: the dirty one, a copy of the one
// being flushed, or a new zero page. ino.mu is held.
func (ino *volInode) dirtyPage(i int64, unsynced *atomic.Int64) []byte {
	if p := ino.dirty[i]; p != nil {
		return p
	}
	p := make([]byte, volPage)
	copy(p, ino.flushing[i])
	ino.setDirty(i, p)
	unsynced.Add(volPage)
	return p
}

// readLocked fills p, which lies below the logical size, from off: held
// pages first, the inner file for the rest. ino.mu is held.
func (ino *volInode) readLocked(p []byte, off int64) error {
	from := 0 // p[from:done] is still to read from the inner file
	for done := 0; done < len(p); {
		i, in := (off+int64(done))/volPage, int((off+int64(done))%volPage)
		n := min(volPage-in, len(p)-done)
		if page := ino.held(i); page != nil {
			if err := ino.readInner(p[from:done], off+int64(from)); err != nil {
				return err
			}
			copy(p[done:done+n], page[in:])
			from = done + n
		}
		done += n
	}
	return ino.readInner(p[from:], off+int64(from))
}

// readInner reads p from the inner file; bytes past its end read as zero
// (a gap written around, or bytes only pages hold).
func (ino *volInode) readInner(p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := ino.file.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		clear(p[n:])
		return nil
	}
	return err
}

// writeLocked writes p at at into held pages. ino.mu is held.
func (ino *volInode) writeLocked(p []byte, at int64, unsynced *atomic.Int64) error {
	if len(p) == 0 {
		return nil
	}
	end := at + int64(len(p))
	// A page the write covers in part keeps its other bytes: read it before
	// changing anything, so that a failed read changes nothing.
	for _, i := range [2]int64{at / volPage, (end - 1) / volPage} {
		partial := i*volPage < at || (i+1)*volPage > end
		if partial && ino.held(i) == nil && i*volPage < ino.size {
			page := make([]byte, volPage)
			if err := ino.readInner(page[:min(volPage, ino.size-i*volPage)], i*volPage); err != nil {
				return err
			}
			ino.setDirty(i, page)
			unsynced.Add(volPage)
		}
	}
	for off := at; off < end; {
		n := copy(ino.dirtyPage(off/volPage, unsynced)[off%volPage:], p[off-at:])
		off += int64(n)
	}
	ino.size = max(ino.size, end)
	return nil
}

// volFile is a handle of a Volatile file.
type volFile struct {
	v          *Volatile
	ino        *volInode
	name       string
	writable   bool
	appendOnly bool
	pos        int64 // guarded by ino.mu
	closed     bool  // guarded by ino.mu
}

func (f *volFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if write && !f.writable {
		return pathErr(op, f.name, os.ErrPermission)
	}
	return nil
}

// checkShared is check for operations that take the inode's locks
// themselves.
func (f *volFile) checkShared(op string, write bool) error {
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	return f.check(op, write)
}

func (f *volFile) ReadAt(p []byte, off int64) (int, error) {
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, os.ErrInvalid)
	}
	if off >= f.ino.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.ino.size-off))
	if err := f.ino.readLocked(p[:n], off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *volFile) Write(p []byte) (int, error) {
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.appendOnly {
		f.pos = f.ino.size
	}
	if err := f.ino.writeLocked(p, f.pos, &f.v.unsynced); err != nil {
		return 0, err
	}
	f.pos += int64(len(p))
	return len(p), nil
}

// WriteAt writes p at off; like os.File, it refuses files opened with O_APPEND.
func (f *volFile) WriteAt(p []byte, off int64) (int, error) {
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.appendOnly || off < 0 {
		return 0, pathErr("write", f.name, os.ErrInvalid)
	}
	if err := f.ino.writeLocked(p, off, &f.v.unsynced); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Sync writes out the file's held pages, from whichever handle they came,
// and fsyncs the inner file.
func (f *volFile) Sync() error { return f.sync(false) }

// DataSync implements DataSyncer: Sync, with the inner file's DataSync.
func (f *volFile) DataSync() error { return f.sync(true) }

func (f *volFile) sync(data bool) error {
	if err := f.checkShared("sync", false); err != nil {
		return err
	}
	return f.v.sync(f.ino, data)
}

// Truncate changes the size of the inner file at once (it is not held
// back) and the logical size with it.
func (f *volFile) Truncate(size int64) error {
	if err := f.checkShared("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, os.ErrInvalid)
	}
	return f.ino.truncate(size, &f.v.unsynced)
}

func (f *volFile) Size() (int64, error) {
	f.ino.mu.RLock()
	defer f.ino.mu.RUnlock()
	if err := f.check("size", false); err != nil {
		return 0, err
	}
	return f.ino.size, nil
}

// Close closes the handle; it writes nothing out, as close(2) makes nothing
// durable. The inode's pages stay held for a later Sync or Flush.
func (f *volFile) Close() error {
	f.v.mu.Lock()
	defer f.v.mu.Unlock()
	f.ino.mu.Lock()
	err := f.check("close", false)
	f.closed = true
	f.ino.mu.Unlock()
	if err != nil {
		return err
	}
	f.ino.handles--
	return f.v.releaseLocked(f.ino)
}

var (
	_ FS         = (*Volatile)(nil)
	_ Locker     = (*Volatile)(nil)
	_ DataSyncer = (*volFile)(nil)
)
