// Package queue is the pure core of Sluice's queue semantics over ordinary
// topics: the delivery contract a topic declares in its configs, the
// decision what a negative acknowledgement (nack) leads to, the record
// headers of a retried or dead-lettered copy, the names of the retry tiers,
// and the per-partition acknowledgement tracker. It does no I/O; time and
// randomness are injected, so every decision is reproducible in tests. The
// broker's HTTP queue API (broker/httpapi/queueapi) applies it, and so does
// the Go helper for Kafka clients (payload/retry); a client in another
// language follows the same convention (the header table below is the
// whole contract).
//
// # The contract (topic configs)
//
//	delivery.order           relaxed (default) | per-key-strict | per-partition-strict
//	retry.backoff.ms         comma list of tier delays in ms, 1–16 tiers, each 1..604800000
//	                         (default 10000,60000,600000)
//	retry.jitter             fraction 0..1 (default 0.1): a delay d becomes d·(1±jitter)
//	retry.max.attempts       deliveries before a record is dead-lettered, 1..100 (default 4)
//	dead.letter.topic        the DLQ's tenant-local name; empty (default) means <topic>.dlq
//	retry.permanent.classes  comma list of error classes never retried (default permanent);
//	                         "permanent" is always one of them
//
// The strict orders are accepted and stored now; their pause behaviour
// (a nack holding back the key's or partition's later records) is issue
// 22's part 2. Until then the queue API refuses a nack on a strict topic
// (status "unsupported": the record stays outstanding, so no later record
// passes it in the committed offset) rather than break the promise by
// moving it aside. Acks and fetches work as on a relaxed topic.
//
// # What a nack decides (Decide)
//
// A nack reports that delivery number n (n ≥ 1; the first delivery from
// the source topic is 1) of a record failed with an error class. The
// record is dead-lettered when the class is permanent or n ≥
// retry.max.attempts; otherwise it goes to retry tier min(n−1, tiers−1)
// and becomes due at now + d·(1 + jitter·(2u−1)), u uniform in [0,1).
//
// # Names (RetryTopic, DeadLetterTopic)
//
// Retry tiers are ordinary topics of the group's tenant, one per (group,
// source topic, tier), created on demand with the source's partition
// count; a copy keeps its source partition:
//
//	__retry.<group>.<topic>.<tier>       when the group's name is a valid topic-name
//	                                     part without '.' and the whole fits 249
//	__retry-h.<16 hex>.<tier>            otherwise: the first 8 bytes of
//	                                     SHA-256(group "\x00" topic)
//
// The two forms cannot collide ("__retry." vs "__retry-h."), and a literal
// group without '.' ends at the first '.', so two (group, topic) pairs
// never share a tier. The dead-letter topic is per source topic (every
// group's dead letters of it go there), named by dead.letter.topic.
//
// # Headers of a retried or dead-lettered copy
//
// The copy keeps the record's key, value, timestamp, its other headers and
// its message_id header; the broker replaces every sluice.retry.* header
// with a fresh set. Values are UTF-8; numbers are decimal.
//
//	header                         value
//	sluice.retry.source.topic      the source topic's tenant-local name
//	sluice.retry.source.partition  its partition
//	sluice.retry.source.offset     the record's offset in the source topic
//	sluice.retry.group             the group that nacked it (tenant-local)
//	sluice.retry.first.seen.ms     unix ms of the first failure
//	sluice.retry.attempt           deliveries that failed so far (n ≥ 1)
//	sluice.retry.error.class       the class of the last failure
//	sluice.retry.error             the last error, at most 512 bytes
//	sluice.retry.due.ms            unix ms at which the copy may be delivered
//	                               (on a retry copy; on a dead letter, when it was dead-lettered)
//	sluice.retry.tier              the retry tier (retry copies only)
//	sluice.retry.dead.reason       permanent | exhausted (dead letters only)
//	sluice.retry.history.<i>       for i = 1..attempt: "<unix ms>,<class>,<error>"
//
// Each header appears at most once. Parse is the reader of the convention
// (fuzzed: it refuses malformed input with a precise error and never
// panics); Meta.Headers its writer. A record delivered from a retry tier
// counts as delivery attempt+1.
//
// # Due order in a tier, and the disorder jitter allows
//
// A tier has one fixed delay d, so its records are in due order but for
// jitter: a record appended later may be due up to 2·jitter·d earlier than
// one before it. A fetch of a tier stops at the first record not yet due,
// so a record is never delivered before its due time, and at most
// 2·jitter·d after it (plus the poll interval).
//
// # The acknowledgement tracker (Tracker)
//
// Per partition and group: the delivered offsets not yet acknowledged, in
// offset order. The committed offset is the first of them, or the next
// offset to deliver when none is outstanding: it advances over the
// acknowledged prefix, and an acknowledgement out of order is remembered
// until the gap before it closes. Memory is bounded: at most Limit
// delivered offsets from the committed offset on are remembered
// (DefaultTrackerLimit, 10,000, about 16 bytes each); a fetch hands out
// nothing more of a partition at the limit until the oldest is
// acknowledged.
//
// Invariant: the committed offset never passes an offset that was delivered
// and not acknowledged (at least once: a crash or a rebalance redelivers
// from the committed offset, which may duplicate and never loses).
package queue
