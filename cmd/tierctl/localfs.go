package main

// localfs.go owns reading a broker's local log without changing it.
// wal.Open recovers a log as it opens it: it removes stray files, rewrites
// index files, cuts a torn tail and checkpoints the log start. On a live
// broker's directory none of that may touch the disk, so tierctl opens logs
// on overlayFS: a copy-on-write view of the real disk in which every change
// lands in memory and is forgotten at exit. The changes to segment files are
// recorded, so verify can report what a recovery would repair.
//
// Invariant: overlayFS never opens a file of the disk for writing, and never
// creates, removes or renames anything on it.
//
// overlayFS.mu guards inMem, gone and changes; a cowFile's mu guards its
// disk and mem handles. Lock order: cowFile.mu → overlayFS.mu.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/sluice-mq/sluice/wal"
	"github.com/sluice-mq/sluice/wal/vfs"
)

// overlayFS is a copy-on-write view of disk.
type overlayFS struct {
	disk vfs.FS
	mem  *vfs.Mem

	mu      sync.Mutex
	inMem   map[string]bool // the view's file is the copy in mem
	gone    map[string]bool // removed from the view
	changes []string        // what the view changed in segment files, in order
}

var _ vfs.FS = (*overlayFS)(nil)

func newOverlayFS(disk vfs.FS) *overlayFS {
	return &overlayFS{disk: disk, mem: vfs.NewMem(), inMem: map[string]bool{}, gone: map[string]bool{}}
}

const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// Changes lists what the view changed in segment (.log) files.
func (o *overlayFS) Changes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.changes)
}

func (o *overlayFS) noteLocked(name, format string, args ...any) {
	if strings.HasSuffix(name, ".log") {
		o.changes = append(o.changes, filepath.Base(name)+": "+fmt.Sprintf(format, args...))
	}
}

func (o *overlayFS) onDiskLocked(name string) bool {
	if o.gone[name] {
		return false
	}
	_, err := o.disk.Stat(name)
	return err == nil
}

