// Package canary is the broker's synthetic end-to-end probe (sluiced
// --canary): in its broker's AZ it publishes records with stable ids to the
// canary topic through the broker's own Kafka listener, consumes them in a
// consumer group of its AZ, writes an idempotent "business result" per id
// to a local store, commits the offsets, and reconciles the three states —
// the broker's (which offset acknowledged each id), the group's (the
// committed offsets, read back from the coordinator) and the business
// store's (which ids have a result) — exporting availability, latency and
// mismatches as the sluice_canary_* metrics (docs/metrics.md).
//
// Reconciler is the pure core: no I/O, the clock injected. Canary is the
// runner around it: franz-go clients (kgo, kadm) against the broker's
// Kafka listener, so every probe crosses the wire as a user's does, and a
// bbolt file as the business store (Sink).
//
// # Invariants
//
//   - Every id the broker acknowledged reaches the store exactly once: a
//     redelivery (after a crash or a lost commit) finds its id there and is
//     counted in sluice_canary_duplicates_total, never stored twice.
//   - An id is written to the store before the offset past it is
//     committed; a committed offset past an acknowledged id with no result
//     is a mismatch of kind "skipped".
//   - An acknowledged id without a result LostAfter after it was sent is a
//     mismatch of kind "lost"; one whose result names another partition or
//     offset than the acknowledgement is a mismatch of kind "offset".
//     Each id is counted at most once.
//   - An id whose publish failed (outcome unknown) is never a mismatch:
//     it may or may not be in the log.
//   - The runner's state is in memory: ids acknowledged to a canary that
//     then stops (its broker crashed) are not reconciled by the next one;
//     the store and the committed offsets survive it.
//   - The canary runs inside its broker and dies with it, so the outage a
//     crash of its broker causes is reported by the next run: each run
//     keeps a mark in the store (the last time it was available, or that
//     it is in an outage already counted, or that it stopped cleanly),
//     and a run that finds its predecessor's "available" mark counts an
//     outage that began then (sluice_canary_outages_total, "canary
//     unavailable" with the cause "the broker was not running") and logs
//     "canary available again" at its first round acknowledged in full,
//     with outage_ms measured from that mark. An outage is counted once,
//     however many runs it spans; a clean stop is no outage.
//   - While available, the mark is saved (an fsync) at each change of
//     verdict and otherwise at most once per SaveEvery (5 s): a reported
//     outage is longer than the real one by less than SaveEvery, never
//     shorter. A wiped data dir loses the mark, and with it that outage.
//
// # Formats
//
// The canary topic (default __sluice_canary, created on first use with
// Partitions partitions, replication factor min(3, brokers) and retention
// of one hour) is shared by every AZ. A record:
//
//	key:   the AZ of the canary that published it
//	value: {"id":"<az>-<node>-<run start ns>-<seq>","sent_ns":<unix ns>}
//
// Each AZ's group (__sluice_canary.<az>) reads every partition from the
// start and skips the other AZs' records (committing past them). The
// store is <data dir>/canary/results.db, a bbolt file with two buckets.
// "results" holds the results: key the id, value 20 bytes — partition
// (int32), offset (int64) and the time the result was written (int64 unix
// ns), big-endian. Results older than Retention are pruned.
//
// "state" holds one key, "mark": the mark a run leaves for the next
// (availability.go), 10 bytes:
//
//	byte 0     version (1)
//	byte 1     state: 1 available at the time, 2 in an outage (counted)
//	           since the time, 3 stopped cleanly at the time
//	bytes 2-9  the time, int64 unix ns, big-endian
//
// A reader that finds another version (or a length or state its version
// does not have) logs a warning, takes over no outage, and replaces the
// mark with its own at its first save.
package canary
