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
//	visibility.timeout.ms    0..43200000 (default 0: none): a queue delivery neither acked
//	                         nor nacked this long after it was handed out is delivered
//	                         again (Lane.Expire; on a strict order with the later
//	                         deliveries of its key or partition, in order)
//
// On a strict order a nack does not move the record aside: it pauses
// (Lane, "Strict order: pauses" below). There retry.max.attempts and the
// permanent classes bound only the Go helper's retries in place: where
// Decide says dead letter, the helper keeps the pause without a due time
// (Outcome Paused) and the record goes to the DLQ only by keys:skip.
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
// one before it. A fetch of a tier stops at the first record not yet due
// (the HTTP queue's, the Go helper's, and the broker's Kafka Fetch of a
// tier for any consumer), so a record is never delivered before its due
// time, and at most 2·jitter·d after it (plus the poll interval).
//
// # Redrive (redrive.go)
//
// A redrive publishes dead letters again (broker/httpapi/redriveapi runs
// it). Its scope (RedriveScope) is frozen at the DLQ's high watermarks when
// it starts; a copy goes to its source partition modulo the target's
// partitions (RedrivePartition), keeps key, value, timestamp, message_id
// and its other headers, loses every sluice.retry.* header, and carries
//
//	sluice.redrive.source   "<job id>/<dlq partition>/<dlq offset>"
//
// by which a restarted redrive finds what it already published.
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
//
// The broker's queue API and the Go helper's Consumer (payload/retry) use
// the Lane (below), which keeps the same
// invariant and adds pauses and a durable state; the Tracker is its
// relaxed ancestor, kept for its tests and clients.
//
// # Strict order: pauses (Lane)
//
// A lane is one partition's deliveries for one group. A record's scope is
// its key on per-key-strict (a record without a key has the scope of all
// such records), the whole partition on per-partition-strict, and nothing
// on relaxed (ScopeOf). A nack of an in-flight record R at offset F on a
// strict order pauses R's scope at F: R waits, every later in-flight
// record of the scope is withdrawn (waits; an ack of it is refused), and
// every later record of the scope read afterwards waits too
// (per-partition-strict: reading stops at F). Other scopes go on. Resume
// lifts the pause: the scope's waiting records are delivered again in
// offset order (Ready, Redeliver), each before any later record of the
// scope. Skip settles R as done (the caller dead-lettered it) and resumes
// the rest. Neither happens without an operator (keys:resume, keys:skip),
// except that the Go helper lifts a pause whose record it retried in
// place and that then succeeded. Every offset in [committed, next) is in flight, waiting or
// done; the committed offset is the first one in flight or waiting, so it
// never passes F while the scope is paused.
//
// The lane's durable state is written with every commit of the partition,
// in the commit's metadata (Kafka's offset.metadata.max.bytes, 4096), so
// a rebalance, a consumer crash or a coordinator failover keeps it:
//
//	sluice.queue/1 {"d":[[from,to],...],"p":[{"s":"<base64 scope>","f":F,"t":<unix ms>,"c":"<class>","a":n,"u":<unix ms>}],"o":R}
//
//	d   done offsets above the committed offset (acknowledged out of
//	    order), as ranges [from, to), increasing, at most 64; ranges are
//	    dropped from the highest when the state would pass 4096 bytes (a
//	    dropped range is delivered again: a duplicate, never a loss)
//	p   the pauses, at most 16 per partition: scope id ("" the partition,
//	    "n" no key, "k"+key for a key ≤ 64 bytes, "h"+SHA-256(key)
//	    otherwise), first held offset F (≥ the committed offset), since,
//	    and the nack's error class (of the last failure, on a retried pause)
//	a,u on a pause its client retries by itself (the Go helper for Kafka
//	    clients, payload/retry): the failed deliveries of the record at F
//	    so far (1..100) and when it is delivered again; both or neither.
//	    Without them (the HTTP queue's pauses, and a Go helper's whose
//	    record has failed its last attempt or a permanent class:
//	    Lane.ClearRetry) the pause waits for keys:resume or keys:skip;
//	    no client dead-letters the record and resumes by itself. Either
//	    endpoint lifts either kind.
//	o   the operator revision R (absent: 0): raised by one by every
//	    keys:resume and keys:skip. The coordinator refuses a consumer's
//	    commit of a state whose R is below the committed one, and an
//	    operator's that does not raise it (CheckCommit, commitcheck.go):
//	    a consumer that had not yet seen an operator's change cannot
//	    bring a lifted pause back; it reads the committed state again.
//
// A lane restored from it (FromState) reads again from the committed
// offset: done records are skipped, records of a paused scope at or after
// F wait, every other record is delivered. Metadata without the prefix (a
// Kafka client's commit) is an empty state. A nack that would pause a
// 17th scope of a partition is refused (ErrPauseLimit; the record stays in
// flight). Waiting records count against the lane's limit, so a paused
// key with more than the limit of later records ends up holding the
// partition (a lane at its limit reads nothing more).
package queue
