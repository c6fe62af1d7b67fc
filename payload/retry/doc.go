// Package retry is the Go helper of Sluice's poison-message convention for
// Kafka clients (franz-go): Nack writes a failed record's copy to the
// group's retry tier or to the dead-letter topic, and Consumer is a
// consumer-group wrapper that also consumes the group's retry tiers and
// hands a retried record out only when it is due. It sits beside the
// large-payload helper (package payload) because it is, like it, a client
// of the broker, not part of it.
//
// It applies package queue (the pure core the broker's HTTP queue API
// applies too): queue.Contract.Decide decides, queue.RetryTopic and
// queue.Contract.DeadLetterTopic name the topics, queue.Meta.Headers
// writes the sluice.retry.* headers and queue.Parse reads them. A copy
// written here is the copy POST /v1/groups/{g}/messages:nack writes: the
// same topic, partition, key, value, other headers (message_id among
// them), and sluice.retry.* headers. The header table in queue/doc.go is
// the convention for clients in other languages.
//
// # Nack
//
//	Nack(ctx, cl, group, rec, class, err, contract)
//
// The contract is the source topic's (ContractOf reads it with kadm
// DescribeConfigs). A record that carries sluice.retry.* headers is a
// retry copy: its history goes on (its source is the header's); any other
// record starts a history with attempt 1. Decide sends attempt n to tier
// min(n−1, tiers−1) due after the tier's delay ± jitter, or to the
// dead-letter topic when the class is permanent or n ≥ retry.max.attempts.
// The destination is created when missing (kadm CreateTopics, the source's
// partition count, as the broker does), and the copy is produced to the
// record's partition modulo the destination's partitions — when the client
// was built with Partitioner (kgo.RecordPartitioner(retry.Partitioner(…)));
// with another partitioner the client's partitioner picks the partition.
// Nack returns once the copy is acknowledged; the caller then commits (or
// marks) the record. A crash between the two duplicates a delivery, never
// loses one. A strict topic (delivery.order per-key-strict or
// per-partition-strict) is refused with ErrStrict: moving the record
// aside would let later records pass it, and pausing its key needs the
// state a Consumer keeps (Consumer.Nack, "Strict topics" below).
//
// Names are tenant-local: a client of a tenant other than the default
// one sets NameBudget to 249 − len(tenant) − 1 so that its tier names are
// the broker's (the default, 249, is the default tenant's budget).
//
// # Consumer: due time by pausing
//
// Consumer consumes the group's source topics and every retry tier of
// them (created at start with the source's partition count), with
// kgo.AutoCommitMarks. A tier partition is in due order but for jitter, so
// when Poll meets a record not yet due it holds that record and the later
// ones of its partition, and pauses the partition (PauseFetchPartitions):
// kgo then strips buffered data of it and fetches it again after the held
// records once resumed. Poll hands out held records in order once due
// (waiting no longer than the earliest due time when nothing else is
// ready) and resumes the partition when its hold is empty. Source records
// and due tier records are never held behind a pending retry.
//
// Records handed out by one Poll are marked for commit by the next Poll
// (kgo's own at-least-once rule: what was polled before is done); nack a
// failed record before polling again. A revoked or lost tier partition
// drops its hold and is resumed, so its new owner reads the held records
// again from the committed offset.
//
// # Strict topics: pauses, retried in place (strict.go, lift.go)
//
// A partition of a strict source topic has a queue.Lane (the core the
// broker's HTTP queue uses; queue/doc.go, "Strict order: pauses"). Poll
// offers each fetched record to it and hands out those it delivers;
// records of a paused scope are held in memory in order (Hold), and when
// the lane reads no further (its limit, or a partition's pause) the rest
// is kept back and the partition's fetching paused until the lane takes
// it. Held records stay in memory: at most queue.DefaultTrackerLimit
// delivered or held records a partition (then the partition waits, as on
// the broker), plus what one fetch returned. Consumer.Nack of such a
// record, with attempt n (1 from the source, Pause.Attempts+1 for the
// paused record handed out again), pauses its scope at the record
// (Lane.Nack, withdrawing the scope's later deliveries of the last Poll)
// unless it is paused there already, then:
//
//	Decide → retry:  Lane.SetRetry records n and the due time; Poll hands
//	                 the record out again at the due time (nothing else of
//	                 the scope). Result: Outcome Retry, Paused, Due.
//	Decide → dead:   nothing is written: the order promise forbids moving
//	                 the record aside. Lane.ClearRetry drops n and the due
//	                 time, so the pause is an HTTP one (no a, u in the
//	                 metadata) and Poll never hands the record out again
//	                 until the pause is lifted. Result: Outcome
//	                 queue.Paused, Paused, Due zero, Meta.DeadReason
//	                 exhausted or permanent.
//
// Either way the new state is committed before Nack returns. An operator
// lifts a pause without a due time: keys:resume (the record comes again
// from the source as attempt 1, then the scope's later records in order)
// or keys:skip (the broker writes the dead letter; the later records
// follow), which the Consumer sees at its next read of the commits
// (below); or, in the process, Consumer.Resume (Lane.Resume; committed by
// the next Poll or Commit) and Consumer.Skip (lift.go: the dead letter,
// with every failure of the record this process saw and dead reason
// skipped, is written and acknowledged, then Lane.Skip, committed before
// Skip returns). Both refuse a scope whose record the last Poll handed
// out again (ErrHandedOut) or one not paused (ErrNotPaused).
//
// The paused record, handed out again and not nacked, is settled by the
// next Poll with Lane.Skip: the pause is lifted and the scope's held
// records come next, in order. A strict partition's offset is committed by
// the Consumer only (kgo.CommitOffsetsSync with the lane's state as the
// metadata, kgo.PreCommitFnContext), never through kgo's marks: at a Nack,
// every StrictSyncInterval, in Commit and when the partition is revoked.
// An assigned partition's lane is restored from the metadata kgo's own
// offset fetch returned (kgo.OnOffsetsFetched), so it starts where kgo
// reads. Before each commit, and every StrictSyncInterval while it holds
// a durable pause, the Consumer reads the group's commits: a pause that
// its last commit held and the durable one does not was lifted by
// keys:resume (Lane.Resume) or keys:skip (Lane.Skip, when the durable
// state marks the record done).
//
// Invariant: a tier record is never handed out before its due time (by
// the injected clock), and the records of a tier partition are handed out
// in offset order.
// Invariant: a strict partition's committed offset never passes its first
// record not yet settled, nor a paused scope's first held record; a
// scope's records are handed out in offset order, none while an earlier
// one of it is held. A strict record goes to the dead-letter topic only by
// keys:skip or Consumer.Skip, never because a nack ran out of attempts.
package retry
