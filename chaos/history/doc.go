// Package history owns the record of a chaos run: the event types (Send,
// Poll, Commit, Assign, Revoke, Seek, ReplicaLog, TieredRead, FaultStart,
// FaultStop, Final), their JSON-lines encoding with a versioned header, the
// Recorder that the runner's clients share, and the Reader the checker
// uses. It judges nothing: a well-formed event describing a broken broker is
// valid here, and the checker (chaos/checker) reports it.
//
// The format, version 1, with every field and what a reader does with a
// newer version, is drawn in the chaos package doc (chaos/doc.go).
//
// # Concurrency
//
// A Recorder is safe for concurrent use (one mutex, a buffered writer). A
// Reader and the encode/decode functions hold no shared state.
package history
