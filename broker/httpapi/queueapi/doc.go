// Package queueapi is the HTTP consumer API as a queue (issue 22, part 1):
//
//	POST /v1/groups/{g}/messages:fetch  with no topic, partition or offset
//	POST /v1/groups/{g}/messages:ack    {member_id, generation, acks: [{topic, partition, offset}]}
//	POST /v1/groups/{g}/messages:nack   {member_id, generation, nacks: [{topic, partition, offset, error_class, error}]}
//	POST /v1/groups/{g}/keys:resume     {topic, partition, message_key | key_base64 | null_key}
//	POST /v1/groups/{g}/keys:skip       the same (pause.go)
//	GET  /v1/topics/{t}/messages        ?partition=&offset=&limit= : dead letters with their
//	                                    parsed history (deadletters.go draws the answer)
//
// and the metrics sluice_dlq_depth and sluice_dlq_oldest_age_seconds
// (metrics.go), which deploy/dlq.rules.yml alerts on, and
// sluice_queue_paused_keys and sluice_queue_paused_oldest_age_seconds
// (pause.go), and sluice_queue_retries_total and
// sluice_queue_dead_letters_total (metrics_copies.go).
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
// partition moves over the acknowledged prefix (queue.Lane). On a relaxed
// topic a nack decides with the source topic's contract
// (queue.Contract.Decide), writes a copy with the sluice.retry.* headers
// to the tier or the dead-letter topic through the broker's own produce
// path (acknowledged by the replicas like any publish), and then
// acknowledges the record, so the offset moves past it. Tiers and
// dead-letter topics are created on demand with the source's partition
// count; a copy keeps its partition (modulo the partitions of a
// dead-letter topic created beforehand).
//
// On a per-key-strict or per-partition-strict topic a nack pauses the
// record's key (or partition) for the group instead (status "paused"; the
// later deliveries of the key it withdrew are listed): the fetch holds
// back the key's later records and goes on with the other keys;
// keys:resume delivers the held records again from the nacked one, in
// order; keys:skip dead-letters the nacked record (dead reason "skipped")
// and resumes the rest. queue/doc.go ("Strict order: pauses") states the
// lane's rules and draws its durable state.
//
// State and its invariants. The coordinator of a group serves all its
// requests (the caller forwards them there), so one API value holds the
// group's lanes, per partition, for the group's current generation.
//   - At least once: a record is acknowledged only after its copy is
//     written; the committed offset never passes a record neither
//     acknowledged nor moved aside, nor the first held record of a pause.
//     A crash between the copy and the commit redelivers the record (a
//     duplicate copy may follow; the message_id is kept).
//   - Durable: every ack, nack that pauses, resume and skip commits the
//     partition's offset with the lane's state in the commit's metadata
//     (queue.EncodeState: the acks out of order and the pauses), before
//     the answer. A new generation (a rebalance, a member lost) or a
//     coordinator failover restores the lanes from the commits: the
//     pauses hold, acknowledged records are not delivered again (but for
//     ranges trimmed to fit 4096 bytes), and deliveries in flight are
//     made again.
//   - Memory: at most queue.DefaultTrackerLimit delivered or held offsets
//     per partition and group are remembered; a partition at the limit is
//     not read until one is settled.
//
// A topic's visibility.timeout.ms (0, the default: none) makes a delivery
// neither acked nor nacked in that time be delivered again, checked at
// each fetch round (queue.Lane.Expire; an ack of it meanwhile is refused).
//
// A copy (retry or dead letter) is written through Backend.Produce, which
// claims its object references first (httpapi's produceCopy); a copy it
// refuses fails that record's nack (status error, the record stays
// outstanding, nothing committed past it) or the keys:skip.
//
// Not done here: redrive from the DLQ (redriveapi does it), the Kafka
// side (the Go helper payload/retry: same headers and names, queue/; its
// Consumer pauses a strict topic's keys in the same commit metadata, so
// keys:resume and keys:skip work on its groups too); the fetch long-polls
// by polling every pollInterval rather than waking on appends.
// A Kafka client's commit in a queue group replaces the lane's state (its
// metadata is not the lane's): do not mix Kafka and HTTP queue consumers
// in one group.
package queueapi
