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
// aside would let later records pass it. The broker-side pause of a key
// (keys:resume) is the HTTP queue API's only: a Kafka consumer of a strict
// topic holds the failed key itself, and must not commit past the failed
// record (in practice it pauses the partition, PauseFetchPartitions, until
// the repair).
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
// Invariant: a tier record is never handed out before its due time (by
// the injected clock), and the records of a tier partition are handed out
// in offset order.
package retry
