// Package partition is one replica of one Kafka partition on this broker:
// the owner goroutine that alone writes its log (wal.Log), the produce path
// with group commit, the idempotent producers' state and its snapshot, and
// the driver that carries out the work of the partition's replica core
// (broker/replica) on the log. The broker opens a Partition on a recovered
// log (Open), runs its owner (Run), and talks to it through the exported
// methods; Kafka error codes are the broker's (broker/errcode.go maps this
// package's sentinel errors).
//
// Files: partition.go (the owner loop, produce path, high watermark and
// owner requests), replica_driver.go (carrying out the core's Ready,
// routing its messages, replica fetches), producer.go (sequence checks and
// producer state), snapshot.go (the producer-state snapshot).
//
// # Invariants
//
// Invariant: only the owner goroutine (Run) appends to or truncates the
// log, changes the producer state, steps the replica core or raises the
// high watermark.
// Invariant: the high watermark is the core's: everything below it is
// fsynced on min.insync.replicas replicas, the leader included, under the
// current epoch's commit rule, so a consumer never sees a record that a
// crash or a leader change could take back.
// Invariant: a produce reply is sent only once the core releases it: with
// acks=all when the high watermark covers its batch, with acks=1 when the
// leader's own log holds it durably.
// Invariant: every queued or parked produce is answered: a failed write or
// fsync fails the whole group and every parked reply, a leader that loses
// its epoch fails its parked replies with NOT_LEADER_OR_FOLLOWER (the
// producer retries; an idempotent one is deduplicated by the new leader),
// and a request is never queued once the owner has begun its final drain
// (the door, qmu/closed, shuts before the drain).
// Invariant: producer state never runs ahead of the log: a group's
// sequence changes are undone if its append or fsync fails, and a
// truncation rebuilds the state from what the log keeps and rewrites the
// snapshot to it before the core learns of the truncation.
// Invariant: per producer id, batches are accepted only in sequence order;
// an exact retry of one of the last producerWindow batches is answered with
// its original base offset and is not appended again.
// Invariant: only the leader judges a sequence: a replica that does not
// lead (or whose log failed) refuses every batch before checkSequence, with
// ErrNotLeader (or its storage error), never with ErrOutOfOrderSequence or
// ErrInvalidProducerEpoch from a producer state that lags the leader's log;
// such a refusal is marked ErrNotAppended, since none of the batch reached
// the log.
// Invariant: a Ready is carried out in the core's order (truncate, fenced
// epoch, appends, messages) and Advance is called before any completion
// (Truncated, HardStateDurable, Durable) is fed back.
// Invariant: a fence answer leaves only after the fenced epoch is durable
// (the core sends it after HardStateDurable, which follows SetFencedEpoch).
// Invariant: a replica fetch answer read off the owner goroutine is
// discarded if a truncation happened since the core decided it
// (ReadFetchAnswer).
// Invariant: the log start never passes the high watermark (DeleteRecords),
// so a consumer is never told that records it could not yet read were
// deleted.
// Invariant: a producer snapshot covers exactly the batches below its
// offset; on open, batches at or above it are replayed from the log. It is
// written before retention deletes the segments it replaces, and never
// covers an offset a truncation removed.
//
// # Goroutines and locks
//
// The owner goroutine (Run) owns the producer state, the replica core, the
// parked replies, the in-flight groups and the waiting replica fetches.
// Other goroutines reach it only through two bounded channels: appends
// (Enqueue, which fails fast with ErrBackpressure when full) and ctl
// (Step, SetState, SetMinISR, ReplicaFetch, Maintain, Reconfigure,
// DeleteRecords: closures the owner runs). They read what it publishes:
//
//   - the high watermark and its change channel, under mu (HighWatermark,
//     Position, Read), so Fetch long polls can wait on it;
//   - the leader epoch, the core's status and the truncation count, as
//     atomics (LeaderEpoch, ReplicaStatus, ReadFetchAnswer);
//   - the follower's next fetch, under fetchMu (TakeFetch, ReturnFetch);
//   - the log itself (Log), which any goroutine may read; wal.Log has its
//     own locks.
//
// qmu is the door for appends: Enqueue holds it shared, the final drain
// exclusively. No lock of this package is held while waiting on a channel,
// and none is taken while another is held. The caller's locks (the
// broker's topic registry) come before all of them.
//
// # Producer-state snapshot (version 1)
//
// One file per partition, written atomically (temp file, fsync, rename,
// directory fsync) on every Maintain, after every truncation and at
// shutdown:
//
//	{"version":1,"offset":<end offset covered>,"producers":[
//	   {"id":..,"epoch":..,"last_append_ms":..,"batches":[[firstSeq,lastSeq,baseOffset],...]}, ...]}\n
//	<CRC-32C of the JSON line, 8 hex digits>\n
//
// A reader that finds another version, a bad checksum, or an offset past
// the log end ignores the snapshot and replays the whole local log.
package partition
