// Package broker is the Sluice server, composed from its parts: the Kafka
// front end (broker/kafka), the HTTP front end (broker/httpapi), the
// broker's part in the cluster (broker/cluster), the group coordinator
// (broker/coordinator) and the state below them all (broker/node: the data
// directory, the journal, the topic registry and the partition owners that
// sit between the wire and the write-ahead log).
//
// Broker.Run opens the node's state, starts the coordinator, binds the
// listeners, registers in the cluster, serves, and stops everything in the
// reverse order. The Broker satisfies the narrow interfaces each part
// declares for what it needs of the others (kafka.Cluster, httpapi.Cluster,
// coordinator.Cluster, node.Hooks); docs/architecture.md draws the map.
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
//   - The topic registry (broker/node/topics.go) is guarded by the Node's mu.
//     Lock order: the registry's mu before a partition's locks; no lock is
//     held while waiting on a partition's channel or on etcd.
//   - One goroutine per connection reads requests in order; produce replies
//     are awaited by a writer goroutine so requests pipelined on one
//     connection share fsyncs, and responses are still written in order.
//
// Kafka error codes exist only at the edge: broker/node/errcode.go maps
// internal errors to them in one table-tested function.
package broker
