// Package vfs is the file-system seam of package wal: every byte the local log
// reads or writes goes through FS, so tests can swap the real disk for an
// in-memory file system that can crash, or for a wrapper that injects faults.
//
// Implementations:
//
//   - OS: the real disk (package os), with SyncDir fsyncing a directory.
//   - NewMem: an in-memory FS that tracks what is durable. File contents become
//     durable on File.Sync; creation, removal and rename of a name (a file's or
//     a directory's) become durable on SyncDir of its parent directory.
//     CrashClone returns a new FS holding only the durable state, walked from
//     the roots "/" and ".": a directory whose name was never made durable is
//     lost with everything under it, and a renamed directory keeps the durable
//     entries it had; CrashCloneTorn also keeps a random prefix of each file's
//     bytes written since its last Sync (a torn tail).
//   - NewFaulty: wraps any FS and consults an inject function before every
//     operation, so a test can fail the nth write or every sync on a path.
//   - NewVolatile: wraps another FS (the real disk, in the chaos suite) and
//     keeps every byte written to a file since its last Sync or DataSync in
//     process memory, handing it to the inner FS only then. Over OS alone a
//     process killed with SIGKILL loses nothing (the page cache survives
//     it); over Volatile it loses exactly its unsynced file contents, as
//     after a power cut. Only contents are held back: size changes by
//     Truncate and O_TRUNC, and every directory operation, reach the inner
//     FS at once; this layer models the loss of unsynced contents, not of
//     directory entries. Flush writes everything out, for a graceful stop.
//
// Helpers on any FS: WriteFile and WriteFileDurable replace a file through a
// synced temporary file and a rename; MkdirAllDurable creates directories and
// fsyncs each created one's parent; RemoveAllDurable deletes a tree by first
// renaming it into a trash directory, so a crash never leaves it half removed
// in place, and EmptyTrash clears what interrupted removals left there.
//
// Writes are sequential: a File opened with os.O_APPEND writes at its end,
// otherwise at its own position, which starts at 0 and advances with each Write.
// Reads are positional (ReadAt) and safe to issue from many goroutines while
// one goroutine writes.
package vfs
