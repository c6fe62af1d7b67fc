// Package loadgen owns Sluice's workload generator: open-loop and
// closed-loop producers, consumers (consumer groups or direct partition
// assignment), the named scenarios, latency histograms and the reports
// (table, JSON, per-second CSV and a hand-drawn SVG chart).
//
// It speaks to brokers only over the wire, through a System: the Kafka
// protocol via franz-go (any Kafka-protocol cluster, Sluice included),
// Sluice's HTTP publish API (consuming, if at all, over Kafka), or NATS
// JetStream as a peer for comparison. It never imports broker internals
// (docs/architecture.md).
//
// # Open loop
//
// With a target rate, each producer owns a Pacer that lays send times on a
// fixed grid (start + n/rate). A record's latency is measured from its
// scheduled time (or from the actual send, whichever is earlier), so a
// stalled broker that makes the producer fall behind shows up as latency
// instead of silently lowering the offered load (coordinated omission).
// Records carry their scheduled time as an 8-byte big-endian Unix
// nanosecond header (HeaderTimestamp), which consumers read for end-to-end
// latency.
//
// # Goroutines
//
// Runner.Execute owns every goroutine of a run: one per producer, one
// acknowledgment collector per JetStream producer, one per consumer, the
// per-second sampler and the scenario's monitor (drain detection, the
// consumer kill). All stop on context cancellation and are waited for
// before Execute returns. Shared counters live in the collector (atomics
// and one mutex for histograms and per-partition positions).
package loadgen
