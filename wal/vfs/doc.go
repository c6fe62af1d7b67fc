// Package vfs is the file-system seam of package wal: every byte the local log
// reads or writes goes through FS, so tests can swap the real disk for an
// in-memory file system that can crash, or for a wrapper that injects faults.
//
// Implementations:
//
//   - OS: the real disk (package os), with SyncDir fsyncing a directory.
//   - NewMem: an in-memory FS that tracks what is durable. File contents become
//     durable on File.Sync; creation, removal and rename of a name become durable
//     on SyncDir of its parent directory. CrashClone returns a new FS holding
//     only the durable state; CrashCloneTorn also keeps a random prefix of
//     each file's bytes written since its last Sync (a torn tail).
//     Directories themselves are durable as soon as MkdirAll returns (a
//     simplification; a directory's entries are not).
//   - NewFaulty: wraps any FS and consults an inject function before every
//     operation, so a test can fail the nth write or every sync on a path.
//
// Writes are sequential: a File opened with os.O_APPEND writes at its end,
// otherwise at its own position, which starts at 0 and advances with each Write.
// Reads are positional (ReadAt) and safe to issue from many goroutines while
// one goroutine writes.
package vfs
