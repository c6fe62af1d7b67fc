// Package queueapi is the HTTP consumer API as a queue (issue 22, part 1):
//
//	POST /v1/groups/{g}/messages:fetch  with no topic, partition or offset
//	POST /v1/groups/{g}/messages:ack    {member_id, generation, acks: [{topic, partition, offset}]}
//	POST /v1/groups/{g}/messages:nack   {member_id, generation, nacks: [{topic, partition, offset, error_class, error}]}
//	GET  /v1/topics/{t}/messages        ?partition=&offset=&limit= : dead letters with their
//	                                    parsed history (deadletters.go draws the answer)
//
// and the metrics sluice_dlq_depth and sluice_dlq_oldest_age_seconds
// (metrics.go), which deploy/alerts.yml alerts on.
//
// A queue fetch returns records from every partition assigned to the
// member, from the tracker's delivered position (at first the group's
// committed offset, or the log start), and the due records of the group's
// retry tiers of those partitions (queue.RetryTopic; a tier's partition p
// belongs to the member that owns the source's partition p). Each record
// carries topic, partition, offset, message_key, message_id, headers and
// attempt (1 from the source; attempt+1 of its sluice.retry.attempt header
// from a tier). A tier is read up to its first record not yet due, so no
// record is handed out before its due time (queue/doc.go bounds how late).
//
// An ack marks a delivered record done; the group's committed offset of the
// partition moves over the acknowledged prefix (queue.Tracker). A nack
// decides with the source topic's contract (queue.Contract.Decide), writes
// a copy with the sluice.retry.* headers to the tier or the dead-letter
// topic through the broker's own produce path (acknowledged by the replicas
// like any publish), and then acknowledges the record, so the offset moves
// past it: relaxed order. Tiers and dead-letter topics are created on
// demand with the source's partition count; a copy keeps its partition
// (modulo the partitions of a dead-letter topic created beforehand).
//
// State and its invariants. The coordinator of a group serves all its
// requests (the caller forwards them there), so one API value holds the
// group's trackers, per partition, for the group's current generation.
//   - At least once: a record is acknowledged only after its copy is
//     written; the committed offset never passes an unacknowledged
//     delivery. A crash between the copy and the commit redelivers the
//     record (a duplicate copy may follow; the message_id is kept).
//   - A new generation (a rebalance, a member lost) starts every tracker
//     again from the committed offsets: deliveries not acknowledged are
//     made again. So does a coordinator failover (the trackers are in
//     memory; only committed offsets are durable).
//   - Memory: at most queue.DefaultTrackerLimit delivered offsets per
//     partition and group are remembered; a partition at the limit is not
//     read until its oldest delivery is acknowledged.
//
// Part 2 seams (not done here): on per-key-strict and per-partition-strict
// topics a nack is refused (status "unsupported", the record stays
// outstanding) instead of pausing; the pause goes where nackOne checks
// Contract.IsStrict: hold the key or partition instead of acknowledging,
// and skip its later records in round; a visibility timeout for deliveries never acked within
// one generation; redrive from the DLQ (the Kafka Go helper is
// payload/retry: same headers and names, queue/); the fetch long-polls by polling every
// pollInterval rather than waking on appends.
package queueapi
