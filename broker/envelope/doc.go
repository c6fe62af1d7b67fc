// Package envelope is the produce paths' check of large payloads (issue
// 21): a record may carry at most its topic's max.inline.bytes inline, and
// a record that names an object (the envelope header convention of
// payload/ref) is appended only once its reference has been claimed for
// the producing tenant. The Kafka front end calls Check on each validated
// batch before it is enqueued (broker/kafka/api_produce.go); the HTTP
// publish calls Inspect on each message's record and Claim before it
// appends (broker/httpapi/http_publish.go).
//
// # What counts
//
// A record's inline size is its value's length: the payload, uncompressed,
// as a consumer receives it. Keys and headers are not counted (they are the
// producer's metadata, bounded with the whole batch by max.message.bytes),
// so a 256 KiB payload with its key and headers passes the default
// 262144, and a payload of 256 KiB + 1 byte does not.
//
// A record is an envelope when it carries any header of the convention
// (ref.IsEnvelope); it must then parse whole (ref.Parse). The producing
// tenant is the tenant whose topic it is (node.SplitName of the internal
// name): a tenant's clients name only their own topics, and an HTTP
// publish forwarded to a partition's leader over the inter-broker listener
// keeps its tenant that way.
//
// # Cost on the produce path
//
// An uncompressed batch no larger than max.inline.bytes cannot hold a
// record above it, and one without the bytes "sluice." cannot hold an
// envelope: such a batch is checked with one bytes.Contains over its
// records and nothing else. Any other batch, and every compressed batch,
// is walked record by record with broker/records (compressed batches are
// decompressed there, within the process-wide decompression slots, as
// Kafka's own broker decompresses compressed batches to validate them).
//
// # Order
//
// Every record of a batch is inspected before any reference is claimed,
// so a batch refused for one record claims nothing; claims then run in
// record order, each reference once per partition. A claim marks the
// upload session published and records the partition in the reference
// ledger (tier/doc.go, "Large objects") before the batch is enqueued;
// when the batch is later refused anyway (its partition's leader moved, a
// quota), the entry stays and is bounded by the partition's log end once
// the claim settles, so the object lives until retention passes that
// offset; a retried produce claims it again (RefClaimer answers nil for a
// session already published, and reopens the entry).
//
// Invariant: Check returns nil only when no record of the batch exceeds
// maxInline and every envelope in it parsed and was claimed for tenant;
// otherwise nothing of the batch may be appended, and the error wraps
// node.ErrMessageTooLarge or node.ErrInvalidRecord (the client's fault;
// Refusal lists the records) or is the claimer's own failure wrapped in
// node.ErrStorage (retriable).
package envelope