// toMemLocked copies name's disk contents into mem, so the view may change it.
func (o *overlayFS) toMemLocked(name string) error {
	if o.inMem[name] {
		return nil
	}
	var data []byte
	if o.onDiskLocked(name) {
		f, err := o.disk.Open(name)
		if err != nil {
			return err
		}
		size, err := f.Size()
		if err == nil {
			data = make([]byte, size)
			_, err = f.ReadAt(data, 0)
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := o.mem.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := vfs.WriteFile(o.mem, name, data); err != nil {
		return err
	}
	o.inMem[name] = true
	delete(o.gone, name)
	return nil
}

func (o *overlayFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	exists := o.inMem[name] || o.onDiskLocked(name)
	switch {
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 && exists:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !exists && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case o.inMem[name]:
		return o.mem.OpenFile(name, flag, perm)
	case !exists || flag&os.O_TRUNC != 0:
		if err := o.mem.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, err
		}
		if exists {
			o.noteLocked(name, "emptied")
		}
		o.inMem[name] = true
		delete(o.gone, name)
		return o.mem.OpenFile(name, flag|os.O_CREATE|os.O_TRUNC, perm)
	case flag&writeFlags == 0:
		return o.disk.Open(name)
	}
	f, err := o.disk.Open(name)
	if err != nil {
		return nil, err
	}
	return &cowFile{o: o, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm, disk: f}, nil
}

func (o *overlayFS) Create(name string) (vfs.File, error) {
	return o.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

func (o *overlayFS) Open(name string) (vfs.File, error) { return o.OpenFile(name, os.O_RDONLY, 0) }

func (o *overlayFS) Remove(name string) error {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	onDisk := o.onDiskLocked(name)
	if o.inMem[name] {
		if err := o.mem.Remove(name); err != nil {
			return err
		}
		delete(o.inMem, name)
	} else if !onDisk {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	if onDisk {
		o.gone[name] = true
	}
	o.noteLocked(name, "removed")
	return nil
}

func (o *overlayFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	o.mu.Lock()
	defer o.mu.Unlock()
	onDisk := o.onDiskLocked(oldname)
	if err := o.toMemLocked(oldname); err != nil {
		return err
	}
	if err := o.mem.MkdirAll(filepath.Dir(newname), 0o755); err != nil {
		return err
	}
	if err := o.mem.Rename(oldname, newname); err != nil {
		return err
	}
	delete(o.inMem, oldname)
	if onDisk {
		o.gone[oldname] = true
	}
	o.inMem[newname] = true
	delete(o.gone, newname)
	o.noteLocked(newname, "replaced")
	return nil
}

func (o *overlayFS) MkdirAll(dir string, perm os.FileMode) error {
	return o.mem.MkdirAll(filepath.Clean(dir), perm)
}

func (o *overlayFS) ReadDir(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	o.mu.Lock()
	defer o.mu.Unlock()
	disk, derr := o.disk.ReadDir(dir)
	mem, merr := o.mem.ReadDir(dir)
	if derr != nil && merr != nil {
		return nil, derr
	}
	var out []string
	for _, n := range disk {
		if !o.gone[filepath.Join(dir, n)] {
			out = append(out, n)
		}
	}
	out = append(out, mem...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (o *overlayFS) Stat(name string) (os.FileInfo, error) {
	name = filepath.Clean(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.inMem[name]:
		return o.mem.Stat(name)
	case o.gone[name]:
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	fi, err := o.disk.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return o.mem.Stat(name) // a directory the view created
	}
	return fi, err
}

// SyncDir does nothing: nothing in the view is ever made durable.
func (o *overlayFS) SyncDir(string) error { return nil }

// cowFile is a disk file opened for writing in the view: it reads the disk
// until its first change, which copies it into mem.
type cowFile struct {
	o    *overlayFS
	name string
	flag int
	perm os.FileMode

	mu   sync.Mutex
	disk vfs.File // until the first change
	mem  vfs.File // after it
}

func (f *cowFile) file() vfs.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem != nil {
		return f.mem
	}
	return f.disk
}

// copied switches f to a copy in mem, noting what is about to change.
func (f *cowFile) copied(change string) (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem != nil {
		return f.mem, nil
	}
	f.o.mu.Lock()
	err := f.o.toMemLocked(f.name)
	if err == nil {
		f.o.noteLocked(f.name, "%s", change)
	}
	f.o.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m, err := f.o.mem.OpenFile(f.name, f.flag, f.perm)
	if err != nil {
		return nil, err
	}
	f.mem = m
	return m, nil
}

func (f *cowFile) ReadAt(p []byte, off int64) (int, error) { return f.file().ReadAt(p, off) }
func (f *cowFile) Size() (int64, error)                    { return f.file().Size() }

func (f *cowFile) Write(p []byte) (int, error) {
	m, err := f.copied(fmt.Sprintf("%d bytes appended", len(p)))
	if err != nil {
		return 0, err
	}
	return m.Write(p)
}

func (f *cowFile) WriteAt(p []byte, off int64) (int, error) {
	m, err := f.copied(fmt.Sprintf("%d bytes written at %d", len(p), off))
	if err != nil {
		return 0, err
	}
	return m.WriteAt(p, off)
}

func (f *cowFile) Truncate(size int64) error {
	m, err := f.copied(fmt.Sprintf("cut at byte %d", size))
	if err != nil {
		return err
	}
	return m.Truncate(size)
}

func (f *cowFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem != nil {
		return f.mem.Sync()
	}
	return nil
}

func (f *cowFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.disk.Close()
	if f.mem != nil {
		err = errors.Join(err, f.mem.Close())
	}
	return err
}

// localLog is a partition's local log opened in a view of the disk.
type localLog struct {
	dir string
	fs  *overlayFS
	log *wal.Log
}

// openLocal opens the log in dir read-only, nil if there is none.
func openLocal(dir string) (*localLog, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, nil
	}
	fs := newOverlayFS(vfs.OS)
	l, err := wal.Open(fs, dir, wal.Config{}, zerolog.Nop())
	if err != nil {
		return nil, fmt.Errorf("open the local log %s (read only): %w", dir, err)
	}
	return &localLog{dir: dir, fs: fs, log: l}, nil
}

func (l *localLog) close() { _ = l.log.Close() }
