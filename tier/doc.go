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
// sessions' (meta/uploads.go) and, once published, the reference ledger's.
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
