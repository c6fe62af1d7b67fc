package vfs

import (
	"io"
	"os"
)

// FS is the small set of file-system operations package wal needs.
// Paths are slash- or OS-separated as for package os; implementations do not
// interpret them beyond splitting off the parent directory.
type FS interface {
	// OpenFile opens name with os.O_* flags (O_RDONLY, O_WRONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, O_APPEND).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Create creates or truncates name for reading and appending.
	Create(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creation, removal and renaming of names in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.Writer
	// WriteAt writes at an offset (pwrite); files opened with O_APPEND refuse it.
	io.WriterAt
	io.Closer
	// Sync makes the file's contents durable.
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's current size.
	Size() (int64, error)
}

// Op names an FS or File operation, for fault injection.
type Op int

// The operations a Faulty FS can fail.
const (
	OpOpen Op = iota + 1 // OpenFile, Create and Open
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
	OpRead // File.ReadAt
	OpWrite
	OpSync
	OpTruncate
	OpClose
	OpSize
)

var opNames = [...]string{
	OpOpen: "open", OpRemove: "remove", OpRename: "rename", OpMkdir: "mkdir",
	OpReadDir: "readdir", OpStat: "stat", OpSyncDir: "syncdir", OpRead: "read",
	OpWrite: "write", OpSync: "sync", OpTruncate: "truncate", OpClose: "close",
	OpSize: "size",
}

func (o Op) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}
