// Package broker is the Sluice server: the Kafka protocol listener (one file
// per API key, api_*.go, behind the dispatch table in dispatch.go), the HTTP
// endpoints, the inter-broker listener (interbroker.go: replica fetches and
// election messages, on a port of their own that clients are never told),
// the topic registry and the partition owners that sit between the wire and
// the write-ahead log.
//
// # Ownership and locking
//
//   - Each partition has one owner goroutine (broker/partition) that holds its
//     wal.Log for writing, its producer state and its high watermark. Produce
//     handlers hand batches to it over a bounded channel and wait for the
//     reply; the owner appends every queued batch, fsyncs once (group commit)
//     and only then publishes the new high watermark and answers.
//   - Readers (Fetch, ListOffsets) read the wal concurrently and see only
//     offsets below the published high watermark.
//   - The topic registry (topics.go) is guarded by Broker.mu. Lock order:
//     Broker.mu before a partition's locks; no lock is held while waiting on a
//     partition's channel or on etcd.
//   - One goroutine per connection reads requests in order; produce replies
//     are awaited by a writer goroutine so requests pipelined on one
//     connection share fsyncs, and responses are still written in order.
//
// Kafka error codes exist only at this edge: errcode.go maps internal errors
// to them in one table-tested function.
package broker
