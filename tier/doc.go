// Package tier moves a partition's committed data to object storage, reads
// it back, and owns every deletion of data (docs/architecture.md). It reaches
// object storage only through tier/objstore, the read cache through cache/,
// etcd through the small Index interface (meta.Store), and a partition
// through the Partition interface (broker/partition.Partition).
//
// The pieces:
//   - retention.go: the retention state machine's pure core. It decides, from
//     a partition's local segments, its remote head, its settings, the
//     readers' pins and an injected time, what may be deleted locally, where
//     the log start moves, and which objects go after the grace period.
//   - machine.go: carries those decisions out and records them in the head;
//     DeleteTopic and AdvanceLogStart (DeleteRecords).
//   - upload.go: uploads committed data as objects: intent, PUT, commit.
//   - reader.go: reads the remote log: offset → object → chunk, verified,
//     through the cache with read-ahead; timestamps through the footers.
//   - manager.go: the per-broker service the broker's maintenance tick
//     drives; per-partition state; bounded concurrency.
//   - manifest.go, keys.go: what tier writes to the bucket besides objects.
//   - largerefs.go: the retention state machine's part for large payloads:
//     the fold of a partition's reference ledger entries, and PlanRelease,
//     which decides when a published object goes.
//   - scrub.go, inspect.go: orphans (shared by the broker and tierctl) and
//     read-only inspection for tierctl.
//   - probe.go: access checks of a store before it is trusted: the broker's
//     write probe (its readiness) and tierctl's listing.
//
// # Watermarks of a tiered partition, all only moving forward
//
//	clean ≤ pending clean ≤ log start ≤ remote end ≤ high watermark ≤ log end
//	   objects wholly below clean are deleted
//	   objects wholly below pending clean go once its grace period has run
//	   reads below the log start fail with OFFSET_OUT_OF_RANGE
//	   offsets below the remote end are in committed objects
//	   local segments wholly below the remote end may go after local retention
//
// Below the log start the objects may leave gaps: total retention may pass
// offsets that were never uploaded, and the remote log then continues at
// the local start (upload.go).
//
// # Keys in the bucket, version 1
//
//	<hash>/<topicID>/<partition>/<base, 20 digits>-<epoch>-<uuid>.obj      an object
//	<hash>/<topicID>/<partition>/manifest-<base, 20 digits>-<uuid>.json    a manifest
//
// <hash> is four hex digits of FNV-1a over the topic ID and partition, so
// partitions spread over the store's key space; <topicID> is the canonical
// UUID text; <base> the first offset; <epoch> the uploader's leader epoch;
// <uuid> is new for every attempt, so no key is ever written twice and an
// upload from a deposed leader can only be an orphan. Objects are drawn in
// tier/object/doc.go. A key that does not parse is not Sluice's: the scrub
// never deletes it. The one exception is a broker's probe object,
// sluice-probe/broker-<node id> (probe.go), which lives for the moment of a
// probe; a crash can leave it, and the broker's next probe removes it.
// Large payloads (broker/largeobj) live under large/<tenant>/<ref>: they
// are not tiering's, ParseKey refuses their keys, and so the scrub never
// deletes them (TestScrubIgnoresLargeObjects); their lives are their upload
// sessions' (meta/uploads.go) and, once published, the reference ledger's
// (below, "Large objects").
//
// # Large objects: the reference ledger
//
// A large payload (broker/largeobj) is named by envelope records
// (payload/ref): its own, and every copy of it — a retry or dead-letter
// copy, a redrive — since each is a produce carrying the same sluice.ref
// header, in any topic; the copies the broker writes itself (HTTP nack and
// keys:skip, redrive: broker/httpapi's produceCopy) are claimed like a
// publish, whether they are appended locally or forwarded. Each (object, partition) that holds such a record
// is one entry of the ledger in etcd (meta/largerefs.go draws the keys):
//
//	{open, claimed_ms, upto}   open: a claim at claimed_ms, its record's offset not yet bounded
//	                           upto: every record of the partition naming the object is below it
//
// Who changes an entry, and when:
//
//	claim (produce path, before the append;     absent/closed/open ──► open, claimed_ms = now
//	  conditioned on the session record)
//	fold (the partition's leader, each          open and claimed_ms + Settle ≤ now ──► closed, upto = max(upto, log end)
//	  retention pass: largerefs.go)             closed and upto ≤ log start ──────────► dropped
//	release (broker/largeobj's sweep:           no entry of a live topic left ──► condemned (release_due_ms = now + grace;
//	  ledger.go; entries of deleted                                              claims refused from then on)
//	  topics are dropped there)                 condemned and due ≤ now ──► session expired, then the object deleted
//
// Invariant: while a record naming an object is at or above its
// partition's log start, the object's entry for that partition exists and,
// if closed, bounds the record's offset from above; so an object is
// condemned only when every record naming it, in every topic, is below its
// log start (or its topic is deleted), and deleted only once the grace has
// run since. It rests on three facts: a claim writes the entry before its
// record is appended (and the produce fails if it cannot); a record claimed
// at T is appended before T + Settle or never — enforced, not assumed: the
// partition refuses a claimed batch it takes up later than
// envelope.AppendWithin (2 minutes) after its claims began
// (partition.AppendRequest.NotAfter; the producer's retry claims again),
// and Settle is 15 minutes — so the leader's log end at T + Settle bounds
// it; and log starts only move forward. A condemnation is a transaction conditioned on the session
// record and on no entry of the object having changed since they were
// listed, and a claim is conditioned on the session record, which the
// condemnation changes: a redrive racing the condemnation either lands its
// entry first (the object stays) or is refused (ref.ErrExpired).
//
// Crash safety: every step is one etcd transaction or an idempotent
// deletion after one. A crash after a claim and before the append leaves an
// open entry that the fold closes at the log end: the object then lives
// until retention passes that offset (a bounded leak, never a loss). The
// session turns expired before its object is deleted, and a deletion that
// failed is repeated by the sweep before the session's record is forgotten.
// Sessions never completed are aborted at their TTL; completed and never
// published ones (orphans) are expired and their objects deleted at their
// TTL (broker/largeobj). An object published before the ledger existed
// (no "ledger" flag in its session) is never released.
//
// The log start the fold uses is the leader's lowest readable offset: the
// remote log start, or its local log start when an unsealed local segment
// still holds records below that (ListOffsets answers it then). A follower
// serving consumer fetches (KIP-392) reads its own local log, whose
// deletions trail the leader's by up to a retention pass; the grace period
// covers that lag, as it covers readers still streaming the object.
//
// # Manifest, version 1
//
//	{"v":1,"objects":[{"key":…,"base":…,"next":…,"size":…,"max_ts":…,
//	                   "epoch":…,"created_ms":…}, …]}
//
// An immutable JSON object listing older committed objects of a partition,
// in offset order, non-overlapping. The head (meta/remote.go draws it)
// keeps the newest MaxObjectsInHead objects; when it holds more, the oldest
// half moves into a new manifest, PUT before the head that names it. A
// reader that meets another version refuses the manifest (ErrCorrupt).
//
// # Upload, and the fence
//
// An upload (1) records an intent (the new key) in the head, (2) PUTs the
// object under a deadline, (3) commits: the object joins the head's list
// and the remote end moves to its end. Every head write is one etcd
// transaction conditioned on the head's revision and on the partition
// state's revision at which the uploader leads the partition, so a deposed
// leader cannot change the head; its object stays an intent, which the next
// leader resolves by deleting it, or an orphan the scrub removes after the
// grace period. A new leader resumes at the remote end: no gap, no overlap.
package tier
